"""What the commit and compare pages read besides the comparison: a commit's measured parent, and the
instruction and bundle counts of each kernel on two sides (the static diff).

The parent is found as detection finds a series' previous point: the nearest earlier commit (first-parent
position) of the same repository measured on the same branch, here also in one of the same environments, so
that the comparison has something like to compare with.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import exists, select
from sqlalchemy.orm import Session

from service.store.models import Benchmark, Commit, KernelCode, Repository, Result, Run, Series
from service.store.queries import label_of
from service.store.runs import of_the_commit


@dataclass(frozen=True)
class CommitInfo:
    repository: str
    sha: str
    subject: str
    author: str
    position: int
    branch: str | None  # the branch its runs were on (the default branch when it ran there)


def commit_info(session: Session, repository: str, sha: str) -> CommitInfo | None:
    row = session.execute(
        select(Commit, Repository.default_branch).join(Repository, Repository.id == Commit.repository_id)
        .where(Repository.name == repository, Commit.sha == sha)
    ).first()
    if row is None:
        return None
    commit, default_branch = row
    named = sorted(b for b in session.scalars(select(Run.branch).where(Run.commit_id == commit.id).distinct())
                   if b is not None)
    branch = default_branch if default_branch in named else (named[0] if named else None)
    return CommitInfo(repository=repository, sha=commit.sha, subject=commit.subject, author=commit.author,
                      position=commit.position, branch=branch)


def measured_parent(session: Session, info: CommitInfo, environment_ids: Sequence[int]) -> str | None:
    """The sha of the commit measured before this one on its branch in one of these environments; None for the
    first one."""
    repository_id = session.scalar(select(Repository.id).where(Repository.name == info.repository))
    same_branch = Run.branch.is_(None) if info.branch is None else Run.branch == info.branch
    measured = exists().where(Run.commit_id == Commit.id, same_branch, of_the_commit(session),
                              Run.environment_id.in_(sorted(environment_ids)))
    return session.scalar(
        select(Commit.sha).where(Commit.repository_id == repository_id, Commit.position < info.position, measured)
        .order_by(Commit.position.desc(), Commit.id.desc()).limit(1))


@dataclass(frozen=True)
class KernelCounts:
    benchmark: str
    kernel: str
    isa: str
    instructions: int | None
    bundles: int | None
    result_id: int


@dataclass(frozen=True)
class KernelCountChange:
    benchmark: str
    kernel: str
    isa: str
    base: KernelCounts | None  # None: the kernel is new in head
    head: KernelCounts | None  # None: the kernel is gone in head

    @property
    def instructions_delta(self) -> int | None:
        return _delta(self.base.instructions if self.base else 0, self.head.instructions if self.head else 0)

    @property
    def bundles_delta(self) -> int | None:
        return _delta(self.base.bundles if self.base else 0, self.head.bundles if self.head else 0)


def _delta(base: int | None, head: int | None) -> int | None:
    """head - base, a kernel only one side has counting 0 on the other (a new kernel of 153 instructions is +153,
    as the Diff page says; the compare page showed "–" for it); None where a side that has the kernel lacks the
    count."""
    return None if base is None or head is None else head - base


def kernel_counts(session: Session, run_ids: Sequence[int], limit: int) -> list[KernelCounts]:
    """Each kernel of these runs' results once per benchmark (the newest result's), at most ``limit`` rows:
    counts are a property of the compiled code, which every run of one commit and environment shares."""
    rows = session.execute(
        select(KernelCode.name, KernelCode.isa, KernelCode.instructions, KernelCode.bundles, KernelCode.result_id,
               Benchmark.suite, Benchmark.name, Benchmark.params)
        .join(Result, Result.id == KernelCode.result_id)
        .join(Series, Series.id == Result.series_id)
        .join(Benchmark, Benchmark.id == Series.benchmark_id)
        .where(Result.run_id.in_(sorted(run_ids)))
        .order_by(KernelCode.result_id.desc(), KernelCode.id)
        .limit(limit)
    ).all()
    seen: dict[tuple[str, str, str], KernelCounts] = {}
    for name, isa, instructions, bundles, result_id, suite, bench, params in rows:
        benchmark = label_of(suite, bench, params)
        seen.setdefault((benchmark, isa, name), KernelCounts(benchmark, name, isa, instructions, bundles, result_id))
    return list(seen.values())


def count_changes(base: Sequence[KernelCounts], head: Sequence[KernelCounts]) -> list[KernelCountChange]:
    """PURE: the kernels whose counts differ between the sides, or that only one side has; largest change
    first (added and removed kernels last)."""
    by_key = {(k.benchmark, k.isa, k.kernel): k for k in base}
    head_keys = {(k.benchmark, k.isa, k.kernel): k for k in head}
    changes = []
    for key in sorted(by_key.keys() | head_keys.keys()):
        b, h = by_key.get(key), head_keys.get(key)
        if b is not None and h is not None and (b.instructions, b.bundles) == (h.instructions, h.bundles):
            continue
        changes.append(KernelCountChange(benchmark=key[0], isa=key[1], kernel=key[2], base=b, head=h))

    def size(c: KernelCountChange) -> tuple[int, int]:
        delta = c.instructions_delta if c.instructions_delta is not None else c.bundles_delta
        return (1, 0) if delta is None or c.base is None or c.head is None else (0, -abs(delta))

    return sorted(changes, key=size)
