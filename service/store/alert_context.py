"""What the alerts inbox shows beside an alert that the alert itself does not carry: its commit's author, the
hardware and suites its findings were measured on, the branches its commit ran on.

One query per question over a page of alerts (ids in, plain dataclasses out), so a page of 50 alerts costs four
queries whatever their findings number.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from service.store.models import Alert, Benchmark, Commit, Environment, Finding, Repository, Run, Series
from service.store.times import utc


@dataclass(frozen=True)
class AlertContext:
    author: str
    authored_at: datetime | None
    hardware: list[str] = field(default_factory=list)  # device kinds of the findings' series, sorted
    suites: dict[str, int] = field(default_factory=dict)  # findings per benchmark suite
    branches: list[str] = field(default_factory=list)  # branches the alert's commit was measured on


def alert_context(session: Session, alert_ids: Sequence[int]) -> dict[int, AlertContext]:
    ids = sorted(set(alert_ids))
    if not ids:
        return {}
    commits = {row.id: (row.commit_id, row.author, row.authored_at) for row in session.execute(
        select(Alert.id, Alert.commit_id, Commit.author, Commit.authored_at)
        .join(Commit, Commit.id == Alert.commit_id).where(Alert.id.in_(ids)))}
    hardware: dict[int, set[str]] = defaultdict(set)
    suites: dict[int, Counter[str]] = defaultdict(Counter)
    for alert_id, device_kind, suite in session.execute(
        select(Finding.alert_id, Environment.device_kind, Benchmark.suite)
        .join(Series, Series.id == Finding.series_id)
        .join(Environment, Environment.id == Series.environment_id)
        .join(Benchmark, Benchmark.id == Series.benchmark_id)
        .where(Finding.alert_id.in_(ids))
    ):
        if alert_id is None:
            continue  # not possible under the WHERE; the column is nullable
        hardware[alert_id].add(device_kind)
        suites[alert_id][suite] += 1
    branches: dict[int, set[str]] = defaultdict(set)
    by_commit: dict[int, list[int]] = defaultdict(list)
    for alert_id, (commit_id, _, _) in commits.items():
        by_commit[commit_id].append(alert_id)
    for commit_id, branch in session.execute(
        select(Run.commit_id, Run.branch).where(Run.commit_id.in_(sorted(by_commit)), Run.branch.is_not(None))
        .distinct()
    ):
        for alert_id in by_commit[commit_id]:
            branches[alert_id].add(branch or "")
    return {
        alert_id: AlertContext(author=author, authored_at=utc(at) if at is not None else None,
                               hardware=sorted(hardware[alert_id]), suites=dict(sorted(suites[alert_id].items())),
                               branches=sorted(branches[alert_id]))
        for alert_id, (_, author, at) in commits.items()
    }


@dataclass(frozen=True)
class FilterChoices:
    """The values the inbox's filters offer: every one of them names a row of a small table."""

    repositories: list[str]
    hardware: list[str]
    suites: list[str]


def filter_choices(session: Session) -> FilterChoices:
    return FilterChoices(
        repositories=list(session.scalars(select(Repository.name).order_by(Repository.name))),
        hardware=list(session.scalars(select(Environment.device_kind).distinct().order_by(Environment.device_kind))),
        suites=list(session.scalars(select(Benchmark.suite).distinct().order_by(Benchmark.suite))),
    )
