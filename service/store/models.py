"""The tables. Migrations never import this module; the drift test compares it with what they create."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any, TypeVar

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    CheckConstraint,
    DateTime,
    Dialect,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    TypeDecorator,
    UniqueConstraint,
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

from kernelwatch.vocabulary import (
    AlertKind,
    AlertState,
    ChangeKind,
    ComparisonVerdict,
    DeliveryState,
    FindingKind,
    JobPurpose,
    JobState,
    NotificationState,
    Polarity,
    PullRequestState,
    ResultStatus,
    RooflineBound,
    RunStatus,
    Trigger,
)

# Stable constraint names, so migrations can refer to them on both SQLite and PostgreSQL.
NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)


Id = BigInteger().with_variant(Integer(), "sqlite")  # SQLite only autoincrements INTEGER PRIMARY KEY

V = TypeVar("V", bound=StrEnum)


class Vocabulary(TypeDecorator[V]):
    """A column of one closed vocabulary (kernelwatch/vocabulary.py): stored as the member's string, read back as
    the member (which is that string: a StrEnum). The database refuses any other value (``one_of``)."""

    impl = String
    cache_ok = True

    def __init__(self, vocabulary: type[V], length: int) -> None:
        super().__init__(length)
        self.vocabulary = vocabulary
        self._members: dict[str, V] = {member.value: member for member in vocabulary}  # a read is a dict lookup

    def process_bind_param(self, value: Any, dialect: Dialect) -> str | None:
        return None if value is None else str(value)

    def process_result_value(self, value: Any, dialect: Dialect) -> V | None:
        if value is None:
            return None
        member = self._members.get(value)
        return member if member is not None else self.vocabulary(value)  # ValueError: not of the vocabulary


def one_of(column: str, vocabulary: type[StrEnum], nullable: bool = False) -> CheckConstraint:
    """The CHECK that holds ``column`` to ``vocabulary`` (and NULL, where it may be null), named
    ck_<table>_<column>. Migration 0019 creates each with the same list written out; tests/unit/test_vocabulary.py
    holds the two to each other, and to the enums."""
    listed = ", ".join(f"'{member.value}'" for member in vocabulary)
    check = f"{column} IN ({listed})"
    return CheckConstraint(f"{column} IS NULL OR {check}" if nullable else check, name=column)


class Repository(Base):
    __tablename__ = "repository"
    id: Mapped[int] = mapped_column(Id, primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    url: Mapped[str] = mapped_column(String(2000))
    default_branch: Mapped[str] = mapped_column(String(255), default="main")
    # The root commits of every history stored under this name (the manifests' repository.first_commits, merged):
    # a project whose roots share none of them is another project with the same name, refused at ingest.
    first_commits: Mapped[list[str]] = mapped_column(JSON, default=list, server_default="[]")


class Commit(Base):
    __tablename__ = "commit"
    # ix_commit_authored: the commit list's newest-first order and its paging key (migration 0007).
    __table_args__ = (UniqueConstraint("repository_id", "sha"),
                      Index("ix_commit_authored", "authored_at", "position", "id"))
    id: Mapped[int] = mapped_column(Id, primary_key=True)
    repository_id: Mapped[int] = mapped_column(ForeignKey("repository.id", ondelete="CASCADE"))
    sha: Mapped[str] = mapped_column(String(40))
    parents: Mapped[list[str]] = mapped_column(JSON, default=list)
    author: Mapped[str] = mapped_column(String(500), default="")
    authored_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    subject: Mapped[str] = mapped_column(Text, default="")
    position: Mapped[int] = mapped_column(Integer)


class Environment(Base):
    __tablename__ = "environment"
    id: Mapped[int] = mapped_column(Id, primary_key=True)
    fingerprint: Mapped[str] = mapped_column(String(64), unique=True)
    backend: Mapped[str] = mapped_column(String(64))
    device_kind: Mapped[str] = mapped_column(String(200))
    device_count: Mapped[int] = mapped_column(Integer)
    details: Mapped[dict[str, Any]] = mapped_column(JSON)


class Run(Base):
    __tablename__ = "run"
    __table_args__ = (Index("ix_run_commit_env", "commit_id", "environment_id"),
                      one_of("trigger", Trigger), one_of("status", RunStatus))
    id: Mapped[int] = mapped_column(Id, primary_key=True)
    run_uid: Mapped[str] = mapped_column(String(64), unique=True)
    manifest_digest: Mapped[str] = mapped_column(String(64))
    commit_id: Mapped[int] = mapped_column(ForeignKey("commit.id", ondelete="CASCADE"))
    environment_id: Mapped[int] = mapped_column(ForeignKey("environment.id"))
    branch: Mapped[str | None] = mapped_column(String(255), nullable=True)
    trigger: Mapped[Trigger] = mapped_column(Vocabulary(Trigger, 16))
    pr_number: Mapped[int | None] = mapped_column(Integer, nullable=True)
    status: Mapped[RunStatus] = mapped_column(Vocabulary(RunStatus, 16))
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    finished_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    host_details: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    # The host's calibration (flops_per_s, bytes_per_s, dtype) as the runner measured it for this run; null for
    # hosts with published figures and runners that did not calibrate (migration 0011).
    calibration: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    # How healthy the host was while the run measured (steal, load, GPU clocks and throttling) as the manifest's
    # host_health reported it; null for runners that could not read it and runs stored before (migration 0014).
    host_health: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    # The interleaved session and round that made the run (the manifest's round): a comparison pairs runs of one
    # session and round; null for runs made alone and runs stored before (migration 0016).
    round_session: Mapped[str | None] = mapped_column(String(64), nullable=True)
    round_index: Mapped[int | None] = mapped_column(Integer, nullable=True)


class Benchmark(Base):
    __tablename__ = "benchmark"
    __table_args__ = (UniqueConstraint("suite", "name", "params_key"), one_of("direction", Polarity))
    id: Mapped[int] = mapped_column(Id, primary_key=True)
    suite: Mapped[str] = mapped_column(String(200))
    name: Mapped[str] = mapped_column(String(200))
    params_key: Mapped[str] = mapped_column(Text)
    params: Mapped[dict[str, Any]] = mapped_column(JSON)
    unit: Mapped[str] = mapped_column(String(32))
    direction: Mapped[Polarity] = mapped_column(Vocabulary(Polarity, 20))  # its polarity (the manifest's name)


class Series(Base):
    """One line on a chart: a benchmark's metric in one environment, identified by a content hash."""

    __tablename__ = "series"
    __table_args__ = (one_of("direction", Polarity),)
    id: Mapped[int] = mapped_column(Id, primary_key=True)
    key: Mapped[str] = mapped_column(String(64), unique=True)
    repository_id: Mapped[int] = mapped_column(ForeignKey("repository.id", ondelete="CASCADE"))
    benchmark_id: Mapped[int] = mapped_column(ForeignKey("benchmark.id"))
    environment_id: Mapped[int] = mapped_column(ForeignKey("environment.id"))
    metric: Mapped[str] = mapped_column(String(200))
    # The metric's, not the benchmark's: one benchmark reports seconds (lower is better) and GB/s or recall
    # (higher is better) side by side. ``direction`` is the metric's polarity (the manifest's name for it).
    unit: Mapped[str] = mapped_column(String(32))
    direction: Mapped[Polarity] = mapped_column(Vocabulary(Polarity, 20))
    # The benchmark code it measures (runners/suite.py benchmark_version); None: not known yet (stored before
    # versions were, or only by runners that sent none). The first version that arrives adopts the series.
    benchmark_version: Mapped[str | None] = mapped_column(String(16), nullable=True)
    repository: Mapped[Repository] = relationship(lazy="joined")
    benchmark: Mapped[Benchmark] = relationship(lazy="joined")
    environment: Mapped[Environment] = relationship(lazy="joined")


class Result(Base):
    __tablename__ = "result"
    __table_args__ = (UniqueConstraint("run_id", "series_id"), Index("ix_result_series", "series_id"),
                      one_of("status", ResultStatus), one_of("roofline_bound", RooflineBound, nullable=True))
    id: Mapped[int] = mapped_column(Id, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("run.id", ondelete="CASCADE"))
    series_id: Mapped[int] = mapped_column(ForeignKey("series.id"))
    status: Mapped[ResultStatus] = mapped_column(Vocabulary(ResultStatus, 16))
    message: Mapped[str | None] = mapped_column(Text, nullable=True)
    samples: Mapped[list[float]] = mapped_column(JSON)
    sample_count: Mapped[int] = mapped_column(Integer)
    median: Mapped[float | None] = mapped_column(Float, nullable=True)
    mean: Mapped[float | None] = mapped_column(Float, nullable=True)
    stddev: Mapped[float | None] = mapped_column(Float, nullable=True)
    minimum: Mapped[float | None] = mapped_column(Float, nullable=True)
    maximum: Mapped[float | None] = mapped_column(Float, nullable=True)
    compile_time_s: Mapped[float | None] = mapped_column(Float, nullable=True)
    flops: Mapped[float | None] = mapped_column(Float, nullable=True)
    bytes_accessed: Mapped[float | None] = mapped_column(Float, nullable=True)
    max_abs_error: Mapped[float | None] = mapped_column(Float, nullable=True)
    cost: Mapped[dict[str, float]] = mapped_column(JSON, default=dict, server_default=text("'{}'"))  # XLA's
    # The roofline figures, computed once at ingest (service/model/result_roofline.py) for an ok wall-time result
    # with FLOP and byte counts on hardware with known peaks; null elsewhere (migration 0011).
    roofline_intensity: Mapped[float | None] = mapped_column(Float, nullable=True)
    roofline_bound: Mapped[RooflineBound | None] = mapped_column(Vocabulary(RooflineBound, 8), nullable=True)
    roofline_s: Mapped[float | None] = mapped_column(Float, nullable=True)
    roofline_fraction: Mapped[float | None] = mapped_column(Float, nullable=True)
    # The measured time beats the roof's bound (service/model/result_roofline.py above_roof): the roof is wrong.
    roofline_above: Mapped[bool | None] = mapped_column(Boolean, nullable=True)
    roofline_peak_flops_per_s: Mapped[float | None] = mapped_column(Float, nullable=True)
    roofline_peak_bytes_per_s: Mapped[float | None] = mapped_column(Float, nullable=True)
    roofline_peak_source: Mapped[str | None] = mapped_column(String(500), nullable=True)


class Artifact(Base):
    """A captured file, stored content-addressed (the bytes live in the artifact store, not in the database)."""

    __tablename__ = "artifact"
    id: Mapped[int] = mapped_column(Id, primary_key=True)
    sha256: Mapped[str] = mapped_column(String(64), unique=True)
    kind: Mapped[str] = mapped_column(String(32))
    size: Mapped[int] = mapped_column(BigInteger)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    # The version of the parser whose records are stored for it (None: not parsed yet, or no parser for its
    # kind); `kernelwatch reparse` re-parses where the current parser is newer.
    parsed_version: Mapped[int | None] = mapped_column(Integer, nullable=True)
    parse_error: Mapped[str | None] = mapped_column(Text, nullable=True)
    # When retention (`kernelwatch prune`, service/pipeline/prune.py) removed its bytes from the store; the row,
    # its links and the records parsed from it stay, so pages can say what was there (migration 0012).
    pruned_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class ResultArtifact(Base):
    """Which artifacts a result captured, under the names they had where they were captured."""

    __tablename__ = "result_artifact"
    __table_args__ = (Index("ix_result_artifact_artifact", "artifact_id"),)
    result_id: Mapped[int] = mapped_column(ForeignKey("result.id", ondelete="CASCADE"), primary_key=True)
    artifact_id: Mapped[int] = mapped_column(ForeignKey("artifact.id"), primary_key=True)
    name: Mapped[str] = mapped_column(String(255), primary_key=True)
    # The parser version that read it for this result (the records are per result); null until this result's
    # parse ran, even where another result's parse already read the same bytes (migration 0013).
    parsed_version: Mapped[int | None] = mapped_column(Integer, nullable=True)


class Finding(Base):
    """A detector's verdict that a series changed at a commit, stamped with the detector's name and version."""

    __tablename__ = "finding"
    __table_args__ = (
        UniqueConstraint("series_id", "commit_id", "detector"),
        Index("ix_finding_commit", "commit_id"),
        Index("ix_finding_alert", "alert_id"),
        Index("ix_finding_created", "created_at", "id"),  # the findings read: newest first, paged (0007)
        one_of("kind", FindingKind),
        one_of("direction", ChangeKind),
    )
    id: Mapped[int] = mapped_column(Id, primary_key=True)
    series_id: Mapped[int] = mapped_column(ForeignKey("series.id", ondelete="CASCADE"))
    commit_id: Mapped[int] = mapped_column(ForeignKey("commit.id", ondelete="CASCADE"))
    previous_commit_id: Mapped[int | None] = mapped_column(ForeignKey("commit.id"), nullable=True)
    detector: Mapped[str] = mapped_column(String(100))
    detector_version: Mapped[int] = mapped_column(Integer)
    kind: Mapped[FindingKind] = mapped_column(Vocabulary(FindingKind, 16))
    direction: Mapped[ChangeKind] = mapped_column(Vocabulary(ChangeKind, 16))  # the change's kind, not a polarity
    magnitude: Mapped[float] = mapped_column(Float)  # relative change of the level, after/before - 1
    # Not a confidence level: the step size in units of the series' own noise (the change point's noise_units);
    # 1.0 for a static finding, which is exact. Named so in the table and in the API, where it stays.
    confidence: Mapped[float] = mapped_column(Float)
    value_before: Mapped[float] = mapped_column(Float)
    value_after: Mapped[float] = mapped_column(Float)
    # What value_before and value_after measure, where that is not the series' own metric and unit: a static
    # finding sits on a time series but counts instructions or bundles (0015). None: the series'.
    metric: Mapped[str | None] = mapped_column(String(200), nullable=True)
    unit: Mapped[str | None] = mapped_column(String(32), nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    attribution: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    p_value: Mapped[float | None] = mapped_column(Float, nullable=True)  # the change-point test's, where it has one
    # The alert grouping put it in (findings at one commit range share one); None until grouped.
    alert_id: Mapped[int | None] = mapped_column(ForeignKey("alert.id", ondelete="SET NULL"), nullable=True)


class OpStat(Base):
    """Per HLO op of a result's profiler trace: how often it ran and how long (the op table of a drill-down)."""

    __tablename__ = "op_stat"
    __table_args__ = (UniqueConstraint("result_id", "module", "op"),)
    id: Mapped[int] = mapped_column(Id, primary_key=True)
    result_id: Mapped[int] = mapped_column(ForeignKey("result.id", ondelete="CASCADE"))
    module: Mapped[str] = mapped_column(String(500))
    op: Mapped[str] = mapped_column(String(500))
    category: Mapped[str] = mapped_column(String(32))
    occurrences: Mapped[int] = mapped_column(Integer)
    total_ns: Mapped[float] = mapped_column(Float)
    self_ns: Mapped[float] = mapped_column(Float)
    parser_version: Mapped[int] = mapped_column(Integer)


class KernelCode(Base):
    """One compiled kernel of a result (x86 function, SASS kernel, TPU LLO program): counts by class or slot
    family, and a digest of the code, so a change of the generated code is an exact, static signal."""

    __tablename__ = "kernel_code"
    __table_args__ = (UniqueConstraint("result_id", "isa", "name"),)
    id: Mapped[int] = mapped_column(Id, primary_key=True)
    result_id: Mapped[int] = mapped_column(ForeignKey("result.id", ondelete="CASCADE"))
    artifact_id: Mapped[int] = mapped_column(ForeignKey("artifact.id"))
    name: Mapped[str] = mapped_column(String(1000))
    isa: Mapped[str] = mapped_column(String(32))
    instructions: Mapped[int | None] = mapped_column(Integer, nullable=True)  # ops, for LLO
    bundles: Mapped[int | None] = mapped_column(Integer, nullable=True)
    mix: Mapped[dict[str, int]] = mapped_column(JSON)
    details: Mapped[dict[str, Any]] = mapped_column(JSON)  # width, registers, spills, loops...
    parser_version: Mapped[int] = mapped_column(Integer)


class HloModuleRecord(Base):
    """A result's optimized HLO module: structural fingerprint, opcode counts, fusions with their sources."""

    __tablename__ = "hlo_module"
    __table_args__ = (UniqueConstraint("result_id", "name"),)
    id: Mapped[int] = mapped_column(Id, primary_key=True)
    result_id: Mapped[int] = mapped_column(ForeignKey("result.id", ondelete="CASCADE"))
    artifact_id: Mapped[int] = mapped_column(ForeignKey("artifact.id"))
    name: Mapped[str] = mapped_column(String(500))
    fingerprint: Mapped[str] = mapped_column(String(64))
    instructions: Mapped[int] = mapped_column(Integer)
    opcodes: Mapped[dict[str, int]] = mapped_column(JSON)
    fusions: Mapped[list[dict[str, Any]]] = mapped_column(JSON)
    # The program's other ops (sorts, convolutions, custom calls, loops) with their fingerprints (parser 3 on);
    # None in records parsed before, whose ops pair by name.
    ops: Mapped[list[dict[str, Any]] | None] = mapped_column(JSON, nullable=True)
    parser_version: Mapped[int] = mapped_column(Integer)


class Alert(Base):
    """The findings of one repository at one commit range, triaged together.

    ``commit_id`` is the first commit of the new level, ``previous_commit_id`` the last of the old one. The range
    is unique, so grouping the same findings again finds the same alert. (Both databases treat NULLs as
    distinct in a unique constraint: grouping looks an alert up before it creates one, which covers a range
    without a previous commit.)
    """

    __tablename__ = "alert"
    # ix_alert_state: the inbox (state=untriaged), newest first, and its total (migration 0007).
    __table_args__ = (UniqueConstraint("repository_id", "previous_commit_id", "commit_id"),
                      Index("ix_alert_state", "state", "id"), one_of("state", AlertState), one_of("kind", AlertKind))
    id: Mapped[int] = mapped_column(Id, primary_key=True)
    repository_id: Mapped[int] = mapped_column(ForeignKey("repository.id", ondelete="CASCADE"))
    commit_id: Mapped[int] = mapped_column(ForeignKey("commit.id", ondelete="CASCADE"))
    previous_commit_id: Mapped[int | None] = mapped_column(ForeignKey("commit.id", ondelete="CASCADE"),
                                                           nullable=True)
    state: Mapped[AlertState] = mapped_column(Vocabulary(AlertState, 16))
    kind: Mapped[AlertKind] = mapped_column(Vocabulary(AlertKind, 16))  # what its findings say
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class AlertNote(Base):
    """What a person (or the grouping, as author ``kernelwatch``) said about an alert, and the state change."""

    __tablename__ = "alert_note"
    __table_args__ = (Index("ix_alert_note_alert", "alert_id"), one_of("state_from", AlertState),
                      one_of("state_to", AlertState, nullable=True))
    id: Mapped[int] = mapped_column(Id, primary_key=True)
    alert_id: Mapped[int] = mapped_column(ForeignKey("alert.id", ondelete="CASCADE"))
    author: Mapped[str] = mapped_column(String(200))
    text: Mapped[str] = mapped_column(Text, default="")
    state_from: Mapped[AlertState] = mapped_column(Vocabulary(AlertState, 16))
    # None: a note, no state change
    state_to: Mapped[AlertState | None] = mapped_column(Vocabulary(AlertState, 16), nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class AlertNotification(Base):
    """An alert's announcement in one chat channel (Slack): the message's id once posted, and how far delivery
    has got. ``state`` is pending (to send, or a retry waiting for ``next_attempt_at``), sent, or failed (given up,
    ``last_error`` says why). Thread replies follow the alert's notes (``note_cursor``: the last note replied) and
    its bisection verdicts (``replied_jobs``), each sent once; ``rendered`` is the digest of what the top-level
    message shows, so it is edited only when that changes. ``revision`` grows with every event marked, so a
    delivery that ran while a new event arrived knows it is not done (migration 0009)."""

    __tablename__ = "alert_notification"
    __table_args__ = (UniqueConstraint("alert_id", "channel"),
                      Index("ix_alert_notification_due", "state", "next_attempt_at"),
                      one_of("state", NotificationState))
    id: Mapped[int] = mapped_column(Id, primary_key=True)
    alert_id: Mapped[int] = mapped_column(ForeignKey("alert.id", ondelete="CASCADE"))
    channel: Mapped[str] = mapped_column(String(200))  # as configured: "#perf" or an id
    channel_id: Mapped[str | None] = mapped_column(String(64), nullable=True)  # as Slack answered the post
    message_ts: Mapped[str | None] = mapped_column(String(32), nullable=True)
    state: Mapped[NotificationState] = mapped_column(Vocabulary(NotificationState, 16))
    attempts: Mapped[int] = mapped_column(Integer, default=0)  # failures since the last success
    last_error: Mapped[str | None] = mapped_column(Text, nullable=True)
    next_attempt_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    claimed_until: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    revision: Mapped[int] = mapped_column(Integer, default=0)
    note_cursor: Mapped[int] = mapped_column(BigInteger, default=0)
    replied_jobs: Mapped[list[int]] = mapped_column(JSON, default=list)
    rendered: Mapped[str | None] = mapped_column(String(64), nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    sent_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class BisectJob(Base):
    """Runs scheduled between a good and a bad commit until one commit is isolated (``purpose`` bisect), or
    base and head re-run interleaved until their samples decide (``purpose`` confirm)."""

    __tablename__ = "bisect_job"
    __table_args__ = (Index("ix_bisect_job_finding", "finding_id"), Index("ix_bisect_job_state", "state"),
                      Index("ix_bisect_job_series", "series_id"), one_of("state", JobState),
                      one_of("purpose", JobPurpose))
    id: Mapped[int] = mapped_column(Id, primary_key=True)
    # A job follows a change on a series; the finding row is replaced each time the change moves to another
    # commit, so the job points at the newest one and outlives the old ones.
    series_id: Mapped[int] = mapped_column(ForeignKey("series.id", ondelete="CASCADE"))
    finding_id: Mapped[int | None] = mapped_column(ForeignKey("finding.id", ondelete="SET NULL"), nullable=True)
    repository_id: Mapped[int] = mapped_column(ForeignKey("repository.id", ondelete="CASCADE"))
    good_commit_sha: Mapped[str] = mapped_column(String(40))
    bad_commit_sha: Mapped[str] = mapped_column(String(40))
    hardware: Mapped[str] = mapped_column(String(64))  # the runner queue's suffix: runner.<hardware>
    state: Mapped[JobState] = mapped_column(Vocabulary(JobState, 16))
    purpose: Mapped[JobPurpose] = mapped_column(Vocabulary(JobPurpose, 16))
    runs_requested: Mapped[list[str]] = mapped_column(JSON, default=list)  # shas whose runs were scheduled
    culprit_sha: Mapped[str | None] = mapped_column(String(40), nullable=True)
    message: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class ApiToken(Base):
    """A credential for the HTTP API. Only the sha256 of its secret is kept: the token is shown once, at creation;
    ``prefix`` finds the row and names the token in listings without revealing anything that authenticates."""

    __tablename__ = "api_token"
    __table_args__ = (Index("ix_api_token_name", "name"),)
    id: Mapped[int] = mapped_column(Id, primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    scopes: Mapped[list[str]] = mapped_column(JSON)  # submit | triage | admin
    prefix: Mapped[str] = mapped_column(String(16), unique=True)
    secret_hash: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    last_used_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class WebhookDelivery(Base):
    """One GitHub webhook delivery, stored once by its X-GitHub-Delivery id so that a redelivery does nothing;
    the task that acts on it reads the payload from here (tasks take ids)."""

    __tablename__ = "webhook_delivery"
    __table_args__ = (Index("ix_webhook_delivery_state", "state"),
                      Index("ix_webhook_delivery_body_sha256", "body_sha256", unique=True),
                      one_of("state", DeliveryState))
    id: Mapped[int] = mapped_column(Id, primary_key=True)
    delivery_uid: Mapped[str] = mapped_column(String(100), unique=True)
    # The signed body's digest: the delivery id is not signed, so the same body under another id is a replay.
    body_sha256: Mapped[str | None] = mapped_column(String(64), nullable=True)
    event: Mapped[str] = mapped_column(String(64))
    payload: Mapped[dict[str, Any]] = mapped_column(JSON)
    # A failed enqueue stays received; a delivery whose handling failed DELIVERY_ATTEMPTS times (GitHub or the
    # database unavailable) is failed: dead-lettered, retried by hand.
    state: Mapped[DeliveryState] = mapped_column(Vocabulary(DeliveryState, 16))
    outcome: Mapped[str | None] = mapped_column(Text, nullable=True)  # what the task did with it, for people
    received_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    processed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    attempts: Mapped[int] = mapped_column(Integer, default=0, server_default=text("0"))  # handling started
    attempted_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    last_error: Mapped[str | None] = mapped_column(Text, nullable=True)


class PullRequest(Base):
    """A pull request the hook follows: its head against its merge-base, and what was posted about it (one
    comment and one check run per head, updated in place)."""

    __tablename__ = "pull_request"
    # The two sha indexes: every ingested run asks whether its commit is a tracked head or merge-base.
    __table_args__ = (UniqueConstraint("repository", "number"), Index("ix_pull_request_head", "head_sha"),
                      Index("ix_pull_request_merge_base", "merge_base_sha"), one_of("state", PullRequestState))
    id: Mapped[int] = mapped_column(Id, primary_key=True)
    repository: Mapped[str] = mapped_column(String(200))  # owner/name on GitHub (the base repository)
    number: Mapped[int] = mapped_column(Integer)
    clone_url: Mapped[str] = mapped_column(String(2000))  # the base repository's: runners fetch the head from it
    installation_id: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    base_ref: Mapped[str] = mapped_column(String(255))
    base_sha: Mapped[str] = mapped_column(String(40))  # the base branch's tip when last seen
    head_repository: Mapped[str] = mapped_column(String(200))  # another owner/name: a fork
    head_sha: Mapped[str] = mapped_column(String(40))
    merge_base_sha: Mapped[str | None] = mapped_column(String(40), nullable=True)
    state: Mapped[PullRequestState] = mapped_column(Vocabulary(PullRequestState, 16))  # waiting: a fork, unapproved
    approved_sha: Mapped[str | None] = mapped_column(String(40), nullable=True)  # a fork head a maintainer allowed
    comment_id: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    check_run_id: Mapped[int | None] = mapped_column(BigInteger, nullable=True)
    check_run_sha: Mapped[str | None] = mapped_column(String(40), nullable=True)
    reported_key: Mapped[str | None] = mapped_column(String(64), nullable=True)  # digest of what was last posted
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    # GitHub's updated_at of the newest pull_request event acted on: an older one (late, or retried after a newer
    # one) is not acted on (service/pipeline/pull_requests.py).
    event_updated_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    # The interleaved sessions the current scheduling's tasks make, one per hardware (a task's runs are a session
    # named after its first run id, which is the task's: runners/worker.py run_id_for). With several hardware the
    # report waits for each of them (service/pipeline/pull_requests.py); None: scheduled before migration 0024.
    sessions: Mapped[list[str] | None] = mapped_column(JSON, nullable=True)
    # Those of the sessions whose task failed, each with the runner's message: reported as not measured beside
    # the other hardware's verdict. None: none failed (or scheduled before migration 0025).
    failed_sessions: Mapped[dict[str, str] | None] = mapped_column(JSON, nullable=True)


class StoredComparison(Base):
    """Two commits' runs compared on write (a commit against the commit measured before it), so that the commit
    page and GET /api/v1/compare read a page of a comparison instead of computing all of it. ``header`` is
    ``compare_table.to_json``'s document without its benchmarks (summary, geomeans, parameters, notes); the
    benchmarks are rows of ``stored_comparison_row``. ``key`` digests what it compared (each side's run ids,
    sorted) and the parameters: runs are immutable once stored, so a key that matches is never stale, and a
    commit that gains a run gets a new key (migration 0010)."""

    __tablename__ = "stored_comparison"
    __table_args__ = (Index("ix_stored_comparison_commits", "head_commit_id", "base_commit_id"),)
    id: Mapped[int] = mapped_column(Id, primary_key=True)
    key: Mapped[str] = mapped_column(String(64), unique=True)
    base_commit_id: Mapped[int] = mapped_column(ForeignKey("commit.id", ondelete="CASCADE"))
    head_commit_id: Mapped[int] = mapped_column(ForeignKey("commit.id", ondelete="CASCADE"))
    header: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


class StoredComparisonRow(Base):
    """One benchmark of a stored comparison: ``row`` is its ``to_json`` entry; the other columns are what a page
    filters and orders by, so that reading a page reads its rows only."""

    __tablename__ = "stored_comparison_row"
    __table_args__ = (UniqueConstraint("comparison_id", "position"), one_of("verdict", ComparisonVerdict))
    id: Mapped[int] = mapped_column(Id, primary_key=True)
    comparison_id: Mapped[int] = mapped_column(ForeignKey("stored_comparison.id", ondelete="CASCADE"))
    position: Mapped[int] = mapped_column(Integer)  # in the comparison's order: environment, metric, name
    verdict: Mapped[ComparisonVerdict] = mapped_column(Vocabulary(ComparisonVerdict, 16))
    size: Mapped[float] = mapped_column(Float)  # |log ratio|; SIZE_UNKNOWN where there is no ratio
    ratio: Mapped[float | None] = mapped_column(Float, nullable=True)
    p_value: Mapped[float | None] = mapped_column(Float, nullable=True)
    row: Mapped[dict[str, Any]] = mapped_column(JSON)
