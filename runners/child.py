"""Entry point of the child process that runs a suite: ``python -m runners.child --root DIR --out FILE``.

It writes JSON lines to FILE as it goes: first the environment, then one line per measurement, flushed each
time, so a kernel that takes the process down still leaves every earlier result behind for the parent.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

from runners.fingerprint import environment_info
from runners.harness import TimingPlan, measure
from runners.suite import discover, parse_param_filter, select


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="runners.child")
    parser.add_argument("--root", type=Path, required=True, help="checkout holding kernels_under_test/")
    parser.add_argument("--out", type=Path, required=True, help="JSON-lines file to write")
    parser.add_argument("--samples", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--suite", default="*", help="glob over suite/name, e.g. 'softmax/*'")
    parser.add_argument("--params", default="", help="NAME=VALUE[,NAME=VALUE]")
    parser.add_argument("--dirty", action="store_true", help="the checkout had uncommitted changes")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    plan = TimingPlan(samples=args.samples, warmup=args.warmup)
    specs = discover(args.root.resolve())
    instances = list(select(specs, args.suite, parse_param_filter(args.params)))
    with args.out.open("w") as out:
        out.write(json.dumps({"environment": environment_info(dirty=args.dirty), "planned": len(instances)}) + "\n")
        out.flush()
        for instance in instances:
            out.write(json.dumps({"measurement": dataclasses.asdict(measure(instance, plan))}) + "\n")
            out.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
