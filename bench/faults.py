"""Robustness under faults: each scenario starts the service's real processes, submits runs over HTTP as a
runner does, injects one fault in the middle and prints, per scenario, runs submitted, stored, duplicated and
lost, whether the fault was visible where it concerns, whether everything recovered with nobody stepping in, and
the wall time. Exit status 1 when any scenario lost or doubled something or did not recover.

    .venv/bin/python bench/faults.py                       # every scenario, 60 s of fault each
    .venv/bin/python bench/faults.py --only disk-full --runs 30 --fault-seconds 10

The scenarios themselves live in tests/faults.py, where the fast sample of each (tests/integration/
test_faults_sample.py) runs the same code smaller. They need the machine's PostgreSQL (127.0.0.1:5432), the
PostgreSQL server binaries and redis-server; disk-full needs root to mount a tmpfs.
"""

from __future__ import annotations

import argparse
import logging
import shutil
import sys
import tempfile
import time
import traceback
from collections.abc import Sequence
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:  # run as a script: the service and tests packages import from the root
    sys.path.insert(0, str(REPO_ROOT))

from tests.faults import SCENARIOS, Outcome, Plan  # noqa: E402

COLUMNS = ("scenario", "submitted", "stored", "duplicates", "lost", "visible", "recovered", "wall s")


def table(outcomes: Sequence[Outcome]) -> str:
    """The results as a fixed-width table, then each scenario's notes."""
    rows = [COLUMNS] + [(o.scenario, str(o.submitted), str(o.stored), str(o.duplicates), str(o.lost),
                         "yes" if o.visible else "no", "yes" if o.recovered else "no", f"{o.wall_s:.1f}")
                        for o in outcomes]
    widths = [max(len(r[i]) for r in rows) for i in range(len(COLUMNS))]
    lines = ["  ".join(cell.ljust(w) if i == 0 else cell.rjust(w)
                       for i, (cell, w) in enumerate(zip(row, widths, strict=True))) for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    notes = [f"  {o.scenario}: {note}" for o in outcomes for note in o.notes]
    return "\n".join(lines + (["", "notes:", *notes] if notes else []))


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", action="append", choices=sorted(SCENARIOS),
                        help="run this scenario only (repeatable); default: all")
    parser.add_argument("--runs", type=int, default=30, help="runs (alerts, for Slack) submitted per scenario")
    parser.add_argument("--fault-seconds", type=float, default=60.0, help="how long each fault lasts")
    parser.add_argument("--runner-runs", type=int, default=3,
                        help="runs queued in kill-runner-mid-suite (each is a real suite: a few seconds apiece)")
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory (process logs)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.runs < 1 or args.fault_seconds < 0:
        print("--runs must be at least 1 and --fault-seconds not negative", file=sys.stderr)
        return 2
    # The uploader and the notifier warn at each retry; the table says what the retries came to.
    for noisy in ("runners.uploader", "service.pipeline.notify", "service.integrations.github"):
        logging.getLogger(noisy).propagate = False
        logging.getLogger(noisy).addHandler(logging.NullHandler())
    workdir = Path(tempfile.mkdtemp(prefix="kw-faults-"))
    outcomes = []
    try:
        for name in args.only or list(SCENARIOS):
            runs = args.runner_runs if name == "kill-runner-mid-suite" else args.runs
            plan = Plan(runs=runs, fault_s=args.fault_seconds, workdir=workdir)
            print(f"{name}: {runs} runs, {args.fault_seconds:g} s of fault...", flush=True)
            started = time.monotonic()
            try:
                outcome = SCENARIOS[name](plan)
            except Exception as exc:  # noqa: BLE001 - one scenario that breaks is a finding, not the end
                traceback.print_exc()
                outcome = Outcome(name, wall_s=time.monotonic() - started,
                                  notes=[f"the scenario itself failed: {type(exc).__name__}: {str(exc)[:300]}"])
            outcomes.append(outcome)
            print(table([outcome]).splitlines()[2], flush=True)
    finally:
        if args.keep:
            print(f"logs under {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    print()
    print(table(outcomes))
    return 0 if all(o.lost == 0 and o.duplicates == 0 and o.recovered for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
