"""`kernelwatch trace RESULT_ID|RUN_ID`: a result's captured profiler traces (or every traced result's of a run, by
the id `kernelwatch run` and `ci` print) opened in a local xprof (the profiler's own viewer: trace viewer, op
profile, roofline, HLO stats), and optionally written as a Perfetto trace.

The traces are laid out as xprof reads a log directory (``<logdir>/plugins/profile/<session>/<host>.xplane.pb``,
what ``jax.profiler.start_trace`` writes), one session per trace, then ``xprof --logdir`` serves them until
Ctrl-C. ``--no-serve`` only writes the directory and prints it (for a TensorBoard, an xprof elsewhere, a script).
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from kernelwatch.errors import InvalidInput, NotFound
from service.cli.common import EXIT_OK, Subparsers, open_context, stored_id
from service.settings import Settings

if TYPE_CHECKING:  # the store's modules load with the command, not with every other command's start
    from service.store.drilldown import ResultHeader
    from service.store.traces import TraceFile

DEFAULT_PORT = 8791  # xprof's own default
PR_SET_PDEATHSIG = 1  # linux/prctl.h
_UNSAFE = re.compile(r"[^A-Za-z0-9_.=-]+")
# A run's id as runners store it: a task's hex id, "confirm_<job>_<round>", with "-c1", "-r2", "-d1" after it.
_RUN_ID = re.compile(r"[A-Za-z0-9_]{4,64}(-[a-z]\d{1,6}){0,4}")


def trace_target(text: str) -> int | str:
    """argparse's type for what `trace` opens: a result's id (a whole number) or a run's id (or a unique prefix of
    one). A commit's sha is neither, and is said to be none rather than looked up as a run."""
    if text.isascii() and text.isdigit():
        return stored_id(text)
    if not _RUN_ID.fullmatch(text):
        raise argparse.ArgumentTypeError(f"{text[:80]!r} is no result id (a whole number, as in a result page's URL "
                                         "/results/N) nor a run id (as `kernelwatch run` and `ci` print it)")
    return text


def register(sub: Subparsers) -> None:
    trace = sub.add_parser("trace", help="open a result's (or a run's) captured profiler traces in a local xprof")
    trace.add_argument("target", type=trace_target, metavar="RESULT_ID|RUN_ID",
                       help="a result's id, as in its page's URL (/results/N), or a run's id as `kernelwatch run` "
                            "and `ci` print it (every traced benchmark of the run)")
    trace.add_argument("--logdir", type=Path,
                       help="where to lay the traces out (default: KERNELWATCH_HOME/traces/result-N or run-ID)")
    trace.add_argument("--port", type=xprof_port, default=DEFAULT_PORT,
                       help=f"xprof's port, and its worker's the next one (default {DEFAULT_PORT})")
    trace.add_argument("--perfetto", type=Path, metavar="FILE",
                       help="also write the first trace as Chrome trace-event JSON, gzipped (Perfetto's UI and "
                       "chrome://tracing open it)")
    trace.add_argument("--no-serve", action="store_true", help="write the log directory, print it, start nothing")
    trace.set_defaults(handler=_trace)


def _trace(args: argparse.Namespace, settings: Settings) -> int:
    return cmd_trace(settings, args.target, args.logdir, args.port, args.perfetto, serve=not args.no_serve)


def xprof_port(text: str) -> int:
    """A port for xprof's web server: 1024-65534, its worker taking the next one."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 1024 <= port <= 65534:
        raise argparse.ArgumentTypeError(f"{port} is no port xprof can take: 1024-65534 (its worker takes the next)")
    return port


def _ports_free(port: int) -> None:
    """Refuse, in one line, where xprof's two ports are taken: it would start, say where it serves, then fail in a
    traceback (an address in use)."""
    for number, host in ((port, "127.0.0.1"), (port + 1, "0.0.0.0")):
        with socket.socket() as probe:
            try:
                probe.bind((host, number))
            except OSError as exc:
                raise InvalidInput(f"port {number} is not free ({exc.strerror or exc}): xprof needs {port} and "
                                   f"{port + 1}; choose another with --port") from None


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    """The xprof child is sent SIGTERM when `trace` ends however it ends (a kill, a CI timeout): it was left
    serving, its worker port open on every interface, owned by nobody."""
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def session_name(label: str, sha256: str) -> str:
    """An xprof session (a directory name) for one trace: the benchmark and the trace's digest, path-safe."""
    return f"{_UNSAFE.sub('_', label)[:80]}-{sha256[:12]}"


def _traced_results(settings: Settings, target: int | str) -> tuple[str, list[tuple[ResultHeader, list[TraceFile]]]]:
    """What `trace` lays out: the name of its directory and, per result, its header and kept traces."""
    from service.store.drilldown import result_header
    from service.store.runs import results_of_run, run_named, runs_with_prefix
    from service.store.traces import trace_files

    ctx = open_context(settings, reads=True)
    try:
        with ctx.sessions() as session:
            if isinstance(target, int):
                header = result_header(session, target)
                if header is None:
                    raise NotFound(f"no result {target}")
                files = trace_files(header)
                if not files:
                    raise NotFound(f"result {target} has no stored profiler trace (the run did not capture one, or "
                                   "retention pruned it)")
                return f"result-{target}", [(header, files)]
            run = run_named(session, target)
            if run is None:
                prefixed = runs_with_prefix(session, target, 2) if re.fullmatch(r"[0-9a-f]+", target) else []
                if len(prefixed) > 1:
                    raise InvalidInput(f"{target!r} is the start of several runs' ids: give more of it")
                run = prefixed[0] if prefixed else None
            if run is None:
                raise NotFound(f"no run {target!r} (a result's id is a whole number, as in its page's URL "
                               "/results/N; a run's id is what `kernelwatch run` and `ci` print)")
            traced = []
            seen: set[str] = set()
            for result_id, _, _ in sorted(results_of_run(session, run.id)):
                header = result_header(session, result_id)
                if header is None or header.records_result_id != result_id:
                    continue  # a later round's result names the first round's traces: the run's own captures only
                # once each: a benchmark's other metrics (device time beside wall time) share its trace
                files = [f for f in trace_files(header) if f.sha256 not in seen]
                seen.update(f.sha256 for f in files)
                if files:
                    traced.append((header, files))
            if not traced:
                raise NotFound(f"run {run.run_uid} has no stored profiler trace (it did not capture, or retention "
                               "pruned them; a later round only times: its first round's run holds them)")
            return f"run-{_UNSAFE.sub('_', run.run_uid)}", traced
    finally:
        ctx.close()


def cmd_trace(settings: Settings, target: int | str, logdir: Path | None, port: int, perfetto: Path | None, *,
              serve: bool) -> int:
    from runners.artifacts import ArtifactStore
    from runners.parsers.xplane_to_timeline import trace_events
    from service.store.traces import TraceUnavailable, trace_bytes, trace_profile

    name, traced = _traced_results(settings, target)
    artifacts = ArtifactStore(settings.artifacts_dir)
    root = logdir if logdir is not None else settings.home / "traces" / name
    if serve:
        _ports_free(port)
    try:
        for header, files in traced:
            for trace in files:
                directory = root / "plugins" / "profile" / session_name(header.label, trace.sha256)
                directory.mkdir(parents=True, exist_ok=True)
                # Named after the result that captured it (another round's, where this one only timed), as the
                # dashboard's download is.
                (directory / f"result-{header.records_result_id}.xplane.pb").write_bytes(
                    trace_bytes(artifacts, trace))
    except TraceUnavailable as exc:
        raise InvalidInput(str(exc)) from None
    except OSError as exc:
        raise InvalidInput(f"cannot write the traces under {root}: {exc.strerror or exc}") from None
    first_header, first_files = traced[0]
    if perfetto is not None:
        try:
            document = trace_events(trace_profile(artifacts, first_files[0]))
            perfetto.write_bytes(gzip.compress(json.dumps(document, separators=(",", ":")).encode()))
        except TraceUnavailable as exc:
            raise InvalidInput(str(exc)) from None
        except OSError as exc:
            raise InvalidInput(f"cannot write the Perfetto trace {perfetto}: {exc.strerror or exc}") from None
        print(f"Perfetto trace written to {perfetto} (open it at ui.perfetto.dev, or in chrome://tracing)"
              + (f", of {first_header.label} (the run's first traced benchmark)" if len(traced) > 1 else ""),
              file=sys.stderr)
    print(root)
    if isinstance(target, int) and first_header.records_result_id != target:
        # a later round's result: its commit's first round captured
        print(f"the traces were captured by result {first_header.records_result_id} of run "
              f"{first_header.records_run_uid or first_header.run_uid}, an earlier round of the same commit (later "
              "rounds only time)",
              file=sys.stderr)
    count = sum(len(files) for _, files in traced)
    if not serve:
        print(f"{count} trace(s) laid out for xprof: xprof --logdir {root} --port {port}", file=sys.stderr)
        return EXIT_OK
    what = f"result {target}" if isinstance(target, int) else f"{len(traced)} benchmark(s) of run {target}"
    print(f"xprof serving {count} trace(s) of {what} at http://127.0.0.1:{port}/, on this host "
          f"alone (its worker's port {port + 1} listens on every interface: xprof has no setting for it; "
          "Ctrl-C stops it)", file=sys.stderr)
    # xprof's gRPC worker needs a port of its own; next to the web port, so two `trace`s can run at once.
    child = subprocess.Popen([sys.executable, "-m", "service.cli.xprof_local", "--logdir", str(root),
                              "--port", str(port), "--grpc_port", str(port + 1),
                              "--worker_service_address", f"127.0.0.1:{port + 1}", "--hide_capture_profile_button"],
                             preexec_fn=_die_with_parent if sys.platform == "linux" else None)
    # A SIGTERM to `trace` stops xprof too, as Ctrl-C (sent to the whole process group) does.
    signal.signal(signal.SIGTERM, lambda _signum, _frame: child.terminate())
    try:
        code = child.wait()
    except KeyboardInterrupt:
        child.terminate()
        child.wait()
        return EXIT_OK
    return EXIT_OK if code in (0, -2, -15, 130) else code
