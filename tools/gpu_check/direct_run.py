"""Fallback when `kernelwatch run` cannot (no git on the host, a failure before any benchmark): the runner's own
pieces driven directly. runners.local.SuiteRunner (child process, sandbox, capture, host_health) over a plain
directory holding kernels_under_test/, then build_manifest, written as JSON for `kernelwatch ingest`.

python3 tools/gpu_check/direct_run.py ROOT OUTDIR CAPTURE_DIR [SUITE] [SAMPLES]
"""

from __future__ import annotations

import json
import sys
import uuid
from datetime import UTC, datetime
from pathlib import Path

from runners.local import RunRequest, SuiteRunner, build_manifest, interleave


def main() -> int:
    root, outdir, capture = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
    suite = sys.argv[4] if len(sys.argv) > 4 else "*"
    samples = int(sys.argv[5]) if len(sys.argv) > 5 else 10
    outdir.mkdir(parents=True, exist_ok=True)
    capture.mkdir(parents=True, exist_ok=True)
    request = RunRequest(repo=root, rev="HEAD", samples=samples, suite=suite, quick=True, trigger="manual",
                         capture_dir=capture)
    runner = SuiteRunner(root, request, dirty=True)
    try:
        interleave([runner], lambda done, total, key: print(f"  [{done}/{total}] {key}", file=sys.stderr,
                                                            flush=True))
    finally:
        runner.close()
    commit = {"sha": "d" * 40, "parents": [], "author": "device check <kw@localhost>",
              "authored_at": datetime.now(UTC).isoformat(), "subject": "device check (direct)", "position": 0}
    repository = {"name": "device-check", "url": root.resolve().as_uri(), "default_branch": "main"}
    run_id = uuid.uuid4().hex
    for group, run in sorted(runner.runs.items()):
        rid = run_id if group == 0 else f"{run_id}-d{group}"
        doc = build_manifest(request, run, commit, repository, "main", rid)
        path = outdir / f"direct-{rid}.json"
        path.write_text(json.dumps(doc, indent=2))
        wall = [r for r in doc["results"] if r["metric"] == "wall_time"]
        print(f"wrote {path}: {sum(r['status'] == 'ok' for r in wall)} ok of {len(wall)} ({doc['status']})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
