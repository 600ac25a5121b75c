"""The process that runs benchmarks: ``python -m runners.child --root DIR [--suite GLOB] [--params F] [--quick]``.

It speaks JSON lines with the parent (runners/session.py). On start it discovers the suite and announces
``{"ready": {"environment": ..., "benchmarks": [{"key", "devices", "timeout_s"}]}}``; then, per line read from
stdin, ``{"run": KEY, "samples": N, "warmup": W}`` is answered by ``{"started": KEY}`` and then
``{"measurements": [...]}``; ``{"exit": true}`` or end of input ends it.

A kernel that crashes the interpreter or hangs takes only this process down; the parent records that
benchmark as failed and starts a fresh process for the rest.

Resource limits (runners/sandbox.py) are applied here, in ``main`` before any benchmark code is imported,
rather than in a ``preexec_fn`` of the parent: that runs between fork and exec in a parent that may have
threads (a Celery worker), where Python cannot promise it is safe, and the CPU budget must move per benchmark
anyway, which only this process can do. A ``{"run": ...}`` may carry ``"cpu_s"``, that benchmark's budget.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from runners import project_imports
from runners.artifacts import ArtifactStore
from runners.calibrate import PASSES, calibrate, calibration_enabled, host_key
from runners.capture import Capturer
from runners.fingerprint import environment_info
from runners.harness import TimingPlan, measure
from runners.pinning import format_cpu_list, parse_cpu_list, pin
from runners.ptx_to_sass import SassTools, find_tools, sm_arch
from runners.sandbox import (
    DEFAULT_OPEN_FILES,
    Limits,
    allow_cpu,
    apply_limits,
    end_with_parent,
    explain_failure,
)
from runners.suite import (
    BenchmarkInstance,
    SuiteNotFound,
    benchmark_version,
    discover,
    module_of,
    parse_param_filter,
    select,
)

# The benchmarks an empty selection's announcement names at most (a suite of thousands is not sent whole).
MAX_DECLARED = 200


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="runners.child")
    parser.add_argument("--root", type=Path, required=True, help="checkout holding kernels_under_test/")
    parser.add_argument("--suite-dir", type=Path, default=None,
                        help="the benchmarks, kept apart from the checkout (default: ROOT/kernels_under_test)")
    parser.add_argument("--suite", default="*", help="glob over suite/name, e.g. 'softmax/*' (comma: several)")
    parser.add_argument("--params", default="", help="NAME=VALUE[,NAME=VALUE]")
    parser.add_argument("--quick", action="store_true", help="only each benchmark's quick points")
    parser.add_argument("--calibrate-only", action="store_true",
                        help="measure the host's calibration (runners/calibrate.py), send it and exit: no suite, "
                        "nothing of the checkout imported")
    parser.add_argument("--quiet-budget", type=float, default=None,
                        help="with --calibrate-only: seconds to wait in all for a quiet host (the runner's "
                        "KERNELWATCH_CALIBRATION_QUIET_S, which the sandbox does not pass on)")
    parser.add_argument("--passes", type=int, default=PASSES, choices=range(1, 11), metavar="1-10",
                        help="with --calibrate-only: walks of the ladder, best per point (the runner's "
                        "KERNELWATCH_CALIBRATION_PASSES)")
    parser.add_argument("--dirty", action="store_true", help="the checkout had uncommitted changes")
    parser.add_argument("--capture-dir", type=Path, default=None,
                        help="artifact store to keep HLO, analyses, dump files and traces in (off when absent)")
    parser.add_argument("--memory-limit-mb", type=int, default=None, help="RLIMIT_DATA of this process (MB)")
    parser.add_argument("--open-files-limit", type=int, default=DEFAULT_OPEN_FILES,
                        help="RLIMIT_NOFILE of this process")
    parser.add_argument("--start-cpu-s", type=int, default=None,
                        help="CPU-seconds this process may use to start (discover the suite)")
    parser.add_argument("--cpu-affinity", type=parse_cpu_list, default=None,
                        help="pin this process to these CPUs (0-3,6) before JAX starts")
    return parser.parse_args(argv)


def dump_dir_from_flags(xla_flags: str) -> Path | None:
    for flag in xla_flags.split():
        if flag.startswith("--xla_dump_to="):
            return Path(flag.split("=", 1)[1])
    return None


def _protocol_stream() -> IO[str]:
    """The real stdout, kept for the protocol; fd 1 is pointed at stderr so a kernel's print() cannot
    corrupt a message."""
    protocol = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return protocol


def _send(stream: IO[str], message: dict[str, Any]) -> None:
    stream.write(json.dumps(message) + "\n")
    stream.flush()


def gpu_sass_setup() -> tuple[str | None, SassTools | None]:
    """(sm_XX, tools) on a GPU host that has ptxas and a SASS lister; (None, None) elsewhere."""
    import jax

    device = jax.devices()[0]
    capability = getattr(device, "compute_capability", None) if device.platform == "gpu" else None
    tools = find_tools() if capability else None
    return (sm_arch(str(capability)), tools) if capability and tools else (None, None)


def announced_environment(dirty: bool, calibrate: bool, pinned: bool = False) -> dict[str, Any]:
    """The environment; on a CPU host with calibration on, with the key the host's calibration is kept under
    (``calibration_key``, outside the manifest's fields: the runner swaps it for the kept figures, measuring
    them first in a process of their own where it has none). Accelerators have published figures, and a
    calibration there would measure the host CPU's backend rather than the chip the results ran on. A pinned
    process names the CPUs it runs on (only then: unpinned environments keep the identity they always had)."""
    environment = environment_info(dirty=dirty)
    if pinned:
        environment["cpu_affinity"] = format_cpu_list(os.sched_getaffinity(0))
    if calibrate and environment["backend"] == "cpu":
        environment["calibration_key"] = host_key(environment)
    return environment


def serve_calibration(args: argparse.Namespace, outbox: IO[str]) -> int:
    """--calibrate-only: this host's calibration and its key, for the runner to keep."""
    environment = announced_environment(args.dirty, calibrate=False, pinned=args.cpu_affinity is not None)
    measured = calibrate(quiet_budget_s=args.quiet_budget, passes=args.passes)
    _send(outbox, {"calibrated": {"key": host_key(environment), "figures": measured.as_manifest(),
                                  "busy": measured.measured_busy}})
    return 0


def serve(args: argparse.Namespace, inbox: IO[str], outbox: IO[str],
          origin_problem: Callable[[], str | None] = lambda: None) -> int:
    """Announce the suite, then run what the parent asks for; ``origin_problem`` says before each benchmark is
    timed whether the code under test came from somewhere other than the checkout (it then fails untimed)."""
    unimportable: dict[str, str] = {}
    try:
        specs, suite_missing = discover(args.root.resolve(), args.suite_dir, unimportable), None
    except SuiteNotFound as exc:
        # Said, not raised: a commit from before the suite existed (a pull request's merge-base, where the pull
        # request adds it) costs the benchmarks other commits of the run declare, not the run (runners/local.py).
        specs, suite_missing = [], str(exc)
    instances: dict[str, BenchmarkInstance] = {
        i.key: i for i in select(specs, args.suite, parse_param_filter(args.params), quick=args.quick)
    }
    environment = announced_environment(args.dirty, calibration_enabled(), pinned=args.cpu_affinity is not None)
    _send(outbox, {"ready": {
        "environment": environment,
        "benchmarks": [{"key": k, "suite": i.spec.suite, "name": i.spec.name, "params": i.params,
                        "unit": i.spec.unit, "direction": i.spec.direction, "devices": i.spec.devices,
                        "timeout_s": i.spec.timeout_s, "module": module_of(i.spec),
                        "version": benchmark_version(i.spec.factory)} for k, i in instances.items()],
        # Suite modules whose import raised here (by name: the error): the others are announced all the same; and
        # the modules that did import, selected from or not (runners/local.py cover_unimportable).
        "unimportable": unimportable,
        "modules": sorted({module_of(s) for s in specs}),
        "suite_missing": suite_missing,  # why this checkout has no suite at all, or None
        # What the suite declares, where the selection holds none of it: a mistyped --suite is told what exists.
        "declared": [] if instances else sorted({f"{s.suite}/{s.name}" for s in specs})[:MAX_DECLARED],
    }})
    capturer = None
    if args.capture_dir is not None:
        capturer = Capturer(ArtifactStore(args.capture_dir), dump_dir_from_flags(os.environ.get("XLA_FLAGS", "")),
                            *gpu_sass_setup())
    for line in inbox:
        command = json.loads(line)
        if command.get("exit"):
            break
        key = command["run"]
        _send(outbox, {"started": key})
        instance = instances.get(key)
        if instance is None:
            _send(outbox, {"error": f"no benchmark {key} in this suite"})
            continue
        plan = TimingPlan(samples=int(command.get("samples", 20)), warmup=int(command.get("warmup", 3)))
        if command.get("cpu_s"):
            allow_cpu(int(command["cpu_s"]))
        measurements = [dataclasses.replace(m, message=explain_failure(m.message, args.memory_limit_mb,
                                                                       str(environment["backend"])))
                        if m.status == "failed" and m.message else m
                        for m in measure(instance, plan, capturer, origin_problem)]
        _send(outbox, {"measurements": [dataclasses.asdict(m) for m in measurements]})
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    end_with_parent()
    apply_limits(Limits(memory_mb=args.memory_limit_mb, open_files=args.open_files_limit))
    if args.cpu_affinity is not None:
        # Before JAX is imported: XLA sizes its thread pools from the CPUs this process may run on.
        pin(args.cpu_affinity)
    if args.start_cpu_s is not None:
        allow_cpu(args.start_cpu_s)
    if args.calibrate_only:
        return serve_calibration(args, _protocol_stream())
    # The project's own packages from the checkout, ahead of any installed copy (an editable install of the
    # project would otherwise be measured at every commit); anything else in the checkout only after what is
    # installed, so that it can shadow neither the standard library nor this runner (runners/project_imports.py).
    names = project_imports.install(args.root.resolve())
    if args.suite_dir is not None:  # helpers beside the benchmark modules, as for a suite inside the checkout
        sys.path.append(str(args.suite_dir.resolve()))
    outbox = _protocol_stream()
    return serve(args, sys.stdin, outbox, lambda: project_imports.origin_problem(names, args.root.resolve()))


def exit_now(code: int) -> None:
    """End the process without the interpreter's finalization: in a process that imported jax it tears down XLA's
    backends and the profiler (0.16-0.26 s against 0.02 s, bench/process_end.py), which the runner waits out at the
    end of every run, round and bisection step. Nothing here needs it: ``main`` returns once the parent asked for
    the exit (or closed the pipe, or the calibration was sent), every message is flushed when sent and every
    artifact closed when written. An exception still ends the process the usual way, its traceback on stderr."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    exit_now(main())
