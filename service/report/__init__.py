"""PURE formatters: CLI tables, PR comments, Slack blocks; a report in, text or plain data out (golden-file tested)."""
