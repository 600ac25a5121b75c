"""What the pipeline asks of whoever carries its follow-up work: the queue's port. The embedded server, the CLI and
the Celery service each plug in their own (service/pipeline/queue.py InProcessQueue and CeleryQueue,
service/pipeline/background.py), all of them carriers of the one job table (service/pipeline/jobs.py); the use
cases that enqueue (submit.py, the follow-ups) know only this."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from service.pipeline.bisect import RunOrder
    from service.pipeline.pull_requests import SuiteRun


class TaskQueue(Protocol):
    def enqueue_detect(self, series_ids: Sequence[int]) -> None: ...

    def enqueue_parse(self, result_ids: Sequence[int]) -> None: ...

    def enqueue_runs(self, orders: Sequence[RunOrder]) -> None: ...

    # A new run's commit compared with the measured commit before it, and stored (stored_comparisons.py).
    def enqueue_compare(self, run_ids: Sequence[int]) -> None: ...

    # A follow-up run that could not be made: its bisect or confirm job ends failed, saying why.
    def enqueue_follow_up_failed(self, job_id: int, message: str) -> None: ...

    # The pull-request hook (service/pipeline/pull_requests.py): a stored webhook delivery to act on, the runs of
    # a pull request's merge-base and head, and pull requests whose runs came in.
    def enqueue_github_delivery(self, delivery_id: int) -> None: ...

    def enqueue_suite_runs(self, runs: Sequence[SuiteRun]) -> None: ...

    def enqueue_pr_reports(self, pull_request_ids: Sequence[int]) -> None: ...

    # A pull request's runs could not be made (a runner's task failed): its check run and comment say so.
    def enqueue_pr_run_failed(self, clone_url: str, number: int, head_sha: str, message: str,
                              task_session: str | None = None) -> None: ...
