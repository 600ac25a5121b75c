"""Pull requests, from GitHub's webhook to the comment: track a pull request, run its head and its merge-base,
and when their runs are in, post the comparison as a check run (or commit status) and one comment kept up to date.

Three steps, each a task taking ids:

1. The webhook stores a delivery once (``record_delivery``) and enqueues ``handle_delivery``.
2. ``handle_delivery`` updates the ``pull_request`` row, asks GitHub for the merge-base (the runners only see
   commits, and the base branch moves on), and hands the runs (merge-base and head interleaved on one runner of
   each configured hardware) to the queue. A pull request from a fork runs nothing until a maintainer approves
   its head: the configured label, or a ``/kernelwatch run`` comment by someone with write access. The approval
   is of that head commit: a later push needs a new one, or anyone could push code after a maintainer looked.
3. Every ingested run whose commit is a tracked head or merge-base enqueues ``report`` (``pull_requests_of_run``,
   called by ``submit_manifest``), which compares the two with the compare engine and posts, once per distinct
   set of runs.
"""

from __future__ import annotations

import hashlib
import json
import logging
import uuid
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from kernelwatch.errors import InvalidInput, KernelWatchError, NotFound, Transient
from kernelwatch.vocabulary import DeliveryState, PullRequestState
from runners.gitrepo import SHA_RE, GitError, check_remote_location
from service.detect.compare import CompareParams, ComparisonReport
from service.detect.run_stats import RunOrigin
from service.integrations.github import GitHubClient, GitHubError
from service.pipeline.compare import ResolvedSide, compare_resolved, resolve
from service.report.compare_table import SideLabel
from service.report.pr_comment import (
    MARKER,
    RUN_COMMAND,
    CommentContext,
    check_output,
    compare_url,
    format_comment,
    overall,
    public_reason,
)
from service.report.pr_comment import status_description as describe
from service.store import deliveries
from service.store import pull_requests as stored_prs
from service.store.commits import repositories_holding, sha_of_run
from service.store.db import unit_of_work
from service.store.models import PullRequest, WebhookDelivery
from service.store.runs import run_origins
from service.store.times import utc

log = logging.getLogger(__name__)

RUN_ACTIONS = frozenset({"opened", "synchronize", "reopened"})
WRITE_ROLES = frozenset({"admin", "maintain", "write"})
CHECK_NAME = "KernelWatch"
STATUS_CONTEXT = "kernelwatch"
# A commit status has no neutral state; a missing baseline must not block a merge.
_STATUS_STATE = {"failure": "failure", "success": "success", "neutral": "success"}

GitHubFor = Callable[[str, int | None], GitHubClient]  # (owner/name, installation id) -> a client acting for it


@dataclass(frozen=True)
class HookConfig:
    hardware: tuple[str, ...] = ("cpu",)
    label: str = "kernelwatch:run"
    samples: int = 20
    # Runs per side, interleaved round by round: a verdict counts runs (and pairs those of one round); even, so
    # that each side goes first as often (service/cli/ci.py CI_ROUNDS).
    rounds: int = 4
    public_url: str = ""
    check_runs: bool = True  # a GitHub App posts check runs; a plain token posts commit statuses


@dataclass(frozen=True)
class SuiteRun:
    """A ``run_suite`` task for the ``runner.<hardware>`` queue."""

    hardware: str
    kwargs: dict[str, Any]
    task_id: str | None = None  # None: the carrier names it; a tracked branch's tick names its own (once per tip)


@dataclass(frozen=True)
class PullRequestFacts:
    """What an event says about a pull request (the ``pull_request`` object GitHub sends, and its repository)."""

    repository: str
    number: int
    clone_url: str
    base_ref: str
    base_sha: str
    head_repository: str
    head_sha: str
    labels: tuple[str, ...]
    installation_id: int | None = None
    updated_at: datetime | None = None  # GitHub's, where the object carries it (every event's does)

    @property
    def from_fork(self) -> bool:
        return self.head_repository.lower() != self.repository.lower()


def facts_of(pull: dict[str, Any], installation_id: int | None) -> PullRequestFacts:
    base, head = pull["base"], pull["head"]
    base_repo = base["repo"]
    # A fork that was deleted leaves the head repository null: it is not this repository either way.
    head_repo = (head.get("repo") or {}).get("full_name") or "(deleted fork)"
    return PullRequestFacts(
        repository=str(base_repo["full_name"]), number=int(pull["number"]), clone_url=str(base_repo["clone_url"]),
        base_ref=str(base["ref"]), base_sha=str(base["sha"]), head_repository=str(head_repo),
        head_sha=str(head["sha"]), labels=tuple(str(lb.get("name", "")) for lb in pull.get("labels") or ()),
        installation_id=installation_id, updated_at=_github_time(pull.get("updated_at")))


def _older(facts: PullRequestFacts, pr: PullRequest) -> bool:
    """Whether the event is older than the newest one acted on for this pull request (GitHub's times; an event or
    a row without one is never older)."""
    return (facts.updated_at is not None and pr.event_updated_at is not None
            and facts.updated_at < utc(pr.event_updated_at))


def _github_time(value: object) -> datetime | None:
    """GitHub's ISO 8601 time (``2026-12-07T02:57:18Z``) as an aware datetime; None where absent or unreadable."""
    if not isinstance(value, str):
        return None
    try:
        return utc(datetime.fromisoformat(value.replace("Z", "+00:00")))
    except ValueError:
        return None


def _installation(payload: dict[str, Any]) -> int | None:
    value = (payload.get("installation") or {}).get("id")
    return int(value) if isinstance(value, int) else None


# What a delivery of each event must hold, and of what type, before it is stored: ("a.b.c", type). A signed
# delivery is GitHub's, but a malformed one (a test tool, a proxy, an older API) must be refused at the door rather
# than stored and then crash its handler: before, it was a 500 in the embedded form and a delivery stranded as
# "queued" forever in the distributed one.
_REQUIRED: dict[str, tuple[tuple[str, type], ...]] = {
    "pull_request": (("pull_request", dict), ("pull_request.number", int), ("pull_request.base", dict),
                     ("pull_request.base.ref", str), ("pull_request.base.sha", str), ("pull_request.base.repo", dict),
                     ("pull_request.base.repo.full_name", str), ("pull_request.base.repo.clone_url", str),
                     ("pull_request.head", dict), ("pull_request.head.sha", str)),
    "issue_comment": (("repository", dict), ("repository.full_name", str), ("issue", dict), ("issue.number", int),
                      ("comment", dict), ("comment.user", dict), ("comment.user.login", str)),
}


# What the handler stores of a delivery (when present), of what type, and the most its column holds: characters of a
# string, the largest whole number. Within the shape, a sha of 5,000 characters, a NUL in a ref, a number past
# INTEGER or a fork's name that is a list was a 500 in the embedded form (issue 18's webhook fuzzing).
_STORED: dict[str, tuple[tuple[str, type, int], ...]] = {
    "pull_request": (("pull_request.number", int, 2**31 - 1), ("pull_request.base.ref", str, 255),
                     ("pull_request.base.sha", str, 40), ("pull_request.base.repo.full_name", str, 200),
                     ("pull_request.base.repo.clone_url", str, 2000), ("pull_request.head.sha", str, 40),
                     ("pull_request.head.repo.full_name", str, 200), ("installation.id", int, 2**63 - 1)),
    "issue_comment": (("installation.id", int, 2**63 - 1),),
}


def _at(payload: dict[str, Any], path: str) -> Any:
    value: Any = payload
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def payload_problem(event: str, payload: dict[str, Any]) -> str | None:
    """What a relevant delivery lacks for its handler (``_REQUIRED``), or what it holds that the handler could not
    store (``_STORED``); None when it has it all."""
    from service.request_checks import unstorable

    for path, kind in _REQUIRED.get(event, ()):
        value = _at(payload, path)
        # bool is an int to Python, and never a pull request's number
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            return f"a {event} delivery needs {path} ({kind.__name__})"
    for path, kind, most in _STORED.get(event, ()):
        value = _at(payload, path)
        if kind is str and value is not None:
            problem = ("is not a string" if not isinstance(value, str) else unstorable(value)
                       or (f"is over {most} characters" if len(value) > most else None))
            if problem:
                return f"a {event} delivery's {path} {problem}"
        # Any other installation id is no installation's (read as none): only a number past BIGINT is refused.
        if kind is int and isinstance(value, int) and not isinstance(value, bool) and not 0 <= value <= most:
            return f"a {event} delivery's {path} must be a whole number from 0 to {most}"
    if event == "pull_request":
        # What a runner is handed to fetch and check out: refused here, or the delivery read "done" while its task
        # failed in a log (a head sha of "--upload-pack=x", a clone URL of "ext::sh -c ...").
        for path in ("pull_request.base.sha", "pull_request.head.sha"):
            if not SHA_RE.match(_at(payload, path)):
                return f"a pull_request delivery's {path} is not a full commit sha"
        try:
            check_remote_location(_at(payload, "pull_request.base.repo.clone_url"))
        except GitError as exc:
            return f"a pull_request delivery's pull_request.base.repo.clone_url: {exc}"
    return None


def relevant(event: str, payload: dict[str, Any], label: str) -> bool:
    """Whether a delivery can lead to anything: the rest are answered and forgotten, not stored."""
    action = payload.get("action")
    if event == "pull_request":
        if action in RUN_ACTIONS or action == "closed":
            return True
        return action == "labeled" and (payload.get("label") or {}).get("name") == label
    if event == "issue_comment":
        issue = payload.get("issue") or {}
        body = str((payload.get("comment") or {}).get("body") or "")
        return action == "created" and "pull_request" in issue and _has_command(body)
    return False


def _has_command(body: str) -> bool:
    return any(line.strip().lower().startswith(RUN_COMMAND) for line in body.splitlines())


def record_delivery(sessions: sessionmaker[Session], delivery_uid: str, event: str,
                    payload: dict[str, Any], body_sha256: str | None = None) -> int | None:
    """Store a delivery, marked queued; its id, or None when it was stored before and needs nothing more (a
    redelivery: the same id, or the same signed body under another id, ``body_sha256``, since the id is not
    signed and a captured body could be replayed under any). A delivery whose enqueue failed earlier (still
    ``received``) is handed out again."""
    now = datetime.now(UTC)
    with unit_of_work(sessions) as session:
        found = deliveries.locked_by_uid(session, delivery_uid)
        if found is None and body_sha256 is not None:
            found = deliveries.locked_by_body(session, body_sha256)
        if found is None:
            found = WebhookDelivery(delivery_uid=delivery_uid, event=event, payload=payload,
                                    state=DeliveryState.QUEUED, received_at=now, body_sha256=body_sha256)
            # None when a concurrent delivery of the same id stored it first: it enqueues it.
            return found.id if deliveries.add_new(session, found) else None
        if found.state != "received":
            return None
        found.state = DeliveryState.QUEUED
        return found.id


def enqueue_failed(sessions: sessionmaker[Session], delivery_id: int) -> None:
    """The delivery could not be handed to the queue: a redelivery will try again."""
    with unit_of_work(sessions) as session:
        delivery = session.get(WebhookDelivery, delivery_id)
        if delivery is not None and delivery.state == "queued":
            delivery.state = DeliveryState.RECEIVED


def retry_delivery(sessions: sessionmaker[Session], enqueue: Callable[[int], None], delivery_id: int) -> None:
    """A dead-lettered (or never queued) delivery handed out again (``enqueue``: a queue's
    ``enqueue_github_delivery``), with a fresh count of attempts: what `kernelwatch deliveries --retry` and
    POST /api/v1/github/deliveries/<id>/retry do."""
    deliveries.requeue(sessions, delivery_id)
    try:
        enqueue(delivery_id)
    except KernelWatchError:
        enqueue_failed(sessions, delivery_id)
        raise


def pull_requests_of_run(session: Session, run_id: int) -> list[int]:
    """The tracked pull requests whose head or merge-base is this run's commit: they may be ready to report."""
    sha = sha_of_run(session, run_id)
    if sha is None:
        return []
    return stored_prs.with_commit(session, sha, "running")


class PullRequestHooks:
    """Steps 2 and 3 (see the module). ``github`` is None when no credentials are configured: runs are still
    made and compared, and nothing is posted."""

    def __init__(self, sessions: sessionmaker[Session], github: GitHubFor | None, config: HookConfig) -> None:
        self.sessions = sessions
        self.github = github
        self.config = config

    # -- step 2 ---------------------------------------------------------------------------------------------------

    def handle_delivery(self, delivery_id: int, enqueue: Callable[[Sequence[SuiteRun]], None]) -> str:
        """Act on a stored delivery; the runs it calls for go to ``enqueue`` before the delivery is marked done,
        so a failure to enqueue leaves it to be retried whole. Returns what was done, for the delivery's row.
        A ``Transient`` failure (GitHub, the database, the broker) propagates after it is recorded: the caller
        retries while ``retry_or_dead_letter`` says so (service/store/deliveries.py)."""
        started = deliveries.begin_attempt(self.sessions, delivery_id)
        if started is None:
            return "nothing: already handled"
        event, payload = started
        try:
            outcome, runs = self._act(event, payload)
        except GitHubError as exc:
            # Refused (a pull request gone, an app without access): retrying cannot help; say so on the delivery.
            outcome, runs = f"not handled: {exc}", []
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            # A payload stored before the hook checked shapes (payload_problem): retrying cannot mend it either.
            outcome, runs = f"not handled: malformed {event} payload ({type(exc).__name__}: {str(exc)[:200]})", []
        if runs:
            enqueue(runs)
        deliveries.finish(self.sessions, delivery_id, outcome)
        log.info("github delivery %s: %s", delivery_id, outcome)
        return outcome

    def retry_or_dead_letter(self, delivery_id: int, exc: Exception) -> bool:
        """After a failed attempt: True to try again later; False when the delivery is now dead-lettered."""
        again = deliveries.attempt_failed(self.sessions, delivery_id, f"{type(exc).__name__}: {exc}")
        if not again:
            log.error("github delivery %s dead-lettered: %s", delivery_id, exc)
        return again

    def _act(self, event: str, payload: dict[str, Any]) -> tuple[str, list[SuiteRun]]:
        action = payload.get("action")
        installation = _installation(payload)
        if event == "pull_request":
            facts = facts_of(payload["pull_request"], installation)
            if action == "closed":
                self._close(facts)
                return "closed", []
            approved = action == "labeled"  # only the configured label gets this far (``relevant``)
            return self._track(facts, approve=approved, rerun=approved)
        if event == "issue_comment" and self.github is not None:
            repository = str(payload["repository"]["full_name"])
            number = int(payload["issue"]["number"])
            user = str(payload["comment"]["user"]["login"])
            client = self.github(repository, installation)
            role = client.permission(repository, user)
            if role not in WRITE_ROLES:
                return f"ignored /kernelwatch run from {user} ({role} access)", []
            pull = client.pull_request(repository, number)
            if pull.get("state") != "open":  # a closed pull request is not run, whoever asks
                return f"ignored {RUN_COMMAND} on {repository}#{number}: it is {pull.get('state')}", []
            facts = facts_of(pull, installation)
            return self._track(facts, approve=True, rerun=True)
        return f"ignored {event} {action}", []

    def _close(self, facts: PullRequestFacts) -> None:
        with unit_of_work(self.sessions) as session:
            pr = stored_prs.pull_request(session, facts.repository, facts.number, lock=True)
            if pr is None or _older(facts, pr):
                return  # a close retried after a reopen must not close the reopened pull request
            if facts.updated_at is not None:
                pr.event_updated_at = facts.updated_at
            # Runs that will never be reported: their check run stops spinning (closed before they were in).
            unfinished = pr.check_run_id if pr.state == "running" and pr.reported_key is None else None
            pr.state, pr.updated_at = PullRequestState.CLOSED, datetime.now(UTC)
            repository, installation = pr.repository, pr.installation_id
        if unfinished is not None and self.github is not None and self.config.check_runs:
            client, check_id = self.github(repository, installation), unfinished
            cancelled = _cancelled("Cancelled", "The pull request was closed before its runs were in.")
            self._best_effort("cancel the check run",
                              lambda: client.update_check_run(repository, check_id, cancelled))

    def _track(self, facts: PullRequestFacts, approve: bool, rerun: bool) -> tuple[str, list[SuiteRun]]:
        now = datetime.now(UTC)
        name = f"{facts.repository}#{facts.number}"
        with unit_of_work(self.sessions) as session:
            pr = stored_prs.pull_request(session, facts.repository, facts.number, lock=True)
            if pr is None:
                pr = PullRequest(repository=facts.repository, number=facts.number, state=PullRequestState.WAITING,
                                 created_at=now)
                session.add(pr)
            if _older(facts, pr):
                # A delivery late or retried after a newer one: acting on it would take the pull request back to
                # an older head, and leave the newer head's check run in progress for good.
                return (f"{name}: this event ({facts.updated_at}) is older than the one acted on "
                        f"({pr.event_updated_at}): not acted on"), []
            if facts.updated_at is not None:
                pr.event_updated_at = facts.updated_at
            unchanged = (pr.state == "running" and pr.head_sha == facts.head_sha and pr.base_sha == facts.base_sha
                         and pr.merge_base_sha is not None)
            pr.clone_url, pr.base_ref, pr.base_sha = facts.clone_url, facts.base_ref, facts.base_sha
            pr.head_repository, pr.head_sha, pr.updated_at = facts.head_repository, facts.head_sha, now
            pr.installation_id = facts.installation_id or pr.installation_id
            if approve:
                pr.approved_sha = facts.head_sha
            if facts.from_fork and pr.approved_sha != facts.head_sha:
                pr.state = PullRequestState.WAITING
                return (f"{name} is from {facts.head_repository}: waiting for a maintainer's label "
                        f"{self.config.label!r} or a {RUN_COMMAND} comment"), []
            if unchanged and not rerun:
                return f"{name} at {facts.head_sha[:12]} is already scheduled", []
            session.flush()
            pr_id = pr.id
        merge_base = self._merge_base(facts)
        with unit_of_work(self.sessions) as session:
            pr = stored_prs.locked(session, pr_id)
            if pr is None or pr.head_sha != facts.head_sha:
                return f"{name} moved on meanwhile", []  # the event that moved it schedules its own runs
            # An earlier head's check run still in progress (its runs never reported) would spin on that commit
            # for good: it is completed as cancelled below, said to be superseded.
            superseded = (pr.check_run_id if pr.check_run_id is not None and pr.state == "running"
                          and pr.reported_key is None else None)
            pr.merge_base_sha, pr.state, pr.reported_key = merge_base, PullRequestState.RUNNING, None
            # Each hardware's task named here, so that its runs are a session the report knows to wait for: a
            # task's runs are a session named after its first run, whose id is the task's without dashes
            # (runners/worker.py run_id_for), so a hex task id names its session as it is.
            task_ids = {hw: uuid.uuid4().hex for hw in self.config.hardware}
            pr.sessions, pr.failed_sessions = list(task_ids.values()), None
            # Every scheduling gets a check run of its own (GitHub cannot take a completed one back to in
            # progress); the comment stays the same one.
            pr.check_run_id, pr.check_run_sha = None, None
        if superseded is not None and self.github is not None and self.config.check_runs:
            client, check_id = self.github(facts.repository, facts.installation_id), superseded
            cancelled = _cancelled("Superseded", f"The runs were scheduled again (at {facts.head_sha[:12]}) before "
                                                 "these were in; their own check run follows.")
            self._best_effort("cancel the superseded check run",
                              lambda: client.update_check_run(facts.repository, check_id, cancelled))
        self._post_started(pr_id, facts, merge_base)
        runs = [SuiteRun(hw, self._run_kwargs(facts.clone_url, merge_base, facts.head_sha, facts.number),
                         task_ids[hw]) for hw in self.config.hardware]
        return (f"{name}: running merge-base {merge_base[:12]} and head {facts.head_sha[:12]} on "
                f"{', '.join(self.config.hardware)}"), runs

    def _post_started(self, pr_id: int, facts: PullRequestFacts, merge_base: str) -> None:
        """Show on the pull request that its runs started, so an old verdict does not stand while new runs go: a
        check run in progress (an app) or a pending commit status (a token). Best effort: the report that
        follows completes that check run, or finds it by its external id, or makes one."""
        if self.github is None:
            return
        client = self.github(facts.repository, facts.installation_id)
        summary = (f"Running the merge-base {merge_base[:12]} and the head {facts.head_sha[:12]} interleaved on "
                   f"{', '.join(self.config.hardware)}.")
        if not self.config.check_runs:
            self._best_effort("post the pending status", lambda: client.create_status(
                facts.repository, facts.head_sha, {"state": "pending", "description": summary[:140],
                                                   "context": STATUS_CONTEXT}))
            return
        made: list[int] = []
        self._best_effort("post the check run in progress", lambda: made.append(client.create_check_run(
            facts.repository, {"name": CHECK_NAME, "head_sha": facts.head_sha, "status": "in_progress",
                               "started_at": _now_iso(), "external_id": str(pr_id),
                               "output": {"title": "Running", "summary": summary}})))
        if not made:
            return
        with unit_of_work(self.sessions) as session:
            pr = stored_prs.locked(session, pr_id)
            if pr is not None and pr.head_sha == facts.head_sha and pr.check_run_id is None:
                pr.check_run_id, pr.check_run_sha = made[0], facts.head_sha

    def _hardware_of(self, task_session: str, expected: Sequence[str]) -> str:
        """The hardware a scheduling's task ran on: sessions are stored in the configured hardware's order (the
        task's id where the configuration changed since)."""
        if len(expected) == len(self.config.hardware) and task_session in expected:
            return self.config.hardware[list(expected).index(task_session)]
        return f"task {task_session[:12]}"

    @staticmethod
    def _best_effort(what: str, call: Callable[[], object]) -> None:
        try:
            call()
        except (GitHubError, Transient) as exc:
            log.warning("could not %s: %s", what, exc)

    def _merge_base(self, facts: PullRequestFacts) -> str:
        if self.github is None:
            # Without credentials the compare API cannot be asked; the base tip is the closest stand-in.
            return facts.base_sha
        return self.github(facts.repository, facts.installation_id).merge_base(
            facts.repository, facts.base_sha, facts.head_sha)

    def _run_kwargs(self, clone_url: str, merge_base: str, head: str, number: int) -> dict[str, Any]:
        # One task, the two commits interleaved benchmark by benchmark on one machine: their difference is then
        # the code's, not two machines'. ``branch`` None and trigger pr: neither is labelled with a branch (the
        # runner measures both with the head's suite, which may be edited), so neither enters a branch's history.
        return {"repo": clone_url, "commit": merge_base, "also": [head], "suite": "*", "params": "",
                "samples": self.config.samples, "trigger": "pr", "branch": None, "quick": False, "capture": True,
                "pr_number": number, "rounds": self.config.rounds}

    # -- step 3 ---------------------------------------------------------------------------------------------------

    def report(self, pull_request_id: int) -> str:
        """Compare the merge-base with the head and post, unless this exact set of runs was posted already.
        One transaction holding the pull request's row: two reports of one pull request never both create a
        comment."""
        with unit_of_work(self.sessions) as session:
            pr = stored_prs.locked(session, pull_request_id)
            if pr is None or pr.state != "running" or pr.merge_base_sha is None:
                return "nothing to report"
            base, head, repository = _sides(session, pr.merge_base_sha, pr.head_sha)
            if head is None:
                return "the head has no runs yet"
            origins = run_origins(session, head.run_ids)
            failed = pr.failed_sessions or {}
            # A failed task's runs (a round it uploaded before failing) will never make up their rounds.
            if _rounds_landed({i: o for i, o in origins.items() if o.session not in failed}) < self.config.rounds:
                # Each of a task's runs is uploaded, and reported, on its own: a verdict on the first of three
                # runs would be posted only to be replaced twice (and is the least decided of them).
                return "the head's rounds are still landing"
            expected = pr.sessions or []
            not_landed = _sessions_not_landed(origins, expected, self.config.rounds) if len(expected) > 1 else []
            waiting = [name for name in not_landed if name not in failed]
            if waiting:
                # Several hardware: one's verdict alone would complete the check run while another's task has
                # not run (a success on the CPU's rows before the H200's were measured).
                return f"waiting for {len(waiting)} of {len(expected)} hardware's runs"
            # A hardware whose task failed is reported as not measured beside the others' verdict (that failure
            # had completed the check run, and the others' verdict waited for a rerun); one that landed after all
            # (its task retried) is measured.
            unmeasured = tuple((self._hardware_of(name, expected), failed[name]) for name in not_landed)
            report, base_label, missing = None, _bare_label(repository, pr.merge_base_sha), ""
            notes: tuple[str, ...] = ()
            if base is None:
                missing = f"the merge-base {pr.merge_base_sha[:12]} has no runs"
            else:
                base_label = base.label
                try:
                    outcome = compare_resolved(session, base, head, CompareParams())
                    report, notes = outcome.report, outcome.notes
                except InvalidInput as exc:
                    missing = str(exc)
            key = _digest(pr.merge_base_sha, pr.head_sha, base, head, unmeasured)
            if key == pr.reported_key:
                return "already reported"
            ctx = CommentContext(base_label, head.label, self.config.public_url, notes, missing, unmeasured)
            verdict = overall(report, ctx)
            if self.github is None:
                pr.reported_key = key
                return f"{verdict} (no GitHub credentials: nothing posted)"
            client = self.github(pr.repository, pr.installation_id)
            self._post_check(client, pr, report, ctx)
            try:
                self._post_comment(client, pr, format_comment(report, ctx))
            except (GitHubError, Transient):
                # The check run is on GitHub already: keep its id, so that the retry of this report updates it
                # instead of posting a second one. Not reported yet: the retry posts the comment.
                session.commit()
                raise
            pr.reported_key, pr.updated_at = key, datetime.now(UTC)
            return verdict

    def run_failed(self, clone_url: str, number: int, head_sha: str, message: str,
                   task_session: str | None = None) -> str:
        """A runner's task for this pull request failed (its checkout, environment or suite could not be made):
        no run will come in to report, so its check run is completed as failed (a commit status ``error`` with a
        token) and its comment says why, once per message; nothing where the pull request has moved on since.
        ``task_session``: the failed task's session (its id without dashes). Where the scheduling has other
        hardware's tasks, the failure is kept and reported beside their verdict (:meth:`report`), which waits for
        the rest to land."""
        with unit_of_work(self.sessions) as session:
            pr = stored_prs.by_clone_url(session, clone_url, number)
            if pr is None or pr.state != "running" or pr.head_sha != head_sha:
                return "nothing to report: the pull request has moved on"
            expected = pr.sessions or []
            others = len(expected) > 1 and task_session in expected
            if others and task_session is not None:
                # Kept even when kept before: a retry of this job (the report below failed on GitHub's side) must
                # still post, and the report knows what it posted.
                pr.failed_sessions = {**(pr.failed_sessions or {}), task_session: message}
                # Every hardware failed: no verdict to wait for, reported as a single hardware's failure is.
                others = set(pr.failed_sessions) < set(expected)
            if others:
                pr_id, hardware = pr.id, self._hardware_of(str(task_session), expected)
            else:
                return self._report_failure(session, pr, message)
        return f"{hardware}'s runs could not be made; {self.report(pr_id)}"

    def _report_failure(self, session: Session, pr: PullRequest, message: str) -> str:
        """Complete the check run as failed and say why in the comment: no run of this head will come."""
        head_sha = pr.head_sha
        key = "failed:" + hashlib.sha256(f"{head_sha}\n{message}".encode()).hexdigest()[:40]
        if key == pr.reported_key:
            return "already reported"
        if self.github is None:
            pr.reported_key = key
            return "failure (no GitHub credentials: nothing posted)"
        client = self.github(pr.repository, pr.installation_id)
        # The check run is as public as the comment: the message's last line, fenced (failure_comment says why);
        # it carried the whole message, raw, as markdown.
        shown, fence = public_reason(message)
        summary = (f"The runs of the head {head_sha[:12]} and its merge-base "
                   f"{(pr.merge_base_sha or '?')[:12]} could not be made:\n\n{fence}\n{shown}\n{fence}\n\n"
                   "The runner's log has the whole error.")
        if self.config.check_runs:
            fields: dict[str, Any] = {"name": CHECK_NAME, "head_sha": head_sha, "status": "completed",
                                      "conclusion": "failure", "completed_at": _now_iso(),
                                      "external_id": str(pr.id),
                                      "output": {"title": "The runs could not be made",
                                                 "summary": summary[:60000]}}
            self._complete_check_run(client, pr, fields)
        else:
            client.create_status(pr.repository, head_sha, {"state": "error",
                                                           "description": f"could not be made: {shown}"[:140],
                                                           "context": STATUS_CONTEXT})
        self._post_comment(client, pr, failure_comment(head_sha, message))
        pr.reported_key, pr.updated_at = key, datetime.now(UTC)
        return "failure: the runs could not be made"

    def _post_check(self, client: GitHubClient, pr: PullRequest, report: ComparisonReport | None,
                    ctx: CommentContext) -> None:
        verdict = overall(report, ctx)
        link = compare_url(self.config.public_url, ctx.base.commit, ctx.head.commit, ctx.head.repository)
        if not self.config.check_runs:
            client.create_status(pr.repository, pr.head_sha, {
                "state": _STATUS_STATE[verdict], "description": describe(report, ctx), "context": STATUS_CONTEXT,
                **({"target_url": link} if link else {})})
            return
        fields: dict[str, Any] = {"name": CHECK_NAME, "head_sha": pr.head_sha, "status": "completed",
                                  "conclusion": verdict, "completed_at": _now_iso(), "external_id": str(pr.id),
                                  "output": check_output(report, ctx), **({"details_url": link} if link else {})}
        self._complete_check_run(client, pr, fields)

    @staticmethod
    def _complete_check_run(client: GitHubClient, pr: PullRequest, fields: dict[str, Any]) -> None:
        """Complete the head's check run with ``fields``: the one stored, else the one GitHub has under its
        external id, else a new one."""
        check_id = pr.check_run_id if pr.check_run_sha == pr.head_sha else None
        if check_id is None:
            # The check run in progress whose id was never stored (its answer lost), or the one a report that
            # failed after GitHub made it left: look before making one.
            check_id = client.find_check_run(pr.repository, pr.head_sha, CHECK_NAME, str(pr.id))
        if check_id is not None:
            try:
                client.update_check_run(pr.repository, check_id, fields)
                pr.check_run_id, pr.check_run_sha = check_id, pr.head_sha
                return
            except GitHubError as exc:
                if exc.status not in (404, 422):  # deleted, or completed already with another conclusion
                    raise
        pr.check_run_id, pr.check_run_sha = client.create_check_run(pr.repository, fields), pr.head_sha

    def _post_comment(self, client: GitHubClient, pr: PullRequest, body: str) -> None:
        comment_id = pr.comment_id
        if comment_id is not None:
            try:
                client.update_comment(pr.repository, comment_id, body)
                return
            except GitHubError as exc:
                if exc.status != 404:  # deleted by someone: find or make another
                    raise
        # The id may never have been stored (a report that failed after posting): the marker finds the comment.
        comment_id = client.find_comment(pr.repository, pr.number, MARKER)
        if comment_id is not None:
            client.update_comment(pr.repository, comment_id, body)
        else:
            comment_id = client.create_comment(pr.repository, pr.number, body)
        pr.comment_id = comment_id


def failure_comment(head_sha: str, message: str) -> str:
    """The comment when a pull request's runs could not be made: the runner's reason, fenced as code (a fence
    longer than any run of backticks in it, so the message cannot close it), and how to try again."""
    shown, fence = public_reason(message)
    return (f"{MARKER}\n### KernelWatch\n\nThe runs of this head ({head_sha[:12]}) could not be made:\n\n"
            f"{fence}\n{shown}\n{fence}\n\nComment `{RUN_COMMAND}` to run them again once that is fixed (the "
            "runner's log has the whole error).")


def _cancelled(title: str, summary: str) -> dict[str, Any]:
    """A check run's fields, completed as cancelled: its runs will never report."""
    return {"status": "completed", "conclusion": "cancelled", "completed_at": _now_iso(),
            "output": {"title": title, "summary": summary}}


def _rounds_landed(origins: Mapping[int, RunOrigin]) -> int:
    """How many rounds of its newest session the head has in the environment that has the fewest (a suite that
    needs several environments makes a run of each per round; each hardware's task is a session of its own). The
    newest session's alone: a rerun at the same head (`/kernelwatch run`) found the earlier scheduling's runs
    landed, and reported after its own first run, then edited the report as each of the others came."""
    # Runs made alone (no session: a runner before sessions, an upload of its own) count as before, every one.
    counts = Counter((o.environment, o.session) for o in origins.values())
    newest = {o.environment: o.session for _, o in sorted(origins.items())}  # the last stored run's, per environment
    return min((counts[(env, name)] for env, name in newest.items()), default=0)


def _sessions_not_landed(origins: Mapping[int, RunOrigin], expected: Sequence[str], rounds: int) -> list[str]:
    """The ``expected`` sessions (a scheduling's tasks, one per hardware) that have not landed ``rounds`` runs of
    the head (``origins``: its runs') in each environment they have runs in (none yet: not landed), in order."""
    counts = Counter((o.session, o.environment) for o in origins.values())
    short = {name for (name, _), n in counts.items() if n < rounds}
    landed = {name for name, _ in counts} - short
    return [name for name in expected if name not in landed]


def _sides(session: Session, merge_base: str, head: str) -> tuple[ResolvedSide | None, ResolvedSide | None, str]:
    """Both sides' runs, in the repository that has the head (preferring one that has the merge-base too: a
    fork registered as a repository of its own holds the same commits)."""
    rows = repositories_holding(session, [merge_base, head])
    holders: dict[str, set[str]] = {}
    for sha, name in rows:
        holders.setdefault(name, set()).add(sha)
    candidates = sorted((name for name, shas in holders.items() if head in shas),
                        key=lambda name: (merge_base not in holders[name], name))
    if not candidates:
        return None, None, ""
    repository = candidates[0]
    return _side(session, merge_base, repository), _side(session, head, repository), repository


def _side(session: Session, sha: str, repository: str) -> ResolvedSide | None:
    try:
        return resolve(session, sha, repository)
    except (NotFound, InvalidInput):
        return None


def _bare_label(repository: str, sha: str) -> SideLabel:
    return SideLabel(ref=sha, repository=repository, commit=sha)


def _digest(merge_base: str, head: str, base: ResolvedSide | None, head_side: ResolvedSide,
            unmeasured: Sequence[tuple[str, str]] = ()) -> str:
    what: list[Any] = [merge_base, head, sorted(base.label.runs) if base else [], sorted(head_side.label.runs)]
    if unmeasured:  # the same runs with a hardware newly failed are another report (left out: digests stay)
        what.append([list(u) for u in unmeasured])
    return hashlib.sha256(json.dumps(what).encode()).hexdigest()


def _now_iso() -> str:
    return datetime.now(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")
