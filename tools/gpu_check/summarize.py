"""Summarize a device check: the manifests a `kernelwatch run --output DIR` wrote, and the embedded SQLite store.

python3 tools/gpu_check/summarize.py MANIFEST_DIR [KERNELWATCH_HOME]      (standard library only)

Per benchmark: status, median wall time, median device time (the trace's), their ratio, compile time, the
artifact kinds captured; the run's environment and host_health (NVML clocks); then the store's parse outcome
(artifacts by kind, parse errors, kernel_code by ISA, op_stat rows).
"""

from __future__ import annotations

import json
import sqlite3
import statistics
import sys
from collections import Counter, defaultdict
from pathlib import Path


def fmt(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return f"{seconds * 1e6:10.1f}us"


def manifests(directory: Path) -> None:
    files = sorted(directory.glob("*.json")) if directory.is_dir() else []
    print(f"# {len(files)} manifest(s) in {directory}")
    for path in files:
        m = json.loads(path.read_text())
        env = m.get("environment", {})
        print(f"\n## {path.name}: status={m.get('status')} backend={env.get('backend')} "
              f"device_kind={env.get('device_kind')} x{env.get('device_count')} jax={env.get('jax_version')} "
              f"platform_version={env.get('platform_version')!r}")
        print(f"   started {m.get('started_at')} finished {m.get('finished_at')}")
        print(f"   host_health: {json.dumps(m.get('host_health'))}")
        print(f"   xla_flags: {env.get('xla_flags')!r}")
        by_key: dict[tuple, dict[str, dict]] = defaultdict(dict)
        for r in m.get("results", []):
            key = (r["suite"], r["name"], json.dumps(r.get("params", {}), sort_keys=True))
            by_key[key][r["metric"]] = r
        print(f"   {'benchmark':70s} {'status':6s} {'wall_med':>12s} {'device_med':>12s} {'dev/wall':>8s} "
              f"{'compile':>8s}  artifacts")
        for key, metrics in by_key.items():
            wall = metrics.get("wall_time", {})
            dev = metrics.get("device_time") or metrics.get("execution_time") or {}
            wm = statistics.median(wall["samples"]) if wall.get("samples") else None
            dm = statistics.median(dev["samples"]) if dev.get("samples") else None
            ratio = f"{dm / wm:8.3f}" if wm and dm else f"{'-':>8s}"
            kinds = Counter(a.get("kind") for a in wall.get("artifacts") or [])
            comp = wall.get("compile_time_s")
            name = f"{key[0]}/{key[1]}{key[2]}"[:70]
            print(f"   {name:70s} {wall.get('status', '?'):6s} {fmt(wm):>12s} {fmt(dm):>12s} {ratio} "
                  f"{(f'{comp:.2f}s' if comp is not None else '-'):>8s}  {dict(kinds)}")
            if wall.get("status") != "ok" and wall.get("message"):
                print(f"      message: {wall['message'][:600]!r}")
            others = sorted(set(metrics) - {"wall_time", "device_time", "execution_time"})
            if others:
                print(f"      other metrics: {others}")


def store(home: Path) -> None:
    db = home / "kernelwatch.db"
    print(f"\n# store {db} ({db.stat().st_size if db.exists() else 0} bytes)")
    if not db.exists():
        return
    con = sqlite3.connect(db)
    q = con.execute
    try:
        print("runs:", q("select id, status from run").fetchall())
        print("results by metric/status:",
              q("select s.metric, r.status, count(*) from result r join series s on s.id = r.series_id "
                "group by s.metric, r.status").fetchall())
        print("roofline (benchmark, metric, median s, fraction, bound, peak source):")
        for row in q("select b.suite || '/' || b.name || ' ' || b.params_key, s.metric, r.median, "
                     "r.roofline_fraction, r.roofline_bound, r.roofline_peak_source from result r "
                     "join series s on s.id = r.series_id join benchmark b on b.id = s.benchmark_id "
                     "where s.metric in ('wall_time', 'device_time') order by b.suite, b.name limit 40"):
            print("   ", row)
        print("artifacts by kind (n, parsed, with parse_error):",
              q("select kind, count(*), sum(parsed_version is not null), sum(parse_error is not null) "
                "from artifact group by kind").fetchall())
        for kind, err in q("select kind, parse_error from artifact where parse_error is not null limit 8"):
            print(f"   parse_error [{kind}]: {err[:500]!r}")
        print("kernel_code by isa:", q("select isa, count(*), sum(instructions) from kernel_code group by isa")
              .fetchall())
        print("kernel_code sample:", q("select name, isa, instructions, mix from kernel_code limit 5").fetchall())
        print("op_stat rows:", q("select count(*) from op_stat").fetchone(),
              "sample:", q("select module, op, category, occurrences, total_ns from op_stat "
                           "order by total_ns desc limit 8").fetchall())
        print("hlo_module rows:", q("select count(*) from hlo_module").fetchone())
        cols = [r[1] for r in q("pragma table_info(run)")]
        if "host_health" in cols:
            print("run.host_health:", q("select id, host_health from run").fetchall())
    except sqlite3.Error as exc:
        print("store query failed:", exc)


if __name__ == "__main__":
    manifests(Path(sys.argv[1]))
    if len(sys.argv) > 2:
        store(Path(sys.argv[2]))
