"""Retention: remove the raw artifacts of old runs from the store, keep everything derived from them.

What goes is the bytes of an artifact (trace, HLO dump, object file, disassembly) in the content-addressed store.
What stays is every row: the artifact itself (marked ``pruned_at``), its links to results, the results with their
samples, summary statistics and roofline figures, the records parsed from it (op stats, HLO modules, kernel
code), findings and alerts. Pages that would show a pruned artifact's text say "pruned by retention on <date>".

The rules (:func:`plan_prune`), for a cutoff of ``now - older_than``:

- An artifact is old when every run whose results reference it finished before the cutoff. Content addressing
  shares bytes between runs (an unchanged kernel dumps the same HLO), so one recent run keeps an old artifact.
  An artifact no result references any longer is old when it was stored before the cutoff.
- Kept, however old, while an alert needs it: the artifacts of every run at a commit named by an alert that is
  not closed (``OPEN_ALERT_STATES``) or by one of its findings (their commit and the commit before), plus the
  results whose records the findings' attribution read. The Diff page of an open alert always has its code. A
  finding not grouped into an alert yet counts as open.
- Kept, however old, as the newest evidence of a series: the artifacts captured, in the newest run with an ``ok``
  result of each series, for that series' benchmark and environment. The latest drill-down of every series
  works, including a benchmark that has not been run for a year.

:func:`apply_prune` is the I/O edge. It marks the rows in one transaction and commits, and only then deletes the
files: a crash between the two leaves rows marked with their files still there, and the next run (which plans
marked rows again, as long as they stay old) deletes them. A file already gone counts as done.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy.orm import Session

from runners.artifacts import ArtifactStore
from service.store import retention
from service.store.times import utc

# Alerts someone still has to act on; the others (invalid, wontfix, fixed, improvement) are closed.
# (A subset of service.detect.grouping.STATES; tests/unit/test_prune_durations.py holds the two together.)
OPEN_ALERT_STATES: frozenset[str] = frozenset({"untriaged", "acknowledged", "investigating"})

# A temporary file this old in the store is a write whose process died (an upload is written in seconds).
UNFINISHED_WRITE_AGE_S = 3600.0
_UNITS = {"m": timedelta(minutes=1), "h": timedelta(hours=1), "d": timedelta(days=1), "w": timedelta(weeks=1)}
_DURATION = re.compile(r"(?:\d+[mhdw])+")
_PART = re.compile(r"(\d+)([mhdw])")


def parse_duration(text: str) -> timedelta:
    """``90d``, ``12h``, ``30m``, ``2w``, or parts together (``1w3d``): minutes, hours, days, weeks. Raises
    ValueError saying what is accepted."""
    value = text.strip().lower()
    if not _DURATION.fullmatch(value):
        raise ValueError(f"{text!r} is not a duration: give a whole number and a unit, m (minutes), h (hours), "
                         f"d (days) or w (weeks), e.g. 90d, 12h, 30m, 2w")
    try:
        total = sum((int(n) * _UNITS[unit] for n, unit in _PART.findall(value)), timedelta())
    except OverflowError:
        raise ValueError(f"{text!r} is too long a duration") from None
    if total <= timedelta():
        raise ValueError(f"{text!r} is not a positive duration")
    return total


@dataclass(frozen=True)
class PruneCandidate:
    id: int
    sha256: str
    kind: str
    size: int  # uncompressed bytes
    pruned_at: datetime | None  # marked by an earlier prune (its file may remain after a crash)


@dataclass(frozen=True)
class PrunePlan:
    now: datetime
    older_than: timedelta
    cutoff: datetime
    artifacts: tuple[PruneCandidate, ...]  # old and not kept, by id
    kept_for_alerts: int  # old, kept because an open alert needs them
    kept_as_newest: int  # old, kept as the newest evidence of a series (and not already for an alert)

    @property
    def to_mark(self) -> int:
        return sum(1 for a in self.artifacts if a.pruned_at is None)

    @property
    def raw_bytes(self) -> int:
        return sum(a.size for a in self.artifacts if a.pruned_at is None)


@dataclass(frozen=True)
class PruneOutcome:
    artifacts: int  # the plan's, less any a run stored since the plan references
    marked: int  # rows newly marked pruned
    files_deleted: int
    bytes_freed: int  # on disk (the store keeps files compressed)
    files_missing: int  # already gone: deleted by an earlier, interrupted prune
    unfinished_swept: int = 0  # temporary files of writes a killed process never finished


def _old_artifacts(session: Session, cutoff: datetime) -> list[PruneCandidate]:
    return [PruneCandidate(id, sha, kind, size, pruned_at)
            for id, sha, kind, size, pruned_at in retention.old_artifacts(session, cutoff)]


def _basis_results(attributions: Iterable[dict[str, object] | None]) -> set[int]:
    """The results whose HLO and kernel records attribution read (its stored ``basis``), which the Diff page shows."""
    found: set[int] = set()
    for attribution in attributions:
        basis = (attribution or {}).get("basis")
        if not isinstance(basis, dict):
            continue
        for side in ("before", "after"):
            value = (basis.get(side) or {}).get("static_result") if isinstance(basis.get(side), dict) else None
            if isinstance(value, int):
                found.add(value)
    return found


def _kept_for_alerts(session: Session) -> set[int]:
    states = sorted(OPEN_ALERT_STATES)
    kept = retention.artifacts_at_open_commits(session, states)
    basis = sorted(_basis_results(retention.open_finding_attributions(session, states)))
    kept.update(retention.artifacts_of_results(session, basis))
    return kept


def plan_prune(session: Session, older_than: timedelta, now: datetime) -> PrunePlan:
    """What a prune at ``now`` would remove (the module docstring has the rules); reads only."""
    now = utc(now)
    try:
        cutoff = now - older_than
    except OverflowError:
        raise ValueError(f"{older_than} reaches back before the calendar starts") from None
    old = _old_artifacts(session, cutoff)
    if not old:
        return PrunePlan(now, older_than, cutoff, (), 0, 0)
    for_alerts = _kept_for_alerts(session)
    as_newest = retention.artifacts_of_newest_runs(session) - for_alerts
    chosen = tuple(a for a in old if a.id not in for_alerts and a.id not in as_newest)
    return PrunePlan(now, older_than, cutoff, chosen,
                     kept_for_alerts=sum(1 for a in old if a.id in for_alerts),
                     kept_as_newest=sum(1 for a in old if a.id in as_newest))


def apply_prune(session: Session, store: ArtifactStore, plan: PrunePlan, now: datetime | None = None) -> PruneOutcome:
    """Mark the plan's rows pruned and commit (the session's transaction), then delete their files.

    The plan is checked again first, in this transaction, so a run stored since the plan was made keeps what it
    references. What is left is the moment between that check and a file's deletion: a run submitted then that
    references those very bytes (its runner skipped the upload, the file being there) loses them, and its pages
    say so. Retention runs rarely, on content months old; the next run capturing the same bytes uploads them."""
    current = {a.id for a in plan_prune(session, plan.older_than, plan.now).artifacts}
    chosen = [a for a in plan.artifacts if a.id in current]
    stamp = utc(now or datetime.now(UTC))
    marked = retention.mark_pruned(session, [a.id for a in chosen if a.pruned_at is None], stamp)
    session.commit()  # the rows say "pruned" before any file goes: a crash from here on leaves no dangling row
    deleted = freed = missing = 0
    swept, swept_bytes = store.sweep_incoming(UNFINISHED_WRITE_AGE_S)
    freed += swept_bytes
    for artifact in chosen:
        size = store.remove(artifact.sha256)
        if size is None:
            missing += 1
        else:
            deleted += 1
            freed += size
    return PruneOutcome(artifacts=len(chosen), marked=marked, files_deleted=deleted, bytes_freed=freed,
                        files_missing=missing, unfinished_swept=swept)


def disk_usage(store: ArtifactStore, plan: PrunePlan) -> tuple[int, int]:
    """(files, bytes on disk) a prune of ``plan`` would delete now; reads only."""
    files = size = 0
    for artifact in plan.artifacts:
        try:
            size += store.path_for(artifact.sha256).stat().st_size
        except FileNotFoundError:
            continue
        files += 1
    return files, size


def _kept(plan: PrunePlan) -> str:
    return (f"kept: {plan.kept_for_alerts} for open alerts, {plan.kept_as_newest} as the newest run of their "
            f"series")


def format_plan(plan: PrunePlan, files: int, disk_bytes: int) -> str:
    """What a dry run prints."""
    return (f"would prune {len(plan.artifacts)} artifact(s) last used before {plan.cutoff:%Y-%m-%d %H:%M} UTC: "
            f"{plan.to_mark} to mark ({plan.raw_bytes} bytes uncompressed), {files} file(s) to delete "
            f"({disk_bytes} bytes on disk); {_kept(plan)}")


def format_outcome(plan: PrunePlan, outcome: PruneOutcome) -> str:
    return (f"pruned {outcome.artifacts} artifact(s) last used before {plan.cutoff:%Y-%m-%d %H:%M} UTC: "
            f"{outcome.marked} marked, {outcome.files_deleted} file(s) deleted, {outcome.bytes_freed} bytes freed, "
            f"{outcome.files_missing} already gone, {outcome.unfinished_swept} unfinished write(s) swept; "
            f"{_kept(plan)}")
