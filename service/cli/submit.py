"""`kernelwatch submit`: a suite run at a commit, queued for a runner of the hardware named: on the broker
(KERNELWATCH_REDIS_URL), else at the service (KERNELWATCH_URL and KERNELWATCH_TOKEN: its enqueue API), else, with
neither, run here and now through the code a runner would run."""

from __future__ import annotations

import argparse
import uuid
from dataclasses import dataclass
from typing import Any

from kernelwatch.errors import InvalidInput
from service.cli.common import EXIT_OK, Subparsers, at_least, open_context, param_filter
from service.settings import Settings


def register(sub: Subparsers) -> None:
    submit = sub.add_parser("submit", help="enqueue a suite run at a commit on a hardware queue")
    submit.add_argument("--repo", required=True, help="repository URL or local path")
    submit.add_argument("--commit", required=True, help="revision (a local path's is pinned to its sha now)")
    submit.add_argument("--hardware", default="cpu", help="runner queue: runner.<hardware> (default cpu)")
    submit.add_argument("--suite", default="*")
    submit.add_argument("--params", default="", type=param_filter)
    submit.add_argument("--quick", action="store_true")
    submit.add_argument("--no-capture", action="store_true")
    submit.add_argument("--samples", type=at_least(1), default=20)
    submit.add_argument("--rounds", type=at_least(1), default=1, help="runs of the commit, each a fresh process")
    submit.add_argument("--trigger", default="push", choices=["push", "pr", "manual", "bisect", "confirm"])
    submit.add_argument("--branch", default=None)
    submit.set_defaults(handler=_submit)


@dataclass(frozen=True)
class SubmitOptions:
    repo: str  # a URL, or a local path
    commit: str
    hardware: str
    suite: str
    params: str
    quick: bool
    capture: bool  # not --no-capture
    samples: int
    rounds: int
    trigger: str
    branch: str | None


def _submit(args: argparse.Namespace, settings: Settings) -> int:
    return cmd_submit(settings, SubmitOptions(repo=args.repo, commit=args.commit, hardware=args.hardware,
                                              suite=args.suite, params=args.params, quick=args.quick,
                                              capture=not args.no_capture, samples=args.samples, rounds=args.rounds,
                                              trigger=args.trigger, branch=args.branch))


def cmd_submit(settings: Settings, options: SubmitOptions) -> int:
    from runners.gitrepo import check_location, local_path, resolve
    from service.pipeline.suite_tasks import suite_task
    from service.task_names import RUN_SUITE_TASK, runner_queue

    # A local repository's revision (HEAD~1 too) pinned to its sha first: a branch moves, the run must not. Then
    # what the enqueue API refuses, refused here too (a hardware no worker consumes lost its task silently), and
    # what only this host can tell: a local path that names no directory.
    local = local_path(options.repo)
    commit = resolve(local, options.commit) if local is not None else options.commit
    fields = {"repo": options.repo, "commit": commit, "hardware": options.hardware, "suite": options.suite,
              "params": options.params, "quick": options.quick, "samples": options.samples,
              "trigger": options.trigger, "branch": options.branch}
    hardware, task = suite_task(fields)
    check_location(options.repo)
    task.update(capture=options.capture, rounds=options.rounds, selection_required=True)
    if settings.redis_url:
        from service.celery_app import celery_app

        result = celery_app(settings).send_task(RUN_SUITE_TASK, kwargs=task, queue=runner_queue(hardware),
                                                ignore_result=True)
        print(f"queued {commit[:12]} on {runner_queue(hardware)} as task {result.id}")
        return EXIT_OK
    if settings.uploads_over_http:
        # A service's address and token: its runners take the run (this host, a laptop, was never the h200 the
        # user named: the run was made here and uploaded under this host's hardware). `kernelwatch run` measures
        # here and uploads.
        from runners.uploader import UploadError
        from service.context import http_uploader

        try:
            queued = http_uploader(settings).enqueue({**fields, "capture": options.capture, "rounds": options.rounds})
        except UploadError as exc:
            raise InvalidInput(f"not queued at {settings.service_url}: {exc}") from None
        print(f"queued {commit[:12]} on {queued['queue']} at {settings.service_url} as task {queued['task_id']}")
        return EXIT_OK
    # Embedded default: no broker and no service, so the run happens here and now, through the same code a worker
    # runs.
    from runners.worker import SuiteTask, execute

    ctx = open_context(settings)

    def upload(manifest: dict[str, Any]) -> None:
        ctx.submit(manifest)

    run_ids = execute(SuiteTask.from_kwargs(task), str(uuid.uuid4()), settings.home, upload)
    print(f"ran {commit[:12]} in-process: runs {', '.join(run_ids)}")
    return EXIT_OK
