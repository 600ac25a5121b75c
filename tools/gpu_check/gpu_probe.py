"""Standalone probe of what KernelWatch's GPU capture path depends on, independent of the runner/child plumbing.

python3 tools/gpu_check/gpu_probe.py WORKDIR

For a few kernels: compile, wall-time samples (block_until_ready), then a jax.profiler.trace pass whose xplane is
kept and read three ways: a raw listing of planes/lines (what a real GPU trace holds), KernelWatch's own
xplane_to_executions (device time per call) and xplane_to_op_stats. Then the XLA dump: which files a GPU compile
writes, each PTX's .version/.target, ptxas with -arch=sm_XX (what runners/ptx_to_sass.py passes) and sm_XXa, and
KernelWatch's sass_from_ptx + SASS parser on one of them. Writes WORKDIR/probe_summary.json; prints as it goes.
Every part is guarded: a failure is recorded, the rest still runs.
"""

from __future__ import annotations

import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

WORK = Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/kwwork/probe")
WORK.mkdir(parents=True, exist_ok=True)
DUMP = WORK / "dump"
os.environ["XLA_FLAGS"] = " ".join([os.environ.get("XLA_FLAGS", ""), f"--xla_dump_to={DUMP}",
                                    "--xla_dump_hlo_as_text", "--xla_dump_emitter_re=ptx"]).strip()
SUMMARY: dict = {"errors": []}


def save() -> None:
    (WORK / "probe_summary.json").write_text(json.dumps(SUMMARY, indent=1, default=str))


def guard(label: str):
    def wrap(fn):
        def run(*a, **k):
            t0 = time.perf_counter()
            try:
                return fn(*a, **k)
            except BaseException as exc:  # noqa: BLE001 - a probe records everything
                text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[-3000:]
                print(f"PROBE {label} FAILED: {text}", flush=True)
                SUMMARY["errors"].append({"step": label, "error": text})
                return None
            finally:
                print(f"PROBE {label}: {time.perf_counter() - t0:.1f}s", flush=True)
                save()
        return run
    return wrap


sys.path.insert(0, os.getcwd())  # the repository root: runners/, kernelwatch/

import jax  # noqa: E402
import jax.extend  # noqa: E402,F401
import jax.numpy as jnp  # noqa: E402


@guard("environment")
def environment() -> None:
    devices = jax.devices()
    d = devices[0]
    SUMMARY["environment"] = {
        "jax": jax.__version__, "backend": jax.default_backend(), "devices": [str(x) for x in devices],
        "device_kind": d.device_kind, "platform": d.platform,
        "compute_capability": getattr(d, "compute_capability", None),
        "platform_version": str(getattr(jax.extend.backend.get_backend(), "platform_version", "")),
    }
    print("PROBE environment:", json.dumps(SUMMARY["environment"]), flush=True)
    try:
        SUMMARY["memory_stats"] = {k: v for k, v in (d.memory_stats() or {}).items()
                                   if k in ("bytes_limit", "bytes_in_use", "peak_bytes_in_use")}
    except Exception as exc:  # noqa: BLE001
        SUMMARY["memory_stats"] = repr(exc)


def list_planes(profile) -> list[dict]:
    out = []
    for plane in profile.planes:
        lines = []
        for line in plane.lines:
            events = list(line.events)
            first = events[0] if events else None
            stats = {}
            if first is not None:
                try:
                    stats = {k: (str(v)[:80]) for k, v in dict(first.stats).items()}
                except Exception as exc:  # noqa: BLE001
                    stats = {"<error>": repr(exc)}
            lines.append({"line": line.name, "events": len(events),
                          "first_names": [str(e.name)[:100] for e in events[:4]],
                          "first_stats": stats})
        out.append({"plane": plane.name, "lines": lines[:40], "n_lines": len(lines)})
    return out


def case(name: str):
    key = jax.random.key(0)
    if name == "matmul_bf16_4096":
        a = jax.random.normal(key, (4096, 4096), jnp.bfloat16)
        b = jax.random.normal(jax.random.key(1), (4096, 4096), jnp.bfloat16)
        return (lambda x, y: x @ y), (a, b), 2 * 4096**3
    if name == "matmul_f32_512":
        a = jax.random.normal(key, (512, 512), jnp.float32)
        b = jax.random.normal(jax.random.key(1), (512, 512), jnp.float32)
        return (lambda x, y: x @ y), (a, b), 2 * 512**3
    if name == "softmax_8192x8192":
        x = jax.random.normal(key, (8192, 8192), jnp.float32)
        return (lambda v: jax.nn.softmax(v, axis=-1)), (x,), None
    raise KeyError(name)


@guard("kernels")
def kernels() -> None:
    from jax.profiler import ProfileData

    from runners.parsers.xplane_to_execution_times import per_call, xplane_to_executions
    from runners.parsers.xplane_to_op_stats import xplane_to_op_stats

    SUMMARY["kernels"] = {}
    for name in ("matmul_bf16_4096", "softmax_8192x8192", "matmul_f32_512"):
        rec: dict = {}
        SUMMARY["kernels"][name] = rec
        try:
            fn, args, flops = case(name)
            t0 = time.perf_counter()
            compiled = jax.jit(fn).lower(*args).compile()
            rec["compile_s"] = round(time.perf_counter() - t0, 3)
            for _ in range(3):
                jax.block_until_ready(compiled(*args))
            wall = []
            for _ in range(30):
                t0 = time.perf_counter_ns()
                jax.block_until_ready(compiled(*args))
                wall.append((time.perf_counter_ns() - t0) / 1e9)
            rec["wall_median_s"] = statistics.median(wall)
            rec["wall_min_s"] = min(wall)
            calls = 30
            with tempfile.TemporaryDirectory(prefix="kw-probe-trace-") as directory:
                t0 = time.perf_counter()
                with jax.profiler.trace(directory):
                    for _ in range(calls):
                        jax.block_until_ready(compiled(*args))
                rec["trace_pass_s"] = round(time.perf_counter() - t0, 3)
                paths = sorted(glob.glob(f"{directory}/plugins/profile/*/*.xplane.pb"))
                rec["xplane_files"] = [os.path.basename(p) for p in paths]
                raw = Path(paths[0]).read_bytes()
            (WORK / f"{name}.xplane.pb").write_bytes(raw)
            rec["xplane_bytes"] = len(raw)
            profile = ProfileData.from_serialized_xspace(raw)
            rec["planes"] = list_planes(profile)
            try:
                ex = xplane_to_executions(profile)
                rec["kw_source"] = ex.source
                rec["kw_executions"] = len(ex.seconds)
                folded = per_call(ex.seconds, calls)
                rec["kw_device_median_s"] = statistics.median(folded)
                rec["device_over_wall"] = rec["kw_device_median_s"] / rec["wall_median_s"]
                if flops:
                    rec["tflops_device"] = flops / rec["kw_device_median_s"] / 1e12
                    rec["tflops_wall"] = flops / rec["wall_median_s"] / 1e12
            except Exception as exc:  # noqa: BLE001
                rec["kw_executions_error"] = "".join(traceback.format_exception_only(type(exc), exc)).strip()
            try:
                stats = xplane_to_op_stats(profile)
                rec["kw_op_stats"] = [{"module": s.module, "op": s.op, "n": s.occurrences, "total_ns": s.total_ns,
                                       "category": s.category} for s in stats][:20]
            except Exception as exc:  # noqa: BLE001
                rec["kw_op_stats_error"] = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        except Exception as exc:  # noqa: BLE001
            rec["error"] = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))[-2000:]
        brief = {k: v for k, v in rec.items() if k not in ("planes", "kw_op_stats")}
        print(f"PROBE kernel {name}: {json.dumps(brief, default=str)}", flush=True)
        for p in rec.get("planes", []):
            print(f"   plane {p['plane']!r}: " + ", ".join(f"{ln['line']!r}({ln['events']})" for ln in p["lines"]),
                  flush=True)
        save()


def run(argv: list[str], timeout: float = 120) -> dict:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
        return {"argv": argv, "rc": proc.returncode, "stdout_head": proc.stdout[:1500],
                "stderr": proc.stderr[-1500:]}
    except Exception as exc:  # noqa: BLE001
        return {"argv": argv, "error": repr(exc)}


@guard("dump_and_sass")
def dump_and_sass() -> None:
    from runners.parsers.by_kind import parse
    from runners.ptx_to_sass import find_tools, sass_from_ptx, sm_arch

    files = sorted(p for p in DUMP.rglob("*") if p.is_file()) if DUMP.is_dir() else []
    SUMMARY["dump_file_count"] = len(files)
    suffixes: dict[str, int] = {}
    for p in files:
        suffix = p.name.split(".")[-1]
        suffixes[suffix] = suffixes.get(suffix, 0) + 1
    SUMMARY["dump_suffixes"] = suffixes
    SUMMARY["dump_names_sample"] = [p.name for p in files][:60]
    ptx = [p for p in files if p.name.endswith(".ptx")]
    SUMMARY["ptx_files"] = [p.name for p in ptx][:30]
    print(f"PROBE dump: {len(files)} files, by suffix {suffixes}; {len(ptx)} .ptx", flush=True)
    tools = find_tools()
    SUMMARY["find_tools"] = str(tools)
    cc = getattr(jax.devices()[0], "compute_capability", None)
    arch = sm_arch(str(cc)) if cc else None
    SUMMARY["sm_arch"] = arch
    print(f"PROBE find_tools={tools} arch={arch}", flush=True)
    if not ptx:
        return
    from runners.capture import dump_kind

    kinds: dict[str, int] = {}
    for p in files:
        k = str(dump_kind(p.name))
        kinds[k] = kinds.get(k, 0) + 1
    SUMMARY["dump_kinds_as_capture_sees_them"] = kinds
    print(f"PROBE runners.capture.dump_kind over the dump: {kinds}", flush=True)
    # The largest PTX module: the one most likely to hold a real generated kernel (a GEMM may be a cuBLAS call).
    pick = max(ptx, key=lambda p: p.stat().st_size)
    text = pick.read_text(errors="replace")
    head = [ln for ln in text.splitlines()[:60] if ln.startswith((".version", ".target", ".address_size"))]
    SUMMARY["ptx_pick"] = {"name": pick.name, "bytes": len(text), "header": head,
                           "wgmma": text.count("wgmma"), "mma": text.count("mma.sync"), "entries": text.count(".entry")}
    targets: dict[str, int] = {}
    for p in ptx:
        for ln in p.read_text(errors="replace").splitlines()[:60]:
            if ln.startswith(".target"):
                targets[ln.strip()] = targets.get(ln.strip(), 0) + 1
    SUMMARY["ptx_targets"] = targets
    print(f"PROBE ptx pick {pick.name}: {SUMMARY['ptx_pick']}; targets over all: {targets}", flush=True)
    if tools is None:
        return
    trials: dict = {}
    for p in sorted(ptx, key=lambda p: -p.stat().st_size)[:6]:
        for a in sorted(x for x in {arch, (arch + "a") if arch else None} if x is not None):
            cubin = WORK / f"probe_{a}.cubin"
            r = run([str(tools.ptxas), f"-arch={a}", str(p), "-o", str(cubin)])
            if p == pick and r.get("rc") == 0:
                r["lister"] = run([str(tools.lister), *tools.lister_args, str(cubin)])
                r["lister"]["stdout_head"] = r["lister"].get("stdout_head", "")[:600]
            trials[f"{p.name} -arch={a}"] = r
            print(f"PROBE ptxas -arch={a} {p.name}: rc={r.get('rc')} {r.get('stderr', r.get('error', ''))[:300]!r}",
                  flush=True)
    SUMMARY["ptxas_trials"] = trials
    SUMMARY["kw_sass"] = {}
    for a in [arch or "sm_90", (arch or "sm_90") + "a"]:
        try:
            listing = sass_from_ptx(pick.read_bytes(), a, tools)
            (WORK / f"probe_pick.{a}.sass").write_text(listing)
            if not (WORK / "probe_pick.sass").exists():
                (WORK / "probe_pick.sass").write_text(listing)
            parsed = parse("sass", listing.encode(), pick.name + ".sass")
            SUMMARY["kw_sass"][a] = [{k: v for k, v in kern.items() if k != "disassembly"}
                                     for kern in parsed["kernels"]][:10]
            print(f"PROBE kw sass_from_ptx({a}) + sass parser: {len(parsed['kernels'])} kernels", flush=True)
        except Exception as exc:  # noqa: BLE001
            SUMMARY["kw_sass"][a] = "".join(traceback.format_exception_only(type(exc), exc)).strip()[:1500]
            print(f"PROBE kw sass_from_ptx({a}) FAILED: {SUMMARY['kw_sass'][a]}", flush=True)


@guard("nvml")
def nvml() -> None:
    from runners.host_health import nvml_reader

    reader = nvml_reader()
    SUMMARY["nvml"] = [g.__dict__ for g in reader()] if reader else None
    print(f"PROBE nvml: {SUMMARY['nvml']}", flush=True)


if __name__ == "__main__":
    environment()
    kernels()
    nvml()
    dump_and_sass()
    save()
    print("PROBE done", flush=True)
