"""Re-examine series after new results arrive, and store what the detector says as findings.

Reads the series' default-branch history, runs the pure detector, and replaces this detector's findings on
the series with the new set in one transaction: running it twice on the same data changes nothing.

Only the newest ``HISTORY_LIMIT`` measured commits are read on each write, so the cost of a submission does not
grow with a series' age. The detector judges a change against the level just before it (its windows are 100
commits), so the commits at the start of that tail, which lack their own past, are ``SETTLED``: findings there
are left as an earlier read stored them, neither added nor removed. A change older than the tail is final.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy.orm import Session, sessionmaker

from runners.artifacts import ArtifactStore
from service.detect.types import Detector, SeriesPoint
from service.model.result_roofline import EFFICIENCY_METRIC
from service.pipeline.alerts import GroupingOutcome, group_series
from service.pipeline.attribution import attribute_findings
from service.pipeline.bisect import FollowUpPolicy, GitCommitLister, advance_follow_ups
from service.pipeline.static_detection import STATIC_DETECTOR, detect_static
from service.store import findings as stored
from service.store.db import unit_of_work
from service.store.findings import findings_of_series
from service.store.locks import lock_series
from service.store.models import Alert, Finding, Series
from service.store.series_history import default_branch_samples

if TYPE_CHECKING:
    from service.pipeline.notify import SlackNotifier
    from service.pipeline.ports import TaskQueue

# Metrics that measure speed; any other metric a benchmark reports (rel_error, recall...) measures its numerics,
# which regress too: a low-precision kernel that loses accuracy is flagged even when it got faster.
SPEED_METRICS = frozenset({"wall_time", "device_time", "execution_time", "algbw"})
# Efficiency (the roofline_fraction series ingest derives from wall time) is a kind of its own rather than "time":
# it moves with time at fixed counts, but also when the counts or a host's calibrated roof move, and a bisection
# (which re-measures time, service/pipeline/bisect.py) is owed to time findings only.
STATISTICAL_KINDS = ("time", "numerics", "efficiency")


def finding_kind(metric: str) -> str:
    if metric == EFFICIENCY_METRIC:
        return "efficiency"
    return "time" if metric in SPEED_METRICS else "numerics"


# Measured commits of a series read on each write (five of the detector's windows), and the first of them whose
# findings stay as stored (a window's worth: a change there would be judged without the level before it).
HISTORY_LIMIT = 500
SETTLED = 100


def default_branch_points(session: Session, series: Series,
                          limit: int | None = None) -> tuple[list[SeriesPoint], bool]:
    """Per commit on the repository's default branch, every ok sample of the series with the runs that measured
    them kept apart (``run_sizes``, runs in id order): the newest ``limit`` measured commits, or all of them; and
    whether older ones were left out. The detector needs the runs: on a shared host one process's median moves
    20-100 % from the next one's, so a pool of every sample is the median of whichever run took the most."""
    rows, cut = default_branch_samples(session, series.id, limit)
    by_run: dict[tuple[int, int], dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    for commit_id, position, run_id, samples in rows:
        if samples:  # a run with no sample of the series did not measure it
            by_run[(position, commit_id)][run_id].extend(samples)
    points = []
    for (position, commit_id), runs in sorted(by_run.items()):
        ordered = [runs[run_id] for run_id in sorted(runs)]
        points.append(SeriesPoint(position=position, commit_id=commit_id,
                                  samples=[v for run in ordered for v in run],
                                  run_sizes=tuple(len(run) for run in ordered)))
    return points, cut


def detect_series(session: Session, series_id: int, detector: Detector, limit: int = HISTORY_LIMIT,
                  settled: int = SETTLED) -> list[int]:
    """Run ``detector`` on the newest ``limit`` commits of one series and make its stored findings there match
    (those in the ``settled`` first commits of a cut history stay as they are); returns the finding ids."""
    series = session.get(Series, series_id)
    if series is None:
        return []
    points, cut = default_branch_points(session, series, limit)
    changes = detector.detect(points, series.direction)
    # A history longer than the limit was cut: its first commits lack the level before them.
    live_from = points[min(settled, len(points) - 1)].position if cut else None
    if live_from is not None:
        by_id = {p.commit_id: p.position for p in points}
        changes = [c for c in changes if by_id[c.commit_id] >= live_from]

    # Findings of a detector this service no longer runs (an older engine) would otherwise stay forever.
    stored.delete_other_detectors(session, series_id, STATISTICAL_KINDS, detector.name)
    existing = {f.commit_id: f for f in stored.detector_findings(session, series_id, detector.name, live_from)}
    kind = finding_kind(series.metric)
    keep: set[int] = set()
    now = datetime.now(UTC)
    for change in changes:
        finding = existing.get(change.commit_id)
        if finding is None:
            finding = Finding(series_id=series_id, commit_id=change.commit_id, detector=detector.name,
                              kind=kind, created_at=now, attribution={})
            session.add(finding)
        if finding.alert_id is not None and finding.magnitude is not None and _revised(finding.magnitude,
                                                                                    change.magnitude):
            # Its alert shows this figure (its page, its chat message): the alert changed with it, so that the
            # notifier's sweep (an alert newer than its message) edits the message rather than leave the first one.
            alert = session.get(Alert, finding.alert_id)
            if alert is not None:
                alert.updated_at = now
        finding.previous_commit_id = change.previous_commit_id
        finding.detector_version = detector.version
        finding.direction = change.kind
        finding.magnitude = change.magnitude
        finding.confidence = change.noise_units
        finding.p_value = change.p_value
        finding.value_before = change.before
        finding.value_after = change.after
        keep.add(change.commit_id)
    stale = [cid for cid in existing if cid not in keep]
    if stale:
        stored.delete_findings_at(session, series_id, detector.name, stale)
    session.flush()
    return stored.detector_finding_ids(session, series_id, detector.name)


# A change's size re-estimated on a longer history moves a little with every commit that lands; an alert (and its
# chat message) follows it when it moves by more than this factor (+226.6 % -> +404.9 % is 1.55x; +100.3 % ->
# +100.5 % is no news, and editing the message for it would make every commit an edit).
REVISED_BY = 1.1


def _revised(before: float, after: float) -> bool:
    """Whether a change's size (after / before - 1, so above -1) moved by more than REVISED_BY either way."""
    return abs(math.log((1 + after) / (1 + before))) > math.log(REVISED_BY)


def detect_many(session: Session, series_ids: Sequence[int], detector: Detector,
                artifacts: ArtifactStore | None = None,
                on_grouped: Callable[[Session, GroupingOutcome], object] | None = None) -> int:
    """Detect, attribute and group, in the caller's transaction. ``on_grouped`` sees what grouping changed, in
    that same transaction: notification marks the alerts it owes a message there, so they commit together."""
    lock_series(session, series_ids)
    found = sum(len(detect_series(session, sid, detector)) for sid in series_ids)
    # Static findings (exact code diffs) and every finding's attribution, before grouping so that static
    # findings join their commit range's alert. Both idempotent, both cheap when nothing changed; with
    # ``artifacts`` the attribution also diffs the changed kernels' disassembly.
    detect_static(session, series_ids, artifacts)
    attribute_findings(session, findings_of_series(session, series_ids, exclude_detector=STATIC_DETECTOR), artifacts)
    outcome = group_series(session, series_ids)  # findings at one commit range become one alert, in this transaction
    if on_grouped is not None:
        on_grouped(session, outcome)
    return found


# --- detection and what follows it (the detect job, service/pipeline/jobs.py) ---------------------------------

def follow_up(sessions: sessionmaker[Session], queue: TaskQueue, series_ids: Sequence[int],
              policy: FollowUpPolicy | None, repos_dir: Path, notifier: SlackNotifier | None = None) -> None:
    """After detection committed: advance bisect and confirm jobs, in a transaction of their own, then hand the
    runs they ask for to the queue (only after that transaction committed, so a run never races its job row).
    A job that ended there owes its alert's thread a reply: marked in that transaction, sent after it."""
    if policy is None or not (policy.bisect or policy.confirm):
        return
    verdicts: list[int] = []
    with unit_of_work(sessions) as session:
        orders = advance_follow_ups(session, list(series_ids), GitCommitLister(repos_dir), policy)
        if notifier is not None:
            verdicts = notifier.mark_verdicts(session, list(series_ids))
    if orders:
        queue.enqueue_runs(orders)
    if notifier is not None:
        notifier.send(verdicts)


def detect_and_follow_up(sessions: sessionmaker[Session], queue: TaskQueue, series_ids: Sequence[int],
                         detector: Detector, artifacts: ArtifactStore | None, policy: FollowUpPolicy | None,
                         repos_dir: Path | None, notifier: SlackNotifier | None = None) -> int:
    """Detection in one transaction, then its follow-ups, then the announcements of the alerts it made. The
    announcements go last: a new alert whose change the follow-up starts bisecting is held until that ends
    (each bisection step replaces the alert with a narrower one; see ``service.pipeline.notify``)."""
    marked: list[int] = []

    def on_grouped(session: Session, outcome: GroupingOutcome) -> None:
        assert notifier is not None
        marked.extend(notifier.mark_grouped(session, outcome))

    with unit_of_work(sessions) as session:
        found = detect_many(session, list(series_ids), detector, artifacts,
                            on_grouped=on_grouped if notifier is not None else None)
    if repos_dir is not None:
        follow_up(sessions, queue, series_ids, policy, repos_dir, notifier)
    if notifier is not None:
        notifier.send(marked)
    return found
