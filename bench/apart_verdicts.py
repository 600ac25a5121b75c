"""Verdicts on commits measured apart: each commit a session of its own, as a range run makes them.

`kernelwatch run --commits A..B --rounds 2` measures one commit at a time, its rounds back to back: each commit is
a session of its own, and two commits compared afterwards share no session. This measures how often a comparison
of two such commits is wrong, on real runs of bench/verdict_calibration.py's scratch repository (a chain of
matmul-and-tanh steps; a base, three README-only commits, and +5/+10/+20/+50 % more steps), each commit measured
in ``--passes`` range runs (one session per commit per pass, ``--rounds`` runs in each).

Every A/A pair (the same kernel code: six pairs of the four same-code commits) and every planted pair (base against
each slowdown) is drawn at each budget (1 or 2 sessions a side, every combination of passes) and judged by:

- **sessions** (KernelWatch, service/detect/run_stats.py ``session_units``): a side's runs of one session taken
  together as one replicate, judged against the spread between sessions of one commit, unless the history shows
  a commit's sessions landing no farther apart than their runs explain (``sessions_add_spread``): then as runs;
- **runs** (the peer: what `compare` did before, 2026-12-06): every run a replicate, judged against the spread
  between runs of one commit as the history holds them;
- **pooled** (benchstat's Mann-Whitney on every sample of a side, for the record).

Two histories, the runs of the *other* commits (never the compared ones), as the service would read them:

- **one range run**: every other commit measured once, in the pass the base was drawn from (a history of range
  runs: one session per commit, its runs back to back), so the spread between sessions is unknown;
- **re-measured**: every other commit measured in every pass (re-runs, confirmations), so it is known.

It prints each method's false-verdict rate on A/A (a regression or improvement called on the same code) beside its
power (a regression called) at each planted effect. Target: A/A false verdicts at most alpha (5 %).

    python bench/apart_verdicts.py               # 4 passes of 2 rounds over 8 commits: about 5 minutes here
    python bench/apart_verdicts.py --save F      # keep the measured sessions; --load F judges them again
    python bench/apart_verdicts.py --generate 0.10 0.01   # sessions 10 % apart whose runs agree within 1 %
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.verdict_calibration import ALPHA, MIN_EFFECT, TIMES, make_repository, pooled_verdict  # noqa: E402
from runners.local import RunRequest, run_commits  # noqa: E402
from service.detect.compare import BenchmarkKey, CompareParams, Pair, Side, compare  # noqa: E402
from service.detect.run_stats import RunNoise, pooled_noise, sessions_add_spread, with_samples  # noqa: E402

Sessions = list[list[list[float]]]  # a commit's sessions, each its runs, each its samples
METHODS = ("sessions", "runs", "pooled")
HISTORIES = ("one range run", "re-measured")
BUDGETS = (1, 2)


def measure(workdir: Path, commits: list[tuple[str, str, float]], passes: int, rounds: int,
            samples: int) -> dict[tuple[str, str], Sessions]:
    """Per (commit sha, benchmark label), its sessions: ``passes`` range runs over the commits, oldest first, each
    commit's ``rounds`` runs back to back in a session of its own."""
    out: dict[tuple[str, str], Sessions] = {}
    started = time.perf_counter()
    for p in range(passes):
        for sha, label, _ in commits:
            request = RunRequest(repo=workdir / "calib", rev=sha, samples=samples, warmup=3)
            [manifests] = run_commits([request], workdir / "worktrees", rounds=rounds)
            runs: dict[str, list[list[float]]] = {}
            for manifest in manifests:
                for r in manifest["results"]:
                    if r["metric"] in TIMES and r["status"] == "ok":
                        name = f"{r['name']} n={r['params']['n']}{TIMES[r['metric']]}"
                        runs.setdefault(name, []).append([float(v) for v in r["samples"]])
            for name, session in runs.items():
                out.setdefault((sha, name), []).append(session)
            print(f"  pass {p + 1}/{passes}: {label} ({time.perf_counter() - started:.0f} s)", file=sys.stderr)
    return out


def generate(between: float, within: float, passes: int, rounds: int, samples: int, seed: int = 0
             ) -> tuple[list[tuple[str, str, float]], dict[tuple[str, str], Sessions]]:
    """What a host of known spreads would give: each session's log centre moves by ``between`` (normal), each
    run's by ``within`` around it, each log sample by 0.01; the planted effects exact."""
    rng = np.random.default_rng(seed)
    commits = [("base", "base", 0.0)] + [(f"aa{i}", f"A/A {i}", 0.0) for i in (1, 2, 3)]
    commits += [(f"plus{e:g}", f"+{e:.0%}", e) for e in (0.05, 0.10, 0.20, 0.50)]
    measured: dict[tuple[str, str], Sessions] = {}
    for label, level in (("chain_steps n=128", 2e-3), ("chain_steps n=256", 9e-3)):
        for sha, _, effect in commits:
            centre = math.log(level * (1 + effect))
            measured[(sha, label)] = [
                [np.exp(session + within * rng.standard_normal() + 0.01 * rng.standard_normal(samples)).tolist()
                 for _ in range(rounds)]
                for session in (centre + between * rng.standard_normal() for _ in range(passes))]
    return commits, measured


def _units(sessions: Sessions, by_session: bool) -> list[list[float]]:
    """The replicates of these sessions: each session's samples in one, or each run."""
    return [[v for run in s for v in run] for s in sessions] if by_session else [run for s in sessions for run in s]


def history_noise(others: list[Sessions], by_session: bool) -> RunNoise | None:
    """What the service reads from the other commits (service/store/run_noise.py): per commit with two units or
    more, the spread of their log medians around the commit's own, with the samples where the runs could be
    quiet."""
    groups = [units for units in (_units(c, by_session) for c in others) if len(units) >= 2]
    noise = pooled_noise([[math.log(float(np.median(u))) for u in units] for units in groups])
    return with_samples(noise, groups) if noise is not None else None


def verdict(method: str, base: Sessions, head: Sessions, others: list[Sessions]) -> str:
    if method == "pooled":
        return pooled_verdict(_units(base, False), _units(head, False))
    # KernelWatch's: sessions as the replicates unless the history shows them agreeing as their runs do
    by_session = method == "sessions" and sessions_add_spread(
        [[[math.log(float(np.median(run))) for run in s] for s in c] for c in others])
    pair = Pair(BenchmarkKey("calib", "chain"), Side.of_runs(_units(base, by_session)),
                Side.of_runs(_units(head, by_session)), history_noise(others, by_session))
    return compare([pair], CompareParams(alpha=ALPHA, min_effect=MIN_EFFECT)).rows[0].verdict


def judge(commits: list[tuple[str, str, float]], measured: dict[tuple[str, str], Sessions]
          ) -> dict[tuple[str, str, int, str], list[str]]:
    """Per (method, history, budget, comparison: "A/A" or the planted effect), every draw's verdict."""
    labels = sorted({label for _, label in measured})
    same = [sha for sha, _, effect in commits if effect == 0.0]
    pairs = [(a, b, "A/A") for a, b in itertools.combinations(same, 2)]
    pairs += [(commits[0][0], sha, f"+{effect:.0%}") for sha, _, effect in commits if effect > 0]
    out: dict[tuple[str, str, int, str], list[str]] = {}
    for label in labels:
        passes = min(len(measured[(sha, label)]) for sha, _, _ in commits)
        for (base_sha, head_sha, kind), budget in itertools.product(pairs, BUDGETS):
            others_all = [measured[(sha, label)][:passes] for sha, _, _ in commits if sha not in (base_sha, head_sha)]
            for chosen_base, chosen_head in itertools.product(itertools.combinations(range(passes), budget),
                                                              repeat=2):
                base = [measured[(base_sha, label)][i] for i in chosen_base]
                head = [measured[(head_sha, label)][i] for i in chosen_head]
                histories = {"one range run": [[c[chosen_base[0]]] for c in others_all],
                             "re-measured": others_all}
                for method, (name, others) in itertools.product(METHODS, histories.items()):
                    if method == "pooled" and name != HISTORIES[0]:
                        continue  # the pooled test reads no history
                    out.setdefault((method, name, budget, kind), []).append(verdict(method, base, head, others))
    return out


def report(verdicts: dict[tuple[str, str, int, str], list[str]], commits: list[tuple[str, str, float]]) -> bool:
    kinds = ["A/A"] + [f"+{effect:.0%}" for _, _, effect in commits if effect > 0]
    print(f"\n{'method':<9} {'history':<14} {'sessions a side':>15}  {'A/A false':>10}  "
          + "  ".join(f"{'power ' + k:>11}" for k in kinds[1:]) + "  (draws: A/A, each effect)")
    met = True
    for method, history, budget in itertools.product(METHODS, HISTORIES, BUDGETS):
        if (method, history, budget, "A/A") not in verdicts:
            continue
        aa = verdicts[(method, history, budget, "A/A")]
        false = sum(v in ("regression", "improvement") for v in aa) / len(aa)
        powers = [verdicts[(method, history, budget, k)] for k in kinds[1:]]
        cells = "  ".join(f"{sum(v == 'regression' for v in p) / len(p):>11.0%}" for p in powers)
        print(f"{method:<9} {history:<14} {budget:>15}  {false:>10.1%}  {cells}  ({len(aa)}, {len(powers[0])})")
        if method == "sessions" and false > ALPHA:
            met = False
    print(f"\ntarget, KernelWatch's (sessions) A/A false verdicts <= {ALPHA:.0%} in every row: "
          f"{'met' if met else 'MISSED'}")
    return met


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--passes", type=int, default=4, help="range runs over the commits (default 4)")
    parser.add_argument("--rounds", type=int, default=2, help="runs per commit in each pass (default 2)")
    parser.add_argument("--samples", type=int, default=10)
    parser.add_argument("--save", type=Path, default=None)
    parser.add_argument("--load", type=Path, default=None)
    parser.add_argument("--generate", type=float, nargs=2, metavar=("BETWEEN", "WITHIN"), default=None,
                        help="judge generated sessions instead: log spread between sessions, and between the runs of "
                             "one session")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    if args.generate is not None:
        between, within = args.generate
        commits, measured = generate(between, within, args.passes, args.rounds, args.samples)
    elif args.load is not None:
        data = json.loads(args.load.read_text())
        commits = [(sha, label, float(effect)) for sha, label, effect in data["commits"]]
        measured = {(r["sha"], r["label"]): r["sessions"] for r in data["runs"]}
    else:
        with tempfile.TemporaryDirectory(prefix="kw-apart-") as tmp:
            workdir = Path(tmp)
            commits = make_repository(workdir)
            measured = measure(workdir, commits, args.passes, args.rounds, args.samples)
        if args.save is not None:
            args.save.write_text(json.dumps({"commits": commits, "runs": [
                {"sha": sha, "label": label, "sessions": s} for (sha, label), s in measured.items()]}))
    first = sorted({name for _, name in measured})[0]
    print(f"what was measured, {first}: each session's runs' medians (ms), pass by pass")
    for sha, label, _ in commits:
        spans = [[float(np.median(run)) * 1e3 for run in s] for s in measured[(sha, first)]]
        print(f"  {label:<6} " + "  ".join("/".join(f"{m:.3f}" for m in s) for s in spans))
    met = report(judge(commits, measured), commits)
    print(f"\n{sum(len(s) for s in measured.values())} sessions of {args.rounds} runs judged, "
          f"{time.perf_counter() - started:.0f} s in all")
    return 0 if met else 1


if __name__ == "__main__":
    raise SystemExit(main())
