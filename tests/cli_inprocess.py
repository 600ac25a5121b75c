"""`kernelwatch ARGS` run inside the test's process: ``service.cli.main``, the function the console script calls
(the same parser, handlers and exit-status mapping), with a given environment as the whole of ``os.environ``
and standard output and error captured. A CLI process spends about a second importing before it reads its
first argument; the tests of what a command prints and how it exits need none of that, and run hundreds of
commands. What needs a process of its own (a signal, children, a console script on PATH, an import-time
effect) runs one: tests/processes.py ``kernelwatch``."""

from __future__ import annotations

import io
import os
import subprocess
from collections.abc import Mapping, Sequence
from contextlib import redirect_stderr, redirect_stdout


def run_cli(args: Sequence[str], env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    from service.cli import main

    out, err = io.StringIO(), io.StringIO()
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        with redirect_stdout(out), redirect_stderr(err):
            try:
                status = main(list(args))
            except SystemExit as exc:  # argparse's usage errors, as the process would exit
                status = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return subprocess.CompletedProcess(["kernelwatch", *args], status, out.getvalue(), err.getvalue())
