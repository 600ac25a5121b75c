"""Run a suite at one commit (or two, interleaved) on this host, and assemble the manifests.

A commit's suite may need more than one environment: benchmarks that need N devices run, on a CPU host, in a
process that simulates N devices (which would slow every single-device kernel if it were the default). Each
environment becomes a run of its own, so each manifest has exactly one environment.
"""

from __future__ import annotations

import dataclasses
import random
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kernelwatch.errors import InvalidInput
from kernelwatch.vocabulary import Trigger
from runners.gitrepo import (
    GitError,
    checkout,
    commit_facts,
    copy_working_tree,
    current_branch,
    first_commits,
    is_ancestor,
    is_dirty,
    private_clone,
    resolve,
    tree_digest,
)
from runners.host_health import HostSampler, Snapshot, figures
from runners.pinning import checked_affinity
from runners.session import Announced, BenchmarkProcess, ChildConfig, ProcessFailed
from service.contract import FORMAT_VERSION
from service.contract.manifest import NAME_CHARACTERS, NAME_MAX_LENGTH

ProgressFn = Callable[[int, int, str], None]
CPU_DEVICE_FLAG = "--xla_force_host_platform_device_count"
CPU_ISA_FLAG = "--xla_cpu_max_isa"
# What XLA:CPU accepts for CPU_ISA_FLAG (its flag's help, jaxlib 0.10), in any case: anything else is warned about
# in the benchmark process's log and ignored, while the flag's text still named a new environment.
CPU_ISAS = ("SSE4_2", "AVX", "AVX2", "AVX512", "AVX512_VNNI", "AVX512_BF16", "AMX", "AMX_FP16")
# The size of XLA's CPU intra-op thread pool, read by jaxlib's CPU client when it starts (xla DefaultThreadPoolSize).
SINGLE_THREAD_ENV = "PJRT_NPROC"
# RunRequest.keep_pages: glibc maps no request under 1 GiB afresh (a thread's arena still maps one of 64 MiB or
# more) and trims nothing under 4 GiB back to the system, so a call's output reuses the pages the last call freed.
KEEP_PAGES_ENV = {"MALLOC_MMAP_THRESHOLD_": str(2**30), "MALLOC_TRIM_THRESHOLD_": str(2**32)}


@dataclass(frozen=True)
class RunRequest:
    repo: Path
    rev: str
    samples: int = 20
    warmup: int = 3
    suite: str = "*"
    # The benchmarks kept apart from the measured code (run --benchmarks): a directory applied to every commit,
    # whose results are stored under the commit's own sha. None: the commit's own kernels_under_test/.
    benchmarks: Path | None = None
    params: str = ""
    quick: bool = False
    branch: str | None = None  # None: the repository's checked-out branch when the commit is on it
    trigger: str = "push"
    pr_number: int | None = None  # the pull request a "pr" run was made for
    max_benchmark_s: float = 600.0  # a cap on every benchmark's own limit
    capture_dir: Path | None = None  # artifact store for HLO, analyses, dumps and traces; None: no capture
    # Pins the widest x86 ISA XLA may use ("AVX2", "AVX512"...), so hosts of different generations generate
    # the same code and compare; it becomes part of the environment (XLA_FLAGS) like any flag.
    cpu_isa: str | None = None
    # CPU noise reduction, both part of the environment (so runs with and without never compare): the CPUs the
    # benchmark process is pinned to (set in the child before JAX starts), and XLA's CPU thread pool held to one
    # thread (PJRT_NPROC=1: on jaxlib 0.10 --xla_cpu_multi_thread_eigen=false no longer changes the thread count).
    cpu_affinity: tuple[int, ...] | None = None
    xla_single_thread: bool = False
    # glibc told to keep the pages it frees (KEEP_PAGES_ENV): an output of 32 MiB or more is otherwise mapped afresh
    # and faulted in on every call, about 3x the kernel's own time (bench/fresh_pages.py). Part of the environment.
    keep_pages: bool = False
    # Where the repository came from, when ``repo`` is a clone of it (a worker's cache): the manifest names the
    # origin, so that runs from any runner's clone land in the same repository and series.
    origin: str | None = None
    # The name its runs are stored under (`run --repository-name`); None: the folder's (or the origin's) name.
    repository_name: str | None = None
    # Only these benchmarks (keys as the suite names them, ``suite/name[k=v,...]``) of the selection: the
    # further rounds `ci --max-rounds` makes of the benchmarks still undecided. None: the whole selection.
    only: frozenset[str] | None = None
    # The interpreter the benchmarks run in: "runner" (this one), "commit" (an environment built from the measured
    # commit's own dependency declarations, runners/envs.py), or ``python``, a user-named interpreter.
    environment: str = "runner"
    python: Path | None = None
    # The working copy as it is, under ``rev``'s commit (run --working-tree): stored as a dirty run, which is an
    # environment of its own (never a point of the commit's history).
    working_tree: bool = False
    # The project file's build (runners/build_step.py): run in each checkout, sandboxed, before its benchmarks.
    build: tuple[str, ...] | None = None


@dataclass
class EnvironmentRun:
    """What one commit produced in one environment."""

    environment: dict[str, Any]
    devices: int
    planned: list[str] = field(default_factory=list)
    measurements: list[dict[str, Any]] = field(default_factory=list)
    started_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    finished_at: datetime | None = None
    # The host's counters before the first benchmark and after the latest (runners/host_health.py); None where
    # /proc/stat cannot be read, and then the manifest has no host_health.
    health_start: Snapshot | None = None
    health_end: Snapshot | None = None


class SuiteRunner:
    """Runs the selected benchmarks of one checkout, one at a time, in as many processes as it takes."""

    def __init__(self, root: Path, request: RunRequest, dirty: bool = False, python: Path | None = None,
                 harness_dir: Path | None = None) -> None:
        self.request = request
        extra_env = {"XLA_FLAGS": _with_flag(CPU_ISA_FLAG, request.cpu_isa)} if request.cpu_isa else {}
        if request.xla_single_thread:
            extra_env[SINGLE_THREAD_ENV] = "1"
        if request.keep_pages:
            extra_env.update(KEEP_PAGES_ENV)
        self._config = ChildConfig(root=root, suite=request.suite, suite_dir=request.benchmarks,
                                   params=request.params, quick=request.quick,
                                   dirty=dirty, capture_dir=request.capture_dir, extra_env=extra_env,
                                   cpu_affinity=checked_affinity(request.cpu_affinity), python=python,
                                   harness_dir=harness_dir)
        self._sampler = HostSampler.for_this_host()
        self._processes: dict[int, BenchmarkProcess] = {}
        primary = self._start(0)
        self.primary_devices = int(primary.environment["device_count"])
        self.backend = str(primary.environment["backend"])
        self.announced: dict[str, Announced] = {b.key: b for b in primary.benchmarks
                                                if request.only is None or b.key in request.only}
        self.declared = primary.declared  # what the suite declares, where the selection is empty
        self.unimportable = primary.unimportable  # suite modules whose import raised here: name -> error
        self.modules = primary.modules  # the suite modules that imported here
        self.suite_missing = primary.suite_missing  # why this checkout has no suite at all, or None
        # Benchmarks another commit's suite declares in a module that did not import here: recorded failed with
        # the import's error, never run (:func:`cover_unimportable`).
        self._not_imported: dict[str, str] = {}
        self.runs: dict[int, EnvironmentRun] = {}

    def stand_in(self, bench: Announced, message: str) -> None:
        """``bench``, announced by another commit's suite, is of a module that did not import in this checkout:
        it is planned here too, and recorded as failed with ``message`` when its turn comes."""
        self.announced[bench.key] = bench
        self._not_imported[bench.key] = message

    def _group(self, devices: int) -> int:
        """0 is the default process; N > 0 a process simulating N devices on a CPU host."""
        return 0 if devices <= self.primary_devices else devices

    def _start(self, group: int) -> BenchmarkProcess:
        config = self._config
        if group:
            base = config.extra_env.get("XLA_FLAGS")
            # The other settings (the single-thread pool) apply to every process: only XLA_FLAGS changes.
            config = dataclasses.replace(config, extra_env={
                **config.extra_env, "XLA_FLAGS": _with_flag(CPU_DEVICE_FLAG, str(group), base)})
        process = BenchmarkProcess(config)
        self._processes[group] = process
        return process

    def _process(self, group: int) -> BenchmarkProcess:
        process = self._processes.get(group)
        if process is None or not process.alive:
            if process is not None:
                process.close()
            process = self._start(group)
        return process

    def keys(self) -> list[str]:
        return list(self.announced)

    def run_one(self, key: str) -> list[dict[str, Any]]:
        bench = self.announced[key]
        group = self._group(bench.devices)
        before = self._sampler.snapshot()  # the environment run's start, if this is its first benchmark
        started = datetime.now(UTC)  # likewise: read after its first benchmark, a run lasted 10 µs
        if key in self._not_imported:
            measurements = [bench.failed(self._not_imported[key])]
            # Filed in the environment its group runs in (a simulated N-device one on a CPU host), as the other
            # commit's result was: the failure must pair with it.
            process = self._process(group) if group and self.backend == "cpu" else None
        elif group and self.backend != "cpu":
            measurements = [bench.failed(f"needs {bench.devices} devices; this {self.backend} host has "
                                         f"{self.primary_devices}")]
            process = None
        else:
            try:
                process = self._process(group)
                limit = min(bench.timeout_s, self.request.max_benchmark_s)
                measurements = process.run(key, self.request.samples, self.request.warmup, limit)
            except ProcessFailed as exc:
                process = self._processes.get(group)
                measurements = [bench.failed(str(exc))]
        environment = process.environment if process is not None else self._processes[0].environment
        run = self.runs.setdefault(group, EnvironmentRun(environment=environment, devices=group or 1,
                                                         started_at=started, health_start=before))
        run.planned.append(key)
        run.measurements.extend(measurements)
        run.finished_at = datetime.now(UTC)
        run.health_end = self._sampler.snapshot()
        return measurements

    def close(self) -> None:
        for process in self._processes.values():
            process.close()
        self._processes.clear()


def _with_flag(flag: str, value: str, flags: str | None = None) -> str:
    """XLA_FLAGS (this process's, unless given) with ``flag`` set to ``value``, replacing any earlier setting."""
    import os

    current = os.environ.get("XLA_FLAGS", "") if flags is None else flags
    kept = [f for f in current.split() if not f.startswith(flag + "=")]
    return " ".join([*kept, f"{flag}={value}"])


class ModuleNotImported(InvalidInput):
    """A suite module did not import at a commit, and no other commit of the call declares its benchmarks, so
    there is nothing to record them under: the user's to fix (or to move the import into the factory)."""


class NoSuite(InvalidInput):
    """No commit of the call has a suite (no ``kernels_under_test`` package, or no benchmarks directory): the
    user's to fix, one line and exit 2 from any command."""


def cover_unimportable(runners: Sequence[SuiteRunner]) -> None:
    """Where a suite module did not import at one commit (``SuiteRunner.unimportable``) and did at another of the
    same call, the benchmarks the others declare in it are planned at that commit too, failed with the import's
    error (``SuiteRunner.stand_in``): `ci` then reads a module that head broke as benchmarks that worked in base
    and fail in head, and one that base cannot import yet (a pull request adding a kernel and its benchmark) as
    failed in base, never as the whole suite failing. A module that did not import at a commit and whose
    benchmarks no other commit declares is :class:`ModuleNotImported`.

    A commit with no suite at all (``SuiteRunner.suite_missing``: a pull request's merge-base, where the pull
    request adds the suite) is covered the same way, every benchmark the others declare failed there; where no
    commit has one, :class:`NoSuite`."""
    missing = [runner for runner in runners if runner.suite_missing is not None]
    if len(missing) == len(runners):
        first = missing[0].suite_missing
        at = (f"at {missing[0].request.rev}" if len(runners) == 1
              else f"at any of the {len(runners)} commits")
        raise NoSuite(f"no benchmark suite {at}: {first} (a suite is a kernels_under_test package in the "
                      "repository, or a benchmarks directory named by kernelwatch.toml or --benchmarks)")
    for runner in missing:
        found = {b.key: b for other in runners if other is not runner for b in other.announced.values()
                 if b.key not in runner.announced}
        for bench in found.values():
            # Stored with the result: the reason without the runner's own checkout path. (A benchmarks directory
            # kept apart is one for every commit: only a commit's own kernels_under_test can be missing here.)
            runner.stand_in(bench, "this commit has no benchmark suite (no kernels_under_test package)")
    for runner in runners:
        for module, error in runner.unimportable.items():
            found = {b.key: b for other in runners if other is not runner for b in other.announced.values()
                     if b.module == module and b.key not in runner.announced}
            if not found and any(module in other.modules for other in runners if other is not runner):
                continue  # it imported elsewhere and none of its benchmarks is selected: nothing was lost here
            if not found:
                also = " (nor at any other commit of this run)" if len(runners) > 1 else ""
                # A module that does not even compile is its own to fix; one whose import of the measured code
                # fails at an older commit can move that import into the factory.
                hint = ("fix the module" if error.startswith(("SyntaxError", "IndentationError", "TabError"))
                        else "fix the import, or import the kernel inside the benchmark's factory")
                raise ModuleNotImported(
                    f"the benchmark module {module!r} does not import at {runner.request.rev}{also}: {error}; its "
                    f"benchmarks cannot be declared there ({hint})")
            for bench in found.values():
                runner.stand_in(bench, f"the benchmark module {module!r} did not import at this commit: {error}")


def interleave(runners: Sequence[SuiteRunner], progress: ProgressFn | None = None) -> None:
    """Run every benchmark on every runner, alternating the order per benchmark (AB, BA, AB...), so that a
    machine that drifts during the run slows both sides alike. Progress names the revision where there are
    several (`ci`'s base and head would otherwise read as one benchmark told twice)."""
    keys = list(dict.fromkeys(k for r in runners for k in r.keys()))
    total = sum(len(r.keys()) for r in runners)
    done = 0
    for index, key in enumerate(keys):
        order = list(runners) if index % 2 == 0 else list(reversed(runners))
        for runner in order:
            if key in runner.announced:
                runner.run_one(key)
                done += 1
                if progress is not None:
                    progress(done, total, key if len(runners) == 1 else f"{key} at {runner.request.rev}")


def _manifest_status(planned: int, results: list[dict[str, Any]]) -> str:
    failed = sum(1 for r in results if r["status"] != "ok")
    if not results or failed == len(results):
        return "failed"
    if failed or len(results) < planned:
        return "partial"
    return "complete"


_RESULT_FIELDS = ("suite", "name", "params", "metric", "unit", "direction", "status", "samples", "compile_time_s",
                  "flops", "bytes_accessed", "max_abs_error", "message", "artifacts", "cost", "benchmark_version")


def _storable(text: str | None) -> str | None:
    """A failure message as the service can store it: kernel code can put anything in an exception, and one NUL
    or lone surrogate (no database column holds them) would get the whole run refused. Both are escaped."""
    if text is None:
        return None
    return "".join(f"\\x{ord(c):02x}" if c == "\x00" else f"\\u{ord(c):04x}" if 0xD800 <= ord(c) <= 0xDFFF else c
                   for c in text)


def build_manifest(
    request: RunRequest,
    run: EnvironmentRun,
    commit: dict[str, Any],
    repository: dict[str, Any],
    branch: str | None,
    run_id: str,
    round_of: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """``round_of``: the session and round index of interleaved runs (``run_commits``), which pairs them."""
    # Absent optional fields stay absent rather than null: the contract has defaults for them.
    results = [{k: _storable(m[k]) if k == "message" else m[k] for k in _RESULT_FIELDS
                if m.get(k) is not None or k == "message"} for m in run.measurements]
    finished = run.finished_at or datetime.now(UTC)
    health = figures(run.health_start, run.health_end) if run.health_start and run.health_end else None
    return {
        "format_version": FORMAT_VERSION,
        "run_id": run_id,
        "repository": repository,
        "commit": commit,
        "branch": branch,
        "trigger": request.trigger,
        **({"pr_number": request.pr_number} if request.pr_number is not None else {}),
        "environment": run.environment,
        "started_at": run.started_at.isoformat(),
        "finished_at": finished.isoformat(),
        "status": _manifest_status(len(run.planned), [r for r in results if r["metric"] == "wall_time"]),
        "results": results,
        **({"host_health": health} if health is not None else {}),
        **({"round": round_of} if round_of is not None else {}),
    }


def repository_name(repo: Path) -> str:
    """The folder's name as the manifest takes it: any other character (a non-ASCII letter too, which the
    manifest refused after the suite was measured) made a "-", and no longer than a name may be."""
    name = "".join(c if c in NAME_CHARACTERS else "-" for c in repo.resolve().name)[:NAME_MAX_LENGTH]
    return name or "repository"


@dataclass
class _Prepared:
    request: RunRequest
    commit: dict[str, Any]
    repository: dict[str, Any]
    branch: str | None
    worktree: Path
    dirty: bool
    python: Path | None = None  # the interpreter of the commit's environment; None: this one
    harness_dir: Path | None = None
    working_tree: str = ""  # a dirty checkout's files' digest (the manifest's environment.working_tree)


def checkout_at(repo: Path, rev: str, cache_dir: Path, repos_dir: Path) -> Path:
    """KernelWatch's checkout of ``rev`` of the local repository ``repo`` (made from its own clone, as every
    measured commit's is): for reading what a commit holds, such as its suite or its project file."""
    sha = resolve(repo, rev)
    return checkout(private_clone(repo, repos_dir, sha), sha, cache_dir / repository_name(repo))


def suite_at(repo: Path, rev: str, directory: str, cache_dir: Path, repos_dir: Path) -> Path:
    """The benchmarks directory ``directory`` as of commit ``rev`` (`--benchmarks REV:DIR`): one suite applied
    to every measured commit, whatever each holds. It must lie inside the repository."""
    tree = checkout_at(repo, rev, cache_dir, repos_dir).resolve()
    path = (tree / directory).resolve()
    if not path.is_relative_to(tree) or not path.is_dir():
        raise GitError(f"{rev}:{directory}: no such directory in {rev}")
    return path


def _interpreter(request: RunRequest, worktree: Path, envs_dir: Path) -> Path | None:
    """The interpreter the request's benchmarks run in at this checkout; None: this one."""
    if request.python is not None:
        return request.python
    if request.environment == "commit":
        from runners.envs import commit_python

        return commit_python(worktree, envs_dir, "the working copy" if request.working_tree else request.rev)
    if request.environment != "runner":
        raise ValueError(f"unknown environment {request.environment!r} (runner or commit)")
    return None


def _prepare(request: RunRequest, cache_dir: Path, repos_dir: Path, envs_dir: Path) -> _Prepared:
    repo = request.repo.resolve()
    facts = commit_facts(repo, request.rev)
    head_branch = current_branch(repo)
    branch = request.branch
    # A commit on the checked-out branch is a point of its history, unless the run is a pull request's: it is
    # measured with the pull request's suite (its head's, or `ci`'s working copy), which may be edited, and a
    # merge-base run so labelled put the edit into the branch's series.
    if branch is None and request.trigger != Trigger.PR and head_branch and is_ancestor(repo, facts.sha, head_branch):
        branch = head_branch
    if request.working_tree:
        worktree, dirty = copy_working_tree(repo, cache_dir / repository_name(repo)), True
        branch = None
    else:
        # Checked out from KernelWatch's own clone: nothing is registered in, or run from, the user's repository.
        worktree = checkout(private_clone(repo, repos_dir, facts.sha), facts.sha, cache_dir / repository_name(repo))
        dirty = is_dirty(worktree)
    working_tree = tree_digest(worktree) if dirty else ""  # before any build: its products are not the code
    name, url = repository_name(repo), repo.as_uri()
    if request.origin is not None and not Path(request.origin).expanduser().is_dir():
        url = request.origin
        name = repository_name(Path(request.origin.rstrip("/").rsplit("/", 1)[-1].removesuffix(".git") or "repo"))
    roots = first_commits(repo, facts.sha)
    repository = {"name": request.repository_name or name, "url": url, "default_branch": head_branch or "main",
                  **({"first_commits": roots} if roots else {})}
    python = _interpreter(request, worktree, envs_dir)
    if request.build:
        from runners.build_step import run_build

        run_build(request.build, worktree, python)  # after `dirty` was read: its products do not make a run dirty
    return _Prepared(request, facts.as_manifest(), repository, branch, worktree, dirty, python,
                     envs_dir / "harness" if python is not None else None, working_tree=working_tree)


def _manifests(prepared: _Prepared, runner: SuiteRunner, run_id: str,
               round_of: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    out = []
    for group, run in sorted(runner.runs.items()):
        # A stable id per environment: a redelivered task re-running the same commit maps to the same runs.
        rid = run_id if group == 0 else f"{run_id}-d{group}"
        manifest = build_manifest(prepared.request, run, prepared.commit, prepared.repository, prepared.branch, rid,
                                  round_of)
        if prepared.working_tree:
            manifest["environment"] = {**manifest["environment"], "working_tree": prepared.working_tree}
        out.append(manifest)
    return out


def run_commits(requests: Sequence[RunRequest], cache_dir: Path, progress: ProgressFn | None = None,
                run_ids: Sequence[str] | None = None, rounds: int = 1,
                repos_dir: Path | None = None, first_round: int = 0,
                envs_dir: Path | None = None,
                after_first_round: Callable[[list[list[dict[str, Any]]]], None] | None = None,
                session: str | None = None,
                ) -> list[list[dict[str, Any]]]:
    """Run each request's suite at its commit, benchmark by benchmark interleaved across the commits, ``rounds``
    times, and return each commit's manifests (one per environment and round).

    Each round starts fresh benchmark processes, so that each round of a commit is a run of its own: the run is
    the unit of replication (a process's own luck, its memory layout and the host's minute, is shared by every
    sample in it and by no other run). Two commits take turns starting a round (AB, BA, AB...), as they take
    turns per benchmark inside one; more start each round in an order of its own (:func:`round_order`). Only the
    first round captures artifacts; the others only time.

    ``cache_dir`` holds the checkouts; ``repos_dir`` KernelWatch's clones of local repositories they are made
    from, ``envs_dir`` the commits' own environments (defaults: ``repos`` and ``envs`` beside ``cache_dir``, as
    under KERNELWATCH_HOME).

    ``first_round`` continues a session: with the same ``run_ids``, rounds ``first_round``... of it, their runs
    numbered and ordered as if made in one call (`ci --max-rounds` adds rounds while a benchmark is undecided).

    ``after_first_round`` sees each commit's manifests of this call's first round; what it raises ends the call
    there (a check of what every round would repeat: an empty selection, the wrong backend). Where it is given, a
    selection empty at every commit is :class:`NothingSelected` first, naming what the suites declare.

    ``session`` names the interleaved session the runs are rounds of, for a caller that interleaves commits
    itself, a call per commit and round (the demo); by default a session of several commits or rounds is named
    after its first run, and a single run is of no session."""
    if rounds < 1:
        raise ValueError(f"at least one round, not {rounds}")
    if first_round < 0 or (first_round and run_ids is None):
        raise ValueError("a session is continued with its run ids, from a round >= 0")
    repos = repos_dir if repos_dir is not None else cache_dir.parent / "repos"
    envs = envs_dir if envs_dir is not None else cache_dir.parent / "envs"
    prepared = [_prepare(r, cache_dir, repos, envs) for r in requests]
    ids = list(run_ids) if run_ids is not None else [uuid.uuid4().hex for _ in requests]
    out: list[list[dict[str, Any]]] = [[] for _ in requests]
    last = first_round + rounds
    for round_index in range(first_round, last):
        order = round_order(len(prepared), round_index, ids[0])
        runners: dict[int, SuiteRunner] = {}
        try:
            for i in order:
                request = prepared[i].request
                if round_index:
                    request = dataclasses.replace(request, capture_dir=None)
                runners[i] = SuiteRunner(prepared[i].worktree, request, dirty=prepared[i].dirty,
                                         python=prepared[i].python, harness_dir=prepared[i].harness_dir)
            cover_unimportable([runners[i] for i in order])
            interleave([runners[i] for i in order], _round_progress(progress, round_index, first_round, last))
            for i in order:
                # A stable id per round: a redelivered task re-running the same commits maps to the same runs.
                rid = ids[i] if round_index == 0 else f"{ids[i]}-r{round_index}"
                # The session is named after its first run (stable too); runs of one session and round were
                # made back to back, and a comparison pairs them.
                named = session or (ids[0] if len(prepared) > 1 or last > 1 else None)
                round_of = {"session": named, "index": round_index} if named is not None else None
                out[i] += _manifests(prepared[i], runners[i], rid, round_of)
        finally:
            for runner in runners.values():
                runner.close()
        if round_index == first_round and after_first_round is not None:
            if not any(runner.announced for runner in runners.values()):  # the check's own case, with the names
                raise NothingSelected(sorted({name for runner in runners.values() for name in runner.declared}))
            after_first_round(out)
    return out


class NothingSelected(InvalidInput):
    """No commit's suite holds a benchmark of the selection (``--suite``, ``--params``, ``--quick``): the same in
    every round, so said after the first. ``declared``: suite/name of what the suites declare (at most
    runners.child.MAX_DECLARED of each), for the message. The user's input: one line and exit 2 from any command."""

    def __init__(self, declared: Sequence[str]) -> None:
        self.declared = list(declared)
        shown = ", ".join(self.declared[:40]) + (f", ... ({len(self.declared)} in all)"
                                                 if len(self.declared) > 40 else "")
        super().__init__("the suite selected no benchmark (check --suite and --params): "
                         + (f"it declares {shown}" if self.declared else "it declares none"))


def round_order(commits: int, round_index: int, seed: str) -> list[int]:
    """The order a round starts the commits' benchmark processes in. Two commits alternate (AB, BA, ...), which
    balances a drift of the host over the session between them. More are shuffled, a permutation of their own
    each round (seeded by the session's first run id, so a redelivered task repeats it): reversed each round,
    the first and the last commit were at an end of every round, and in bench/verdict_calibration.py the base
    commit, always at an end, landed 6 % faster than its code-identical twins (6 of 8 rounds), a change called in
    27 % of five-run draws; shuffled, it did not stand apart (bench/README.md, 2026-12-06, eighth: one pair of
    measurements, the position effect suspected, not proven). Kalibera and Jones randomise the order for this."""
    order = list(range(commits))
    if commits <= 2:
        return order[::-1] if round_index % 2 else order
    random.Random(f"{seed}:{round_index}").shuffle(order)
    return order


def _round_progress(progress: ProgressFn | None, round_index: int, first: int, last: int) -> ProgressFn | None:
    """Progress within a round, told as progress over this call's rounds ``first``..``last - 1`` (the round
    named, out of ``last``, when there are several)."""
    if progress is None or last == 1:
        return progress

    def told(done: int, planned: int, key: str) -> None:
        progress((round_index - first) * planned + done, (last - first) * planned,
                 f"round {round_index + 1}/{last} {key}")

    return told


def run_at_commit(request: RunRequest, cache_dir: Path, progress: ProgressFn | None = None,
                  run_id: str | None = None, rounds: int = 1) -> list[dict[str, Any]]:
    """Check the commit out, run the suite in child processes (``rounds`` times, each round a run of its own),
    and return its manifests (JSON-ready dicts)."""
    return run_commits([request], cache_dir, progress, [run_id] if run_id else None, rounds)[0]
