"""The demo's own history judged two ways: false time verdicts on its unchanged adjacent commits, and whether the
planted commit is flagged, comparing each pair on the runs both commits were measured in together (KernelWatch,
``service/detect/run_stats.co_measured``) against every run of each commit (the peer: what it did before, which
mixes a confirmation's extra rounds, made minutes later, into one side).

    python bench/demo_aa.py                      # runs `kernelwatch demo --no-serve` first (3-4 minutes here)
    python bench/demo_aa.py --home H --repo R    # judges a demo already made (its KERNELWATCH_HOME, its repository)

Both methods read the same stored runs; the second names every run of each commit by id, which `compare` takes as
given.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from sqlalchemy import select
from sqlalchemy.orm import Session

from service.pipeline.compare import compare_params, compare_resolved, resolve
from service.store.db import make_engine
from service.store.models import Commit, Run

PLANTED = "streaming normaliser"


def make_demo(workdir: Path) -> tuple[Path, Path]:
    home, work = workdir / "home", workdir / "work"
    env = {**os.environ, "KERNELWATCH_HOME": str(home)}
    env.pop("KERNELWATCH_DATABASE_URL", None)
    env.pop("KERNELWATCH_REDIS_URL", None)
    subprocess.run([sys.executable, "-m", "service.cli", "demo", "--no-serve", "--workdir", str(work)], env=env,
                   check=True, stdout=subprocess.DEVNULL)
    return home, work / "kernels-demo"


def judge(home: Path, repo: Path) -> dict[str, list[int]]:
    """Per method: [false verdicts, unchanged comparisons, planted rows flagged, planted rows, pairs narrowed]."""
    log = subprocess.run(["git", "-C", str(repo), "log", "--format=%H %s", "--reverse"], check=True,
                         capture_output=True, text=True).stdout.splitlines()
    commits = [line.split()[0] for line in log]
    planted = next(line.split()[0] for line in log if PLANTED in line)
    engine = make_engine(f"sqlite:///{home / 'kernelwatch.db'}")
    out = {"kernelwatch": [0, 0, 0, 0, 0], "every run": [0, 0, 0, 0, 0]}
    params = compare_params()
    with Session(engine) as session:
        for before, after in zip(commits, commits[1:], strict=False):
            for method, tally in out.items():
                if method == "kernelwatch":
                    base, head = resolve(session, before), resolve(session, after)
                else:
                    base, head = (resolve(session, ",".join(session.scalars(
                        select(Run.run_uid).join(Commit).where(Commit.sha == sha))))
                                  for sha in (before, after))
                outcome = compare_resolved(session, base, head, params, stored=False)
                tally[4] += any("sessions the other side" in note for note in outcome.notes)
                for row in outcome.report.rows:
                    if row.key.metric != "wall_time":
                        continue
                    flagged = row.verdict in ("regression", "improvement")
                    if after == planted:
                        tally[2] += row.key.suite == "softmax" and row.verdict == "regression"
                        tally[3] += row.key.suite == "softmax"
                    else:
                        tally[0] += flagged
                        tally[1] += 1
    engine.dispose()
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", type=Path, help="a demo's KERNELWATCH_HOME (with --repo)")
    parser.add_argument("--repo", type=Path, help="that demo's repository")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kw-demo-aa-") as tmp:
        home, repo = (args.home, args.repo) if args.home and args.repo else make_demo(Path(tmp))
        results = judge(home, repo)
    print(f"{'method':<12} {'false verdicts on unchanged pairs':>34} {'planted softmax rows flagged':>30} "
          f"{'pairs narrowed':>15}")
    for method, (false, unchanged, found, planted, narrowed) in results.items():
        print(f"{method:<12} {f'{false} of {unchanged}':>34} {f'{found} of {planted}':>30} {narrowed:>15}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
