"""Thin transports to the outside world (Slack, GitHub): timeouts, bounded retries, errors sorted at the edge."""
