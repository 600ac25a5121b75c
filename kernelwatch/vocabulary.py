"""The closed vocabularies: every polarity, kind, state, trigger and verdict KernelWatch stores, one enum each.

Each is a ``StrEnum``, so a member is the string it stands for (``Polarity.LOWER_IS_BETTER == "lower_is_better"``,
in JSON, in f-strings and in SQL alike): the stored values and every face that shows them are the strings they
always were. The database holds each column to its enum with a CHECK constraint (``service/store/models.py``
declares them from these enums; migration 0019 writes the same lists out literally, and
tests/unit/test_vocabulary.py holds the two to each other). Growing a vocabulary therefore takes a migration that
widens its CHECK; shrinking one takes a migration that first maps the stored rows of the value that goes.

Two words that used to mean two things each, apart now:

- a metric's **polarity** (``Polarity``): which way is better, lower (time) or higher (bandwidth, recall). The
  manifest, the ``benchmark`` and ``series`` tables and the compare JSON call it ``direction``, as they always
  have.
- a change's **kind** (``ChangeKind``): whether it made the metric worse or better for its polarity, a
  regression or an improvement. A finding stores it as its ``direction``; a change point calls it its ``kind``.

Standard library only, like the rest of this package: the runners may use it too.
"""

from __future__ import annotations

from enum import StrEnum


class Polarity(StrEnum):
    """Which way a metric is better: ``benchmark.direction``, ``series.direction``, the manifest's result
    ``direction``."""

    LOWER_IS_BETTER = "lower_is_better"  # times
    HIGHER_IS_BETTER = "higher_is_better"  # bandwidth, recall, roofline fraction


class ChangeKind(StrEnum):
    """Which way a change went, for its metric's polarity: ``finding.direction``, a change point's ``kind``."""

    REGRESSION = "regression"
    IMPROVEMENT = "improvement"


class FindingKind(StrEnum):
    """What a finding is about (``finding.kind``): a speed metric, the generated code, a numerics metric, or the
    roofline fraction derived from wall time."""

    TIME = "time"
    STATIC = "static"
    NUMERICS = "numerics"
    EFFICIENCY = "efficiency"


class AlertKind(StrEnum):
    """What an alert's findings say together (``alert.kind``): all regressions, all improvements, or both."""

    REGRESSION = "regression"
    IMPROVEMENT = "improvement"
    MIXED = "mixed"


class AlertState(StrEnum):
    """An alert's triage state (``alert.state``, ``alert_note.state_from`` and ``state_to``); the rules between
    them are ``service/detect/grouping.py``'s."""

    UNTRIAGED = "untriaged"
    ACKNOWLEDGED = "acknowledged"
    INVESTIGATING = "investigating"
    INVALID = "invalid"
    WONTFIX = "wontfix"
    FIXED = "fixed"
    IMPROVEMENT = "improvement"


class NotificationState(StrEnum):
    """How far an alert's chat announcement got (``alert_notification.state``): to send (or a retry waiting),
    sent, or given up."""

    PENDING = "pending"
    SENT = "sent"
    FAILED = "failed"


class JobState(StrEnum):
    """A bisection's or confirmation's state (``bisect_job.state``). Open: pending, running; finished: done (a
    verdict), failed; cancelled: stopped because its change point moved or went (no verdict)."""

    PENDING = "pending"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"


class JobPurpose(StrEnum):
    """What a follow-up job does (``bisect_job.purpose``): isolate a commit, or re-run base and head to confirm."""

    BISECT = "bisect"
    CONFIRM = "confirm"


class DeliveryState(StrEnum):
    """A GitHub webhook delivery's state (``webhook_delivery.state``): stored, handed to the queue, handled, or
    dead-lettered."""

    RECEIVED = "received"
    QUEUED = "queued"
    DONE = "done"
    FAILED = "failed"


class PullRequestState(StrEnum):
    """A followed pull request's state (``pull_request.state``): a fork head waiting for a maintainer's approval,
    measured, or closed."""

    WAITING = "waiting"
    RUNNING = "running"
    CLOSED = "closed"


class Trigger(StrEnum):
    """What made a run (``run.trigger``, the manifest's ``trigger``); schedule: a tracked tip `kernelwatch beat`
    ran."""

    PUSH = "push"
    PR = "pr"
    MANUAL = "manual"
    BISECT = "bisect"
    CONFIRM = "confirm"
    SCHEDULE = "schedule"


class RunStatus(StrEnum):
    """How a run ended (``run.status``, the manifest's ``status``)."""

    COMPLETE = "complete"
    PARTIAL = "partial"
    FAILED = "failed"


class ResultStatus(StrEnum):
    """How one benchmark of a run ended (``result.status``, a manifest result's ``status``)."""

    OK = "ok"
    FAILED = "failed"


class RooflineBound(StrEnum):
    """Which roof bounds a result (``result.roofline_bound``; null where no roofline was drawn)."""

    COMPUTE = "compute"
    MEMORY = "memory"


class ComparisonVerdict(StrEnum):
    """A benchmark's verdict in a two-point comparison (``stored_comparison_row.verdict``, the compare JSON's
    ``verdict``; ``service/detect/compare.py`` decides it)."""

    REGRESSION = "regression"
    IMPROVEMENT = "improvement"
    UNCHANGED = "unchanged"
    INCONCLUSIVE = "inconclusive"
    FAILED = "failed"
    NEW = "new"
    MISSING = "missing"
