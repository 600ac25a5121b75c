"""`kernelwatch trace RESULT_ID`: a result's captured profiler traces opened in a local xprof (the profiler's own
viewer: trace viewer, op profile, roofline, HLO stats), and optionally written as a Perfetto trace.

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

from kernelwatch.errors import InvalidInput, NotFound
from service.cli.common import EXIT_OK, Subparsers, open_context, stored_id
from service.settings import Settings

DEFAULT_PORT = 8791  # xprof's own default
PR_SET_PDEATHSIG = 1  # linux/prctl.h
_UNSAFE = re.compile(r"[^A-Za-z0-9_.=-]+")


def register(sub: Subparsers) -> None:
    trace = sub.add_parser("trace", help="open a result's captured profiler traces in a local xprof")
    trace.add_argument("result_id", type=stored_id, metavar="RESULT_ID", help="as in a result page's URL (/results/N)")
    trace.add_argument("--logdir", type=Path,
                       help="where to lay the traces out (default: KERNELWATCH_HOME/traces/result-N)")
    trace.add_argument("--port", type=xprof_port, default=DEFAULT_PORT,
                       help=f"xprof's port, and its worker's the next one (default {DEFAULT_PORT})")
    trace.add_argument("--perfetto", type=Path, metavar="FILE",
                       help="also write the first trace as Chrome trace-event JSON, gzipped (Perfetto's UI and "
                       "chrome://tracing open it)")
    trace.add_argument("--no-serve", action="store_true", help="write the log directory, print it, start nothing")
    trace.set_defaults(handler=_trace)


def _trace(args: argparse.Namespace, settings: Settings) -> int:
    return cmd_trace(settings, args.result_id, args.logdir, args.port, args.perfetto, serve=not args.no_serve)


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


def cmd_trace(settings: Settings, result_id: int, logdir: Path | None, port: int, perfetto: Path | None, *,
              serve: bool) -> int:
    from runners.parsers.xplane_to_timeline import trace_events
    from service.store.drilldown import result_header
    from service.store.traces import TraceUnavailable, trace_bytes, trace_files, trace_profile

    ctx = open_context(settings, reads=True)
    with ctx.sessions() as session:
        header = result_header(session, result_id)
    if header is None:
        raise NotFound(f"no result {result_id}")
    files = trace_files(header)
    if not files:
        raise NotFound(f"result {result_id} has no stored profiler trace (the run did not capture one, or "
                       "retention pruned it)")
    root = logdir if logdir is not None else settings.home / "traces" / f"result-{result_id}"
    if serve:
        _ports_free(port)
    try:
        for trace in files:
            directory = root / "plugins" / "profile" / session_name(header.label, trace.sha256)
            directory.mkdir(parents=True, exist_ok=True)
            # Named after the result that captured it (another round's, where this one only timed), as the
            # dashboard's download is.
            (directory / f"result-{header.records_result_id}.xplane.pb").write_bytes(
                trace_bytes(ctx.artifacts, trace))
    except TraceUnavailable as exc:
        raise InvalidInput(str(exc)) from None
    except OSError as exc:
        raise InvalidInput(f"cannot write the traces under {root}: {exc.strerror or exc}") from None
    if perfetto is not None:
        try:
            document = trace_events(trace_profile(ctx.artifacts, files[0]))
            perfetto.write_bytes(gzip.compress(json.dumps(document, separators=(",", ":")).encode()))
        except TraceUnavailable as exc:
            raise InvalidInput(str(exc)) from None
        except OSError as exc:
            raise InvalidInput(f"cannot write the Perfetto trace {perfetto}: {exc.strerror or exc}") from None
        print(f"Perfetto trace written to {perfetto} (open it at ui.perfetto.dev, or in chrome://tracing)",
              file=sys.stderr)
    print(root)
    if header.records_result_id != result_id:  # a later round's result: its commit's first round captured
        print(f"the traces were captured by result {header.records_result_id} of run "
              f"{header.records_run_uid or header.run_uid}, an earlier round of the same commit (later rounds only "
              "time)",
              file=sys.stderr)
    if not serve:
        print(f"{len(files)} trace(s) laid out for xprof: xprof --logdir {root} --port {port}", file=sys.stderr)
        return EXIT_OK
    print(f"xprof serving {len(files)} trace(s) of result {result_id} at http://127.0.0.1:{port}/, on this host "
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
