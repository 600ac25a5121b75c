"""`kernelwatch worker` (a Celery worker of the named queues) and `kernelwatch beat` (the schedule of the tracked
branches' runs): the distributed form's processes, both needing KERNELWATCH_REDIS_URL."""

from __future__ import annotations

import argparse
import sys

from kernelwatch.errors import ConfigurationError
from service.cli.common import EXIT_OK, Subparsers
from service.settings import Settings
from service.task_names import DETECT_QUEUE, HARDWARE_NAME, INGEST_QUEUE, NOTIFY_QUEUE


def register(sub: Subparsers) -> None:
    worker = sub.add_parser("worker", help="start a Celery worker (needs KERNELWATCH_REDIS_URL)")
    worker.add_argument("--queues", default="ingest,detect,notify",
                        help="comma-separated: ingest, detect, notify (the default), runner.cpu, runner.h200...")
    worker.add_argument("--concurrency", type=int, default=1)
    worker.add_argument("--pool", default=None, choices=["prefork", "solo", "threads"],
                        help="default: solo for runner queues (one suite at a time, in child processes of its "
                             "own), prefork otherwise")
    worker.add_argument("--hostname", default=None, help="Celery node name (default: celery@HOST)")
    worker.set_defaults(handler=_worker)

    beat = sub.add_parser("beat", help="queue runs of the tracked branches' tips every period (KERNELWATCH_TRACK; "
                                       "needs KERNELWATCH_REDIS_URL)")
    beat.set_defaults(handler=_beat)


def _worker(args: argparse.Namespace, settings: Settings) -> int:
    return cmd_worker(settings, args.queues, args.concurrency, args.pool, args.hostname)


def _beat(args: argparse.Namespace, settings: Settings) -> int:
    return cmd_beat(settings)


def cmd_worker(settings: Settings, queues: str, concurrency: int, pool: str | None, hostname: str | None) -> int:
    """``queues`` comma-separated; ``pool`` None: solo for runner queues alone, else prefork."""
    if not settings.redis_url:
        raise ConfigurationError("kernelwatch worker needs KERNELWATCH_REDIS_URL (e.g. redis://127.0.0.1:6379/0)")
    from service.tasks import make_celery

    names = [q.strip() for q in queues.split(",") if q.strip()]
    check_queue_names(names)
    if any(q.startswith("runner.") for q in names) and settings.uploads_over_http:
        _check_runner_credentials(settings)
    pool = pool or ("solo" if all(q.startswith("runner.") for q in names) else "prefork")
    # Without mingle and gossip: mingle asks the other workers for their revoked tasks and clocks at every start and
    # waits a full second for replies (celery/worker/consumer/mingle.py, an inspect with timeout=1.0); gossip keeps
    # each worker listening to every other's events. KernelWatch revokes no task and reads no worker event, so both
    # only delayed every worker's start: a restart, a runner scaled out, each test's worker.
    argv = ["worker", "--queues", ",".join(names), "--pool", pool, "--loglevel", "INFO",
            "--without-mingle", "--without-gossip"]
    if pool != "solo":
        argv += ["--concurrency", str(concurrency)]
    if hostname:
        argv += ["--hostname", hostname]
    make_celery(settings).worker_main(argv)
    return EXIT_OK


def _check_runner_credentials(settings: Settings) -> None:
    """A runner whose token the service refuses (a wrong one, one that cannot submit) does not start: it took tasks,
    measured each suite, and lost every run at its upload, seen only in its own log. A service that does not
    answer yet is said and not waited for: each upload retries, and the compose file starts runners after web."""
    from runners.uploader import UploadUnavailable
    from service.context import http_uploader

    try:
        http_uploader(settings).check_credentials()
    except UploadUnavailable as exc:
        print(f"kernelwatch worker: warning: {exc} (starting anyway: each upload retries)", file=sys.stderr)


def check_queue_names(names: list[str]) -> None:
    """Every queue a worker is told to consume is one a sender sends to: a typo (``ingset``, ``runner.CPU``) made a
    worker that started cleanly and consumed nothing, while the tasks waited in the queue no one read."""
    service_queues = (INGEST_QUEUE, DETECT_QUEUE, NOTIFY_QUEUE)
    unknown = [q for q in names if q not in service_queues
               and not (q.startswith("runner.") and HARDWARE_NAME.match(q.removeprefix("runner.")))]
    if not names or unknown:
        raise ConfigurationError(
            f"kernelwatch worker --queues: {', '.join(map(repr, unknown)) or 'no queue named'}: the queues are "
            f"{', '.join(service_queues)} and runner.HARDWARE (HARDWARE in lower-case letters, digits, '.' and '-', "
            "e.g. runner.cpu, runner.h200)")


def cmd_beat(settings: Settings) -> int:
    if not settings.redis_url:
        raise ConfigurationError("kernelwatch beat needs KERNELWATCH_REDIS_URL (e.g. redis://127.0.0.1:6379/0)")
    from service.tasks import make_celery
    from service.tracked import beat_schedule

    if not settings.tracked:
        print("kernelwatch beat: KERNELWATCH_TRACK names no branch (REPO@BRANCH[@HARDWARE],...): nothing to "
              "schedule", file=sys.stderr)
    for branch in settings.tracked:
        print(f"tracking {branch.label} every {settings.track_period_s} s", file=sys.stderr)
    settings.ensure_dirs()
    app = make_celery(settings)
    # Celery's interval schedule fires one period after beat starts, so a new deployment measured nothing for its
    # first period (an hour by default): one tick per branch now, at every start. A tick is idempotent (a tip
    # queued or stored is not queued again), so a restarted beat's costs a look at each tip.
    try:
        for entry in beat_schedule(settings.tracked, settings.track_period_s).values():
            app.send_task(entry["task"], args=entry["args"], **entry["options"])
    except Exception as exc:  # the broker down at start: beat's own loop reconnects, and ticks a period later
        print(f"kernelwatch beat: warning: could not send the first ticks ({exc}); they come a period later",
              file=sys.stderr)
    # Beat keeps when each entry last ran in this file (so that its own schedule does not fire at once on restart).
    schedule_file = settings.home / "celerybeat-schedule"
    app.start(["beat", "--schedule", str(schedule_file), "--loglevel", "INFO"])
    return EXIT_OK
