"""Two stored points of a repository compared, benchstat style: resolve what the user named (a run id, a commit
sha, or a unique sha prefix), load each side's results, pool the runs of one environment, pair like with like,
and hand the pairs to the pure comparison."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import statistics
import warnings
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from sqlalchemy.orm import Session

from kernelwatch.errors import InvalidInput, NotComparable, NotFound
from kernelwatch.hardware import hardware_label
from kernelwatch.vocabulary import Polarity, Trigger
from service.detect.compare import (
    VERDICTS,
    BenchmarkKey,
    CompareParams,
    Comparison,
    ComparisonReport,
    Pair,
    Side,
    compare,
)
from service.detect.run_stats import RunNoise, RunOrigin, co_measured, session_units
from service.model.result_roofline import EFFICIENCY_METRIC
from service.pipeline.git_refs import RefResolver
from service.pipeline.identity import environment_fingerprint
from service.pipeline.result_roofline_rows import ROOFLINE_METRIC
from service.report.compare_table import SideLabel, comparison_from_json, geomeans_from_json, params_from_json
from service.store import comparisons as stored_comparisons
from service.store.commit_compare import CommitInfo, measured_parent
from service.store.commits import commit_of, commits_with_prefix, repository_named
from service.store.models import Commit, Environment, Repository, Run, StoredComparison
from service.store.run_health import heavy_steal_runs
from service.store.run_noise import run_noise, sessions_vary
from service.store.runs import (
    of_working_copies,
    run_named,
    run_origins,
    run_triggers,
    runs_named,
    runs_of_commit,
    runs_with_prefix,
)
from service.store.series_companions import TOOLCHAIN_DETAILS, environment_differences

MIN_PREFIX = 4
MAX_RUNS_NAMED = 64  # run ids one reference may list
_HEX = re.compile(r"^[0-9a-fA-F]+$")
_SHOWN_MATCHES = 5


@dataclass(frozen=True)
class ResolvedSide:
    label: SideLabel
    run_ids: tuple[int, ...]
    environment_ids: frozenset[int]
    # The user named these runs (run ids), rather than a commit whose runs they are: compared exactly as named.
    named_runs: bool = False


@dataclass(frozen=True)
class CompareOutcome:
    base: SideLabel
    head: SideLabel
    report: ComparisonReport
    notes: tuple[str, ...]  # what was left out of the comparison, and why
    pairs: tuple[Pair, ...] = ()  # what was compared, row for row; none for a stored comparison (read, not made)


def _repository(session: Session, name: str | None) -> Repository | None:
    if name is None:
        return None
    repository = repository_named(session, name)
    if repository is None:
        raise NotFound(f"no repository named {name!r}")
    return repository


def side_for_commit(session: Session, ref: str, commit: Commit, repository_name: str) -> ResolvedSide:
    """Every run of the commit's own code. A working copy's runs stored under its sha are not its code (compared
    with the commit they were the commit itself, run against itself): they are named by run id."""
    runs, working_copies = runs_of_commit(session, commit.id)
    if not runs and working_copies:
        named = ", ".join(r.run_uid for r in working_copies[:3]) + (", ..." if len(working_copies) > 3 else "")
        raise NotFound(f"commit {commit.sha[:12]} of {repository_name} has no runs of its own code, only of "
                       f"working copies (`run --working-tree`), which are named by run id: {named}")
    if not runs:
        raise NotFound(f"commit {commit.sha[:12]} of {repository_name} has no runs")
    return ResolvedSide(
        SideLabel(ref=ref, repository=repository_name, commit=commit.sha, subject=commit.subject,
                  runs=tuple(r.run_uid for r in runs)),
        tuple(r.id for r in runs), frozenset(r.environment_id for r in runs))


def resolve(session: Session, ref: str, repository_name: str | None = None,
            refs: RefResolver | None = None) -> ResolvedSide:
    """A run id names that run, run ids joined by commas exactly those runs (of one commit); a commit sha or a
    unique prefix of one names every run of that commit; with a repository and ``refs``, a branch or tag name
    (anything git resolves) names every run of its commit."""
    ref = ref.strip()
    if not ref:
        raise InvalidInput("an empty reference: give a run id, a commit sha or a sha prefix")
    if "," in ref:  # run ids joined by commas: exactly those runs (the rounds a `ci` job made)
        ids = [part.strip() for part in ref.split(",")]
        if not all(ids) or len(ids) > MAX_RUNS_NAMED:
            raise InvalidInput(f"a list of runs is 1 to {MAX_RUNS_NAMED} run ids joined by commas")
        side = runs_side(session, ids)
        if repository_name is not None and side.label.repository != repository_name:
            raise InvalidInput(f"those runs belong to repository {side.label.repository}, not {repository_name}")
        return dataclasses.replace(side, label=dataclasses.replace(side.label, ref=ref))
    repository = _repository(session, repository_name)
    try:
        return _resolve_stored(session, ref, repository)
    except NotFound:
        if repository is None or refs is None:
            raise
        # Run ids and shas first: a stored name is exact, and a ref is only asked of git when nothing matched.
        sha = refs(repository.url, ref)
        if sha is None:
            raise NotFound(f"no run, commit or git ref matches {ref!r} in repository {repository.name} "
                           f"({repository.url})") from None
    commit = commit_of(session, repository.id, sha.lower())
    if commit is None:
        raise NotFound(f"{ref!r} is commit {sha[:12]} of {repository.name}, which has no stored runs")
    return side_for_commit(session, ref, commit, repository.name)


def _named_run_side(session: Session, ref: str, run: Run, repository: Repository | None) -> ResolvedSide:
    """One run, named by its id (or a prefix of it)."""
    commit = session.get(Commit, run.commit_id)
    owner = session.get(Repository, commit.repository_id) if commit is not None else None
    assert commit is not None and owner is not None
    if repository is not None and owner.id != repository.id:
        raise InvalidInput(f"run {ref} belongs to repository {owner.name}, not {repository.name}")
    return ResolvedSide(
        SideLabel(ref=ref, repository=owner.name, commit=commit.sha, subject=_subject(session, [run], commit),
                  runs=(run.run_uid,)),
        (run.id,), frozenset({run.environment_id}), named_runs=True)


def _subject(session: Session, runs: Sequence[Run], commit: Commit) -> str:
    """A side's subject: its commit's, or, for a working copy's runs (stored under its commit's sha), said to be
    the working copy's, or base and head read alike."""
    return (f"working copy (uncommitted edits) on {commit.subject}" if of_working_copies(session, runs)
            else commit.subject)


def runs_side(session: Session, run_uids: Sequence[str]) -> ResolvedSide:
    """Exactly these runs, all of one commit (a `kernelwatch ci` side: the runs it just made, one per
    environment), labelled with the commit's sha."""
    runs = runs_named(session, run_uids)
    if len(runs) != len(set(run_uids)):
        found = {r.run_uid for r in runs}
        raise NotFound(f"no run {', '.join(sorted(set(run_uids) - found))}")
    commits = {r.commit_id for r in runs}
    if len(commits) != 1:
        raise InvalidInput("the runs of one side must all be of one commit")
    commit = session.get(Commit, commits.pop())
    owner = session.get(Repository, commit.repository_id) if commit is not None else None
    assert commit is not None and owner is not None
    return ResolvedSide(
        SideLabel(ref=commit.sha[:12], repository=owner.name, commit=commit.sha,
                  subject=_subject(session, runs, commit), runs=tuple(r.run_uid for r in runs)),
        tuple(r.id for r in runs), frozenset(r.environment_id for r in runs), named_runs=True)


def _resolve_stored(session: Session, ref: str, repository: Repository | None) -> ResolvedSide:
    run = run_named(session, ref)
    if run is not None:
        return _named_run_side(session, ref, run, repository)
    where = f" in repository {repository.name}" if repository is not None else ""
    if not _HEX.match(ref) or len(ref) > 40:
        # A branch, tag or HEAD~1 is git's to resolve, in a repository the store knows: named with --repo.
        hint = "" if repository is not None else (" (a branch, tag or other git revision needs --repo NAME; repo=NAME "
                                                  "through the API)")
        raise NotFound(f"no run {ref!r}, and it is not a commit sha{where}{hint}")
    if len(ref) < MIN_PREFIX:
        raise InvalidInput(f"{ref!r} is too short: a sha prefix needs at least {MIN_PREFIX} hex digits")
    matches = commits_with_prefix(session, ref.lower(), repository.id if repository is not None else None,
                                  limit=_SHOWN_MATCHES + 1)
    if not matches:
        # Run ids are hex too, printed whole by `run`, and shortened as shas are: a prefix of one run's id is it.
        runs = runs_with_prefix(session, ref.lower(), limit=_SHOWN_MATCHES + 1)
        if len(runs) == 1:
            return _named_run_side(session, ref, runs[0], repository)
        if runs:  # a session's rounds are ids of one stem (ID, ID-r1, ...): the whole id names one of them
            shown = ", ".join(r.run_uid for r in runs[:_SHOWN_MATCHES]) + (", ..." if len(runs) > _SHOWN_MATCHES
                                                                            else "")
            raise InvalidInput(f"{ref!r} is ambiguous: it starts the ids of runs {shown}; give a whole run id")
        raise NotFound(f"no run or commit matches {ref!r}{where}")
    if len(matches) > 1:
        if len({c.sha for c, _ in matches}) == 1 and len(matches) <= _SHOWN_MATCHES:
            # One commit stored in several repositories (a clone filed under its own name): more of the sha
            # cannot tell them apart.
            raise InvalidInput(f"{ref!r} is commit {matches[0][0].sha[:12]} of several repositories "
                               f"({', '.join(name for _, name in matches)}); give --repo NAME")
        shown = ", ".join(f"{c.sha[:12]} ({name})" for c, name in matches[:_SHOWN_MATCHES])
        more = ", ..." if len(matches) > _SHOWN_MATCHES else ""
        hint = "" if repository is not None else " or --repo"
        raise InvalidInput(f"{ref!r} is ambiguous: it matches commits {shown}{more}; give more of the sha{hint}")
    commit, name = matches[0]
    return side_for_commit(session, ref, commit, name)


# Runs made to follow one finding up (service/pipeline/bisect.py): they measure its benchmark alone.
FOLLOW_UP_TRIGGERS = frozenset({Trigger.BISECT, Trigger.CONFIRM})


def _follow_ups_only(triggers: set[str]) -> bool:
    return bool(triggers) and triggers <= FOLLOW_UP_TRIGGERS


@dataclass
class _Pool:
    """One benchmark's metric in one environment on one side, over every run of that side, run by run (the run
    is the unit of replication: see service/detect/run_stats.py)."""

    key: BenchmarkKey
    samples: list[float]
    series_id: int = 0
    run_sizes: list[int] = field(default_factory=list)
    run_ids: list[int] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    failure_runs: list[int] = field(default_factory=list)  # the run of each of ``failures``
    fractions: list[float] = field(default_factory=list)  # the ok results' stored achieved roofline fractions
    fraction_runs: list[int] = field(default_factory=list)  # the run of each of ``fractions``

    def keep(self, runs: Collection[int], failure_kept: Callable[[int], bool] = lambda run: False) -> None:
        """Only these runs' results (run_stats.co_measured chose them from the runs that measured the benchmark),
        and the failures of these runs or of those ``failure_kept`` says were made with them (the same sessions): a
        failure in a session left out is no more this comparison's than that session's times."""
        samples, sizes, ids, offset = [], [], [], 0
        for run_id, size in zip(self.run_ids, self.run_sizes, strict=True):
            if run_id in runs:
                samples += self.samples[offset:offset + size]
                sizes.append(size)
                ids.append(run_id)
            offset += size
        self.samples, self.run_sizes, self.run_ids = samples, sizes, ids
        kept = [(f, r) for f, r in zip(self.fractions, self.fraction_runs, strict=True) if r in runs]
        self.fractions, self.fraction_runs = [f for f, _ in kept], [r for _, r in kept]
        failed = [(m, r) for m, r in zip(self.failures, self.failure_runs, strict=True)
                  if r in runs or failure_kept(r)]
        self.failures, self.failure_runs = [m for m, _ in failed], [r for _, r in failed]

    @property
    def failed_runs(self) -> int:
        """Runs in which it failed (a run that both failed and measured it, a re-measured benchmark, counts)."""
        return len(set(self.failure_runs))

    def merge_units(self, units: dict[int, str]) -> None:
        """Each unit's runs taken together as one run (their samples in one), in the order the units first ran;
        ``run_ids`` keeps every run (for the noisy-run count)."""
        grouped: dict[str, list[float]] = {}
        offset = 0
        for run_id, size in zip(self.run_ids, self.run_sizes, strict=True):
            grouped.setdefault(units[run_id], []).extend(self.samples[offset:offset + size])
            offset += size
        self.samples = [v for values in grouped.values() for v in values]
        self.run_sizes = [len(values) for values in grouped.values()]

    def side(self, noisy: Collection[int] = ()) -> Side:
        # A benchmark that failed in one run of a side and not in another is measured by the runs that worked.
        if self.run_sizes:
            fraction = float(statistics.median(self.fractions)) if self.fractions else None
            return Side(tuple(self.samples), "ok", fraction=fraction, run_sizes=tuple(self.run_sizes),
                        noisy_runs=sum(1 for r in self.run_ids if r in noisy))
        return Side((), "failed", "; ".join(dict.fromkeys(self.failures)) or None)


def like_fingerprint(env: Environment) -> str:
    """What a comparison pairs environments by: the fingerprint without the working copy's digest. A run of
    uncommitted edits (`run --working-tree`) is an environment of its own, so that it is never a point of its
    commit's history; compared with a run of the commit itself (or another working copy's) it is the same
    hardware, toolchain and settings with other code, which is what a comparison is for: "try an edit before
    committing it" was refused as "base and head ran in different environments"."""
    details = env.details or {}
    if "working_tree" not in details:
        return env.fingerprint
    return environment_fingerprint({k: v for k, v in details.items() if k != "working_tree"})


# What a pull request can change of an environment besides the code: the JAX it pins (a project measured with
# environment = "commit" runs each commit in the environment its own pins declare, runners/envs.py), and with it
# jaxlib, libtpu and the runtime; the XLA flags and the interpreter are the toolchain's too.
TOOLCHAIN_KEYS = frozenset({*TOOLCHAIN_DETAILS, "python_version"})


def hardware_fingerprint(env: Environment) -> str:
    """The fingerprint of the hardware and settings alone: without the working copy's digest and the toolchain
    (``TOOLCHAIN_KEYS``). Two environments that share it measured the same machine's kind under the same settings
    with another toolchain: a pull request that moves its JAX pin, whose comparison with its base is exactly what
    its author asks for (was refused as "different environments", and a `ci` gate passed it unmeasured)."""
    details = env.details or {}
    return environment_fingerprint({k: v for k, v in details.items()
                                    if k != "working_tree" and k not in TOOLCHAIN_KEYS})


def same_hardware_environments(session: Session, environment_ids: Collection[int]) -> set[int]:
    """The stored environments of the same hardware and settings as any of these (:func:`hardware_fingerprint`),
    these included."""
    wanted = {hardware_fingerprint(e) for e in stored_comparisons.environments(session, environment_ids)}
    return {e.id for e in stored_comparisons.all_environments(session) if hardware_fingerprint(e) in wanted}


def comparable_parent(session: Session, info: CommitInfo, head: ResolvedSide) -> str | None:
    """The commit a commit is compared with on write and on its page: the one measured before it on its branch in
    one of its environments; where there is none, in an environment of the same hardware (another toolchain: the
    commit that moved its JAX pin is compared with the one before it, which ran the old toolchain, and its page
    says what the upgrade did). None for the first one measured on that hardware."""
    parent = measured_parent(session, info, sorted(head.environment_ids))
    if parent is not None:
        return parent
    wider = same_hardware_environments(session, head.environment_ids) - set(head.environment_ids)
    return measured_parent(session, info, sorted(wider)) if wider else None


@dataclass(frozen=True)
class LikeEnvironments:
    """The environments a comparison pairs although they differ (``_like_environments``): each one's pairing key,
    and the (base, head) pairs of those paired across a toolchain change."""

    keys: dict[int, str] = field(default_factory=dict)
    working_copies: tuple[tuple[int, int], ...] = ()  # paired by like_fingerprint
    across_toolchain: tuple[tuple[int, int], ...] = ()  # paired by hardware_fingerprint


def _like_environments(session: Session, base: ResolvedSide, head: ResolvedSide) -> LikeEnvironments:
    """The environments compared, each with the key its results pair by: those both sides ran in, by their own
    fingerprint (left out of ``keys``); then, of those left with no environment in common, one on each side of
    one key: first by :func:`like_fingerprint` (a working copy's runs and its commit's: the same hardware and
    toolchain), then by :func:`hardware_fingerprint` (the same hardware and settings, another toolchain). Never two
    environments of one side together: runs named by id may be a commit's and its working copy's (stored under its
    sha), which are not the commit's code; nor two of one hardware on one side with one on the other (which of the
    two toolchains is the base's would be a guess)."""
    exact = base.environment_ids & head.environment_ids
    if base.environment_ids == head.environment_ids:
        return LikeEnvironments()  # the usual case, no row to read: every environment by its own fingerprint
    envs = [e for e in stored_comparisons.environments(session, base.environment_ids | head.environment_ids)
            if e.id not in exact]
    paired: dict[int, str] = {}
    found: dict[Callable[[Environment], str], list[tuple[int, int]]] = {}
    for key_of in (like_fingerprint, hardware_fingerprint):
        groups: dict[str, tuple[list[int], list[int]]] = {}
        for env in envs:
            if env.id in paired:
                continue
            sides = groups.setdefault(key_of(env), ([], []))
            for index, side in enumerate((base, head)):
                if env.id in side.environment_ids:
                    sides[index].append(env.id)
        for like, (on_base, on_head) in groups.items():
            if len(on_base) == 1 and len(on_head) == 1:
                paired[on_base[0]] = paired[on_head[0]] = like
                found.setdefault(key_of, []).append((on_base[0], on_head[0]))
    return LikeEnvironments(paired, tuple(found.get(like_fingerprint, ())),
                            tuple(found.get(hardware_fingerprint, ())))


def _toolchain_note(session: Session, across: Sequence[tuple[int, int]]) -> str:
    """What a comparison across a toolchain change says of itself: what changed, and what its verdicts are of."""
    envs = {e.id: e for e in stored_comparisons.environments(session, {i for pair in across for i in pair})}
    def toolchain(env: Environment) -> dict[str, Any]:
        return {k: v for k, v in (env.details or {}).items() if k in TOOLCHAIN_KEYS}

    changes = sorted({change for b, h in across
                      for change in environment_differences(toolchain(envs[b]), toolchain(envs[h]))})
    return (f"base and head ran different toolchains on the same hardware ({', '.join(changes)}): each verdict is "
            "of the code and the toolchain together; a series starts afresh at a toolchain change, so detection "
            "does not compare across it")


def _environment_label(env: Environment) -> str:
    return f"{hardware_label(env.backend, env.device_kind, env.device_count)} [{env.fingerprint[:10]}]"


def _direction(value: str) -> Polarity:
    """A stored series' polarity (its ``direction`` column)."""
    try:
        return Polarity(value)
    except ValueError:
        raise InvalidInput(f"a stored series has direction {value!r}") from None


def _params(params: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    return tuple((k, str(params[k])) for k in sorted(params))


def _parse_samples(texts: Sequence[str | None]) -> list[list[float]]:
    """Each result's samples from the JSON text of its array. Ten thousand rows through ``json.loads`` one at a
    time took longer than the whole comparison; numpy reads them all in one pass of its C parser, and any text
    that is not a flat array of numbers takes the JSON route so that nothing is misread."""
    bodies = [(text or "[]").strip() for text in texts]
    counts = [0 if body[1:-1].strip() == "" else body.count(",") + 1 for body in bodies]
    flat = ",".join(body[1:-1] for body, count in zip(bodies, counts, strict=True) if count)
    fast = all(body[:1] == "[" and body[-1:] == "]" and "[" not in body[1:-1] and "{" not in body
               for body in bodies)
    with warnings.catch_warnings():
        # A text numpy cannot read to its end warns and returns what it read: the count check below catches it.
        warnings.simplefilter("ignore", DeprecationWarning)
        values = np.fromstring(flat, sep=",") if fast and flat else np.empty(0)
    if not fast or values.size != sum(counts):
        return [[float(v) for v in json.loads(body)] for body in bodies]
    if not bodies:
        return []
    if min(counts) == max(counts) and counts[0]:  # the usual case: every result has as many samples
        rows: list[list[float]] = values.reshape(len(bodies), counts[0]).tolist()
        return rows
    return [chunk.tolist() for chunk in np.split(values, np.cumsum(counts)[:-1])]


def _pools(session: Session, side: ResolvedSide, environments: set[int],
           keys: dict[int, tuple[tuple[Any, ...], BenchmarkKey]],
           like: Mapping[int, str] | None = None) -> dict[tuple[Any, ...], _Pool]:
    """``keys``: per series, its pool identity and benchmark key, shared by both sides so that each is made once
    (two repositories' series of one benchmark share an identity, and so pair up). ``like``: the environments
    paired by :func:`like_fingerprint` (a working copy's with its commit's), by that fingerprint; every other by
    its own."""
    like = like or {}
    # The result rows carry only what varies per result; each series, benchmark and environment is read once
    # (a commit of 5,000 results names 1,000 benchmarks and 5 environments: joining them into every row
    # multiplied the bytes read and decoded several times over).
    rows = stored_comparisons.side_results(session, side.run_ids, environments)
    # What identifies a benchmark and an environment, read off each ORM object once (not once per result).
    benchmarks = {b.id: (b.suite, b.name, b.params_key, b.params)
                  for b in stored_comparisons.benchmarks(session, {row[4] for row in rows})}
    envs = {e.id: (like.get(e.id, e.fingerprint), _environment_label(e))
            for e in stored_comparisons.environments(session, environments)}
    pools: dict[tuple[Any, ...], _Pool] = {}
    sample_lists = _parse_samples([row[3] for row in rows])
    for row, samples in zip(rows, sample_lists, strict=True):
        (series_id, status, message, _, benchmark_id, environment_id, metric, unit, direction, fraction, run_id,
         version) = row
        known = keys.get(series_id)  # both sides measure the same series: each is identified once
        if known is None:
            suite, name, params_key, params = benchmarks[benchmark_id]
            fingerprint, label = envs[environment_id]
            # An edited benchmark (another version of its code) measures something else: never paired.
            identity = (fingerprint, suite, name, params_key, metric, version)
            known = keys[series_id] = (identity, BenchmarkKey(
                suite=suite, name=name, params=_params(params), metric=metric, unit=unit,
                direction=_direction(direction), environment=label, benchmark_version=version or ""))
        identity, key = known
        pool = pools.get(identity)
        if pool is None:
            pool = pools[identity] = _Pool(key, [], series_id)
        if status == "ok" and samples:
            pool.samples.extend(samples)
            # Two results of one series in one run (a re-measured benchmark) are one replicate of the code.
            if pool.run_ids and pool.run_ids[-1] == run_id:
                pool.run_sizes[-1] += len(samples)
            else:
                pool.run_sizes.append(len(samples))
                pool.run_ids.append(run_id)
            if fraction is not None:
                pool.fractions.append(fraction)
                pool.fraction_runs.append(run_id)
        else:
            pool.failures.append(((message or "").strip().splitlines() or ["failed"])[0][:500])
            pool.failure_runs.append(run_id)
    return pools


def _folded(identities: set[tuple[Any, ...]], pools: Sequence[dict[tuple[Any, ...], _Pool]]) -> set[tuple[Any, ...]]:
    """The efficiency series ingest derives from wall time (service/pipeline/result_roofline_rows.py) of the
    benchmarks whose time rows carry the fraction on either side: the row's before and after fraction says what
    they would, and their verdict is the time's again (one sample per sample, the inverse order), so compared
    they would only count each change twice. They stay stored, and detection still watches them."""
    timed = {identity[:4] for side in pools for identity, pool in side.items()
             if identity[4] == ROOFLINE_METRIC and pool.fractions}
    return {identity for identity in identities if identity[4] == EFFICIENCY_METRIC and identity[:4] in timed}


def _what_differs(session: Session, base: ResolvedSide, head: ResolvedSide) -> str:
    """``; what differs: jax 0.10.2 → 0.4.38, ...`` where each side ran in one environment (the fingerprints
    alone told a user nothing of why: a pull request that pins another JAX)."""
    [mine, theirs] = [stored_comparisons.environments(session, set(side.environment_ids)) for side in (base, head)]
    if len(mine) != 1 or len(theirs) != 1:
        return ""
    facts = [{**env.details, "backend": env.backend, "device_kind": env.device_kind,
              "device_count": env.device_count} for env in (mine[0], theirs[0])]
    differences = environment_differences(*facts)
    return f"; what differs: {', '.join(differences)}" if differences else ""


def _describe(session: Session, ids: set[int]) -> str:
    return ", ".join(_environment_label(e) for e in stored_comparisons.environments(session, ids))


def _sort_key(identity: tuple[Any, ...]) -> tuple[Any, ...]:
    fingerprint, suite, name, params_key, metric, version = identity
    return (fingerprint, metric != "wall_time", metric, suite, name, params_key, version or "")


# What a comparison of the same runs holds changes with this (2: roofline fractions on the rows, the derived
# efficiency rows folded into them); a comparison stored under an older revision is not found, so it is computed
# afresh on read, and the next run of its commit stores its replacement.
COMPARISON_REVISION = 11  # 3: run-level statistics, the inconclusive verdict; 4: a binding floor's degrees of freedom;
# 5: the runs needed to decide an inconclusive verdict; 6: a side noisier than the history keeps its own spread;
# 7: only the runs made in sessions both sides share, where each side has enough of them; 8: sides measured apart
# compared session by session; 9: both decided benchmark by benchmark (a confirmation's session holds only some);
# 10: failures only of the runs compared, and a note for a benchmark that failed in some of a side's runs;
# 11: a side of follow-up runs alone leaves the benchmarks they did not measure out (not "missing" or "new")


def comparison_key(base_runs: Sequence[int], head_runs: Sequence[int], params: CompareParams) -> str:
    """What a comparison compared, digested: each side's run ids and every parameter (and the revision of what a
    comparison holds). Runs are immutable once stored, so a stored comparison found by this key is never stale."""
    text = "|".join([f"r{COMPARISON_REVISION}", ",".join(map(str, sorted(base_runs))),
                     ",".join(map(str, sorted(head_runs))), repr(params.alpha), repr(params.min_effect),
                     repr(params.confidence), repr(params.equivalence)])
    return hashlib.sha256(text.encode()).hexdigest()


def find_stored(session: Session, base: ResolvedSide, head: ResolvedSide,
                params: CompareParams) -> StoredComparison | None:
    """The comparison of exactly these sides made on write (service/pipeline/stored_comparisons.py)."""
    return stored_comparisons.stored_comparison(session, comparison_key(base.run_ids, head.run_ids, params))


def stored_report(header: dict[str, Any], rows: Sequence[Comparison], whole: bool) -> ComparisonReport:
    """A stored comparison's report with these of its rows; ``whole``: they are all of them (else the verdict
    counts come from the header)."""
    totals = None if whole else tuple((v, int(header["summary"].get(v, 0))) for v in VERDICTS)
    return ComparisonReport(params=params_from_json(header), rows=tuple(rows), geomeans=geomeans_from_json(header),
                            tests=int(header["parameters"]["tests"]), totals=totals)


def stored_outcome(session: Session, base: ResolvedSide, head: ResolvedSide,
                   params: CompareParams) -> CompareOutcome | None:
    """The whole stored comparison of these sides, labelled with the references the reader used; None when none
    was stored."""
    stored = find_stored(session, base, head, params)
    if stored is None:
        return None
    rows = stored_comparisons.stored_rows(session, stored.id)
    report = stored_report(stored.header, [comparison_from_json(r) for r in rows], whole=True)
    return CompareOutcome(base.label, head.label, report, tuple(stored.header["notes"]))


def compare_resolved(session: Session, base: ResolvedSide, head: ResolvedSide, params: CompareParams,
                     stored: bool = True) -> CompareOutcome:
    """``stored``: read the comparison made on write when there is one rather than compute."""
    if stored:
        found = stored_outcome(session, base, head, params)
        if found is not None:
            return found
    pairing = _like_environments(session, base, head)
    like = pairing.keys
    common = set(base.environment_ids & head.environment_ids) | set(like)
    if not common:
        raise NotComparable(f"base and head ran in different environments (base: "
                           f"{_describe(session, set(base.environment_ids))}; head: "
                           f"{_describe(session, set(head.environment_ids))}"
                           f"{_what_differs(session, base, head)}); only runs of one hardware under the same "
                           "settings are compared (a change of toolchain alone is compared, and said)")
    notes = [f"{name} also ran on {_describe(session, set(side.environment_ids - common))}, which the other side "
             f"did not: those results are not compared"
             for name, side in (("base", base), ("head", head)) if side.environment_ids - common]
    if set(base.run_ids) == set(head.run_ids):
        # `compare X X`: not an A/A check (that needs runs of its own a side), the same numbers twice.
        notes.append("base and head are the same runs: each benchmark is compared with itself, which says nothing "
                     "of its code (an A/A check needs separate runs of one commit on each side)")
    if pairing.across_toolchain:
        notes.append(_toolchain_note(session, pairing.across_toolchain))
    if pairing.working_copies:
        notes.append("runs of a working copy (uncommitted edits, `run --working-tree`) are compared with the other "
                     "side's made on the same hardware and toolchain")
    if base.label.repository != head.label.repository:  # a sha prefix can match in any stored repository
        notes.append(f"base and head are commits of two repositories ({base.label.repository} and "
                     f"{head.label.repository}); --repo NAME looks a reference up in one")
    keys: dict[int, tuple[tuple[Any, ...], BenchmarkKey]] = {}
    base_pools, head_pools = _pools(session, base, common, keys, like), _pools(session, head, common, keys, like)
    identities = base_pools.keys() | head_pools.keys()
    identities -= _folded(identities, (base_pools, head_pools))
    # Which runs each benchmark is compared on, and whether its sides were measured apart, is decided benchmark by
    # benchmark: a confirmation's session holds only the benchmarks it confirms, so deciding it for the sides as a
    # whole left every other benchmark with no run at all, and its row silently out of the table.
    origins = run_origins(session, [*base.run_ids, *head.run_ids])
    paired = {identity: (base_pools[identity], head_pools[identity]) for identity in identities
              if identity in base_pools and identity in head_pools
              and base_pools[identity].run_ids and head_pools[identity].run_ids}
    # Each side's runs before any narrowing leaves some out (a side of follow-ups alone: see below).
    every_run = {"base": base.run_ids, "head": head.run_ids}
    if not (base.named_runs or head.named_runs):  # runs a user named are compared as named
        base, head, narrowed = _co_measured(base, head, paired, origins)
        notes += narrowed
    apart = {identity: units for identity, (b, h) in paired.items()
             if (units := session_units({r: origins[r] for r in b.run_ids},
                                        {r: origins[r] for r in h.run_ids})) is not None}
    # The series' stored spread between runs (service/store/run_noise.py): what a side of one run is tested
    # against, and the prior that moderates the spread of a side of a few (service/detect/run_stats.py says why).
    measured = {pool.series_id for identity in identities
                for pool in (base_pools.get(identity), head_pools.get(identity))
                if pool is not None and pool.run_sizes}
    compared_runs = [*base.run_ids, *head.run_ids]
    noise = run_noise(session, measured, common, compared_runs) if measured else {}
    if apart:  # measured apart: a session's runs are one replicate (session_units)
        merged = _sessions_as_replicates(session, apart, paired, noise, common, compared_runs)
        notes.append(_apart_note(apart, paired, merged, len(paired)))
    noisy = heavy_steal_runs(session, [*base.run_ids, *head.run_ids])
    for name, side, pools in (("base", base, base_pools), ("head", head, head_pools)):
        unmeasured = {identity for identity in identities if identity not in pools}
        if unmeasured and _follow_ups_only(run_triggers(session, every_run[name])):
            # A bisection's or confirmation's runs measure the benchmark they follow alone: the others are not
            # gone from that commit ("missing", "new", and --fail-on any failing on them), only not measured.
            identities -= unmeasured
            notes.append(f"{len(unmeasured)} benchmark(s) were not measured at the {name} "
                         f"({side.label.commit[:12]}): its runs are follow-ups (a bisection's or a confirmation's), "
                         "which measure only the benchmarks they follow")
    pairs = []
    for identity in sorted(identities, key=_sort_key):
        b, h = base_pools.get(identity), head_pools.get(identity)
        key = (b or h).key  # type: ignore[union-attr]
        spread = noise.get((b or h).series_id)  # type: ignore[union-attr]
        pairs.append(Pair(key, b.side(noisy) if b else None, h.side(noisy) if h else None, spread))
    report = compare(pairs, params)
    notes += _edited_notes(base_pools, head_pools)
    notes += _partly_failed_notes(base_pools, head_pools, identities)
    return CompareOutcome(base.label, head.label, report, tuple(notes), tuple(pairs))


def _in_sessions(origins: Mapping[int, RunOrigin], sessions: Collection[str | None]) -> Callable[[int], bool]:
    """Whether a run was made in one of these sessions."""
    return lambda run: run in origins and origins[run].session in sessions


def _co_measured(base: ResolvedSide, head: ResolvedSide, paired: Mapping[tuple[Any, ...], tuple[_Pool, _Pool]],
                 origins: Mapping[int, RunOrigin]) -> tuple[ResolvedSide, ResolvedSide, list[str]]:
    """Each benchmark's pools narrowed in place to the runs made in sessions both sides measured it in
    (run_stats.co_measured says why), and the sides' runs to those some benchmark is still compared on (a run left
    out of every benchmark it measured is left out of the side), with a note of what was left out."""
    narrowed = 0
    left_out: dict[int, bool] = {}  # per run: left out of every benchmark it measured
    for b, h in paired.values():
        kept = co_measured({r: origins[r] for r in b.run_ids}, {r: origins[r] for r in h.run_ids})
        for pool, runs in ((b, set(kept.base)), (h, set(kept.head))):
            for run in pool.run_ids:
                left_out[run] = left_out.get(run, True) and run not in runs
        if kept.left_out != (0, 0):
            narrowed += 1
            for pool, runs in ((b, set(kept.base)), (h, set(kept.head))):
                # A run where the benchmark failed is none of co_measured's (it measured nothing): it stays where
                # it was made in a session whose runs are kept.
                pool.keep(runs, _in_sessions(origins, {origins[r].session for r in runs} - {None}))
    if not narrowed:
        return base, head, []
    sides, dropped = [], []
    for side in (base, head):
        uid = dict(zip(side.run_ids, side.label.runs, strict=True))
        ordered = tuple(r for r in side.run_ids if not left_out.get(r, False))
        dropped.append(len(side.run_ids) - len(ordered))
        sides.append(dataclasses.replace(side, run_ids=ordered, label=dataclasses.replace(
            side.label, runs=tuple(uid[r] for r in ordered))))
    why = ("made in sessions the other side was not measured in (a range run's session with a neighbouring commit, "
           "a confirmation's or a re-run's rounds): runs made apart carry the host's state of their own minutes")
    if narrowed < len(paired):  # the sides' run counts are no row's: each row's runs=B+H says its own
        return sides[0], sides[1], [f"for {narrowed} of {len(paired)} benchmarks some runs were {why}, so only the "
                                    f"runs interleaved in the sessions both sides share are compared (each row's "
                                    f"runs=B+H); the others' rows compare every run"]
    left = " and ".join(f"{n} of {name}'s {len(side.run_ids)} runs" for name, side, n
                        in (("base", base, dropped[0]), ("head", head, dropped[1])) if n)
    note = (f"{left or 'some runs'} were {why}, so only the {len(sides[0].run_ids)}+{len(sides[1].run_ids)} runs "
            f"interleaved in the sessions both sides share are compared")
    return sides[0], sides[1], [note]


def _sessions_as_replicates(session: Session, apart: Mapping[tuple[Any, ...], dict[int, str]],
                            paired: Mapping[tuple[Any, ...], tuple[_Pool, _Pool]], noise: dict[int, RunNoise],
                            environments: set[int], compared_runs: Sequence[int]) -> int:
    """For the benchmarks whose sides were measured apart (``apart``: each one's runs' units, session_units): each
    whose history shows sessions of one commit landing farther apart than their runs explain, or cannot tell
    (run_noise.sessions_vary), has each session's runs taken together and is judged against the spread between
    sessions (``noise`` updated in place); how many such benchmarks."""
    series = {pool.series_id for identity in apart for pool in paired[identity]}
    vary = sessions_vary(session, series, environments, compared_runs)
    between = run_noise(session, series, environments, compared_runs, by_session=True)
    merged = 0
    for identity, units in apart.items():
        pair = paired[identity]
        if not vary.get(pair[0].series_id, True):
            continue
        merged += 1
        for pool in pair:
            pool.merge_units(units)
            noise.pop(pool.series_id, None)
            if pool.series_id in between:
                noise[pool.series_id] = between[pool.series_id]
    return merged


def _apart_note(apart: Mapping[tuple[Any, ...], dict[int, str]],
                paired: Mapping[tuple[Any, ...], tuple[_Pool, _Pool]], merged: int, rows: int) -> str:
    which = "" if len(apart) == rows else f"for {len(apart)} of {rows} benchmarks, "
    start = (f"{which}base and head were measured apart (no session holds runs of both): a session's runs share the "
             f"host's minutes and can agree more closely than sessions do")
    together = ("measured together (`kernelwatch run --commit BASE --commit HEAD --rounds 4`, or `kernelwatch ci`), "
                "the runs themselves are compared")
    if merged == 0:
        return (f"{start}; here every benchmark's history shows sessions of one commit agreeing as closely as their "
                f"runs, so the runs are compared as replicates; {together}")
    units = {run: unit for runs in apart.values() for run, unit in runs.items()}
    counts = []
    for side in (0, 1):
        runs = {r for identity in apart for r in paired[identity][side].run_ids}
        counts.append(f"{len({units[r] for r in runs})} session(s) of {len(runs)} run(s)")
    more = "" if merged == len(apart) else (f" for {merged} of those {len(apart)} benchmarks (the others' histories "
                                            f"show sessions of one commit agreeing as closely as their runs, and "
                                            f"compare runs)")
    return (f"{start}, so each session counts here as one run (base {counts[0]}, head {counts[1]}){more}, judged "
            f"against the spread between sessions of one commit; {together}")


def _edited_notes(base: dict[tuple[Any, ...], _Pool], head: dict[tuple[Any, ...], _Pool]) -> list[str]:
    """Why a benchmark can be missing from one side and new on the other: its code was edited between them."""
    versions: dict[tuple[Any, ...], list[set[Any]]] = {}
    labels: dict[tuple[Any, ...], str] = {}
    for index, pools in enumerate((base, head)):
        for identity, pool in pools.items():
            if identity[4] == "wall_time":
                versions.setdefault(identity[:5], [set(), set()])[index].add(identity[5])
                labels.setdefault(identity[:5], pool.key.label)
    notes = []
    for point, (b, h) in sorted(versions.items(), key=lambda item: _sort_key((*item[0], None))):
        if b and h and not b & h:
            notes.append(f"{labels[point]}: its benchmark code differs between the sides (edited), so its runs are "
                         "not compared")
        elif len(b | h) > 1:
            # Edited between runs of one commit (a working copy's benchmark file changed between two runs): each
            # version is a row of its own, under one label.
            notes.append(f"{labels[point]}: {len(b | h)} versions of its benchmark code were measured (edited "
                         "between runs); each version is a row of its own, compared only with itself")
    return notes


def _partly_failed_notes(base: dict[tuple[Any, ...], _Pool], head: dict[tuple[Any, ...], _Pool],
                         identities: Collection[tuple[Any, ...]]) -> list[str]:
    """A benchmark that failed in some runs of a side and worked in others is compared on the runs that worked
    (``_Pool.side``), which says nothing of the failures: a kernel that crashes one run in two would read as
    measured. Each such side is named, with how many of its runs failed and the first message."""
    notes = []
    for identity in sorted(identities, key=_sort_key):
        for name, pools in (("base", base), ("head", head)):
            pool = pools.get(identity)
            if pool is None or not pool.run_ids or not pool.failed_runs:
                continue
            runs = len(set(pool.run_ids) | set(pool.failure_runs))
            notes.append(f"{pool.key.label}: failed in {pool.failed_runs} of {runs} {name} runs "
                         f"({pool.failures[0]}); compared on the {len(pool.run_ids)} that worked")
    return notes


def compare_params(alpha: float = 0.05, min_effect: float = 0.01) -> CompareParams:
    try:
        return CompareParams(alpha=alpha, min_effect=min_effect)
    except ValueError as exc:
        raise InvalidInput(str(exc)) from None


def compare_refs(session: Session, base_ref: str, head_ref: str, repository: str | None = None,
                 alpha: float = 0.05, min_effect: float = 0.01,
                 refs: RefResolver | None = None) -> CompareOutcome:
    """``refs``: how a branch or tag name is resolved in ``repository`` (``git_refs.GitRefResolver``); without
    it only run ids, shas and sha prefixes are understood."""
    params = compare_params(alpha, min_effect)
    base = resolve(session, base_ref, repository, refs)
    head = resolve(session, head_ref, repository, refs)
    return compare_resolved(session, base, head, params)
