"""What `run` and `ci` share: the options that say how each benchmark is measured and in what interpreter, and
where the benchmarks are (the options, else the repository's project file)."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

from kernelwatch.errors import InvalidInput
from service.settings import Settings


def environment_options(parser: argparse.ArgumentParser) -> None:
    """What interpreter runs the benchmarks (README: Your repository); either overrides the project file's."""
    chosen = parser.add_mutually_exclusive_group()
    chosen.add_argument("--environment", choices=("runner", "commit"), default=None,
                        help="commit: each commit's benchmarks run in an environment built from that commit's own "
                             "uv.lock, requirements.txt or [project] dependencies (with uv, cached by what it was "
                             "built from); runner: KernelWatch's own interpreter (default, unless the project file "
                             "says otherwise)")
    chosen.add_argument("--python", type=Path, default=None, metavar="PATH",
                        help="run the benchmarks in this interpreter (the project's dependencies installed in it)")


def noise_options(parser: argparse.ArgumentParser) -> None:
    """CPU noise reduction a user can turn on (README: what each costs); each is part of the environment, so
    runs with it compare only with runs with it."""
    from runners.pinning import parse_cpu_list

    parser.add_argument("--cpu-affinity", type=parse_cpu_list, default=None, metavar="CPUS",
                        help="pin each benchmark process to these CPUs (2-3, 0,2) before JAX starts")
    parser.add_argument("--xla-single-thread", action="store_true",
                        help="hold XLA's CPU thread pool to one thread (PJRT_NPROC=1)")
    parser.add_argument("--keep-pages", action="store_true",
                        help="have glibc keep the pages it frees, so that an output of 32-64 MiB is not faulted in "
                             "afresh on every call (MALLOC_MMAP_THRESHOLD_, MALLOC_TRIM_THRESHOLD_)")


def repository_name_type(text: str) -> str:
    """``--repository-name``: a name the store can keep (the manifest's pattern), refused at the command line."""
    from runners.project_file import name_problem

    if (problem := name_problem(text)) is not None:
        raise argparse.ArgumentTypeError(problem)
    return text


def naming_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--repository-name", type=repository_name_type, default=None, metavar="NAME",
                        help="the name its runs are stored under (default: the project file's name, else the "
                             "repository's folder name); for a project whose folder name another project in the "
                             "store has")


@dataclass(frozen=True)
class Measuring:
    """How each benchmark of a `run` or `ci` is measured, as the command line gave it."""

    samples: int
    warmup: int
    suite: str
    params: str
    quick: bool
    capture: bool  # HLO, analyses, compiler dumps and traces beside the times (not --no-capture)
    cpu_isa: str | None
    cpu_affinity: tuple[int, ...] | None
    xla_single_thread: bool
    keep_pages: bool
    trigger: str
    benchmarks: Path | None  # --benchmarks DIR or REV:DIR; None: the project file's, else kernels_under_test/
    environment: str | None  # --environment; None: the project file's, else runner
    python: Path | None  # --python
    repository_name: str | None  # --repository-name; None: the project file's, else the folder's


def measuring(args: argparse.Namespace) -> Measuring:
    """The options `run` and `ci` share, out of either's parsed command line (for their adapters)."""
    return Measuring(samples=args.samples, warmup=args.warmup, suite=args.suite, params=args.params,
                     quick=args.quick, capture=not args.no_capture, cpu_isa=args.cpu_isa,
                     cpu_affinity=args.cpu_affinity, xla_single_thread=args.xla_single_thread,
                     keep_pages=args.keep_pages, trigger=args.trigger,
                     benchmarks=args.benchmarks, environment=args.environment, python=args.python,
                     repository_name=args.repository_name)


@dataclass(frozen=True)
class Measured:
    """Where the benchmarks are and what interpreter runs them: the options, else the project file."""

    benchmarks: Path | None  # None: the commit's own kernels_under_test/
    environment: str = "runner"  # runner | commit (runners/envs.py)
    python: Path | None = None  # a user-named interpreter
    build: tuple[str, ...] | None = None  # the project file's build, run in each checkout (runners/build_step.py)
    name: str | None = None  # the name runs are stored under: --repository-name, else the project file's


def repository_top(repo: Path) -> Path:
    """``--repo``, or the top of the git work tree it lies in, said on stderr when they differ (runners/gitrepo.py
    work_tree_top): a subdirectory was refused with git's "cannot clone ...: repository does not exist"."""
    from runners.gitrepo import work_tree_top

    top = work_tree_top(repo)
    if top != repo.expanduser():
        print(f"kernelwatch: measuring the repository at {top} (the top of the git work tree holding {repo})",
              file=sys.stderr)
    return top


def measured_for(repo: Path, options: Measuring, settings: Settings) -> Measured:
    """``--benchmarks``, ``--environment`` and ``--python`` where given, else what the repository's project file
    says (runners/project_file.py), else the defaults (the commit's own kernels_under_test/, this interpreter).
    ``--benchmarks REV:DIR`` is the directory as of a commit of the repository (checked out by KernelWatch)."""
    from runners.gitrepo import GitError
    from runners.local import suite_at
    from runners.project_file import ProjectFileError, check_interpreter, read_project_settings

    given, environment, python = options.benchmarks, options.environment, options.python
    if given is not None and not Path(given).is_dir():
        rev, sep, directory = str(given).partition(":")
        if not sep or not rev or not directory:
            raise InvalidInput(f"--benchmarks {given}: not a directory (nor REV:DIR, a directory as of a commit)")
        try:
            given = suite_at(repo, rev, directory, settings.worktree_dir, settings.repos_dir)
        except GitError as exc:
            raise InvalidInput(f"--benchmarks {given}: {exc}") from None
    try:
        if python is not None:
            python = check_interpreter(python, f"--python {python}")
        project = read_project_settings(repo)
    except ProjectFileError as exc:
        raise InvalidInput(str(exc)) from None
    if environment is None and python is None:  # neither option given: the project file's choice
        environment, python = project.environment, project.python
    return Measured(given if given is not None else project.benchmarks, environment or "runner", python,
                    project.build, options.repository_name or project.name)
