"""The tables. Migrations never import this module; the drift test compares it with what they create."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

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


class Repository(Base):
    __tablename__ = "repository"
    id: Mapped[int] = mapped_column(Id, primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    url: Mapped[str] = mapped_column(String(2000))
    default_branch: Mapped[str] = mapped_column(String(255), default="main")


class Commit(Base):
    __tablename__ = "commit"
    __table_args__ = (UniqueConstraint("repository_id", "sha"),)
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
    __table_args__ = (Index("ix_run_commit_env", "commit_id", "environment_id"),)
    id: Mapped[int] = mapped_column(Id, primary_key=True)
    run_uid: Mapped[str] = mapped_column(String(64), unique=True)
    manifest_digest: Mapped[str] = mapped_column(String(64))
    commit_id: Mapped[int] = mapped_column(ForeignKey("commit.id", ondelete="CASCADE"))
    environment_id: Mapped[int] = mapped_column(ForeignKey("environment.id"))
    branch: Mapped[str | None] = mapped_column(String(255), nullable=True)
    trigger: Mapped[str] = mapped_column(String(16))
    pr_number: Mapped[int | None] = mapped_column(Integer, nullable=True)
    status: Mapped[str] = mapped_column(String(16))
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    finished_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    host_details: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)


class Benchmark(Base):
    __tablename__ = "benchmark"
    __table_args__ = (UniqueConstraint("suite", "name", "params_key"),)
    id: Mapped[int] = mapped_column(Id, primary_key=True)
    suite: Mapped[str] = mapped_column(String(200))
    name: Mapped[str] = mapped_column(String(200))
    params_key: Mapped[str] = mapped_column(Text)
    params: Mapped[dict[str, Any]] = mapped_column(JSON)
    unit: Mapped[str] = mapped_column(String(32))
    direction: Mapped[str] = mapped_column(String(20))


class Series(Base):
    """One line on a chart: a benchmark's metric in one environment, identified by a content hash."""

    __tablename__ = "series"
    id: Mapped[int] = mapped_column(Id, primary_key=True)
    key: Mapped[str] = mapped_column(String(64), unique=True)
    repository_id: Mapped[int] = mapped_column(ForeignKey("repository.id", ondelete="CASCADE"))
    benchmark_id: Mapped[int] = mapped_column(ForeignKey("benchmark.id"))
    environment_id: Mapped[int] = mapped_column(ForeignKey("environment.id"))
    metric: Mapped[str] = mapped_column(String(200))
    repository: Mapped[Repository] = relationship(lazy="joined")
    benchmark: Mapped[Benchmark] = relationship(lazy="joined")
    environment: Mapped[Environment] = relationship(lazy="joined")


class Result(Base):
    __tablename__ = "result"
    __table_args__ = (UniqueConstraint("run_id", "series_id"), Index("ix_result_series", "series_id"))
    id: Mapped[int] = mapped_column(Id, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("run.id", ondelete="CASCADE"))
    series_id: Mapped[int] = mapped_column(ForeignKey("series.id"))
    status: Mapped[str] = mapped_column(String(16))
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


class ResultArtifact(Base):
    """Which artifacts a result captured, under the names they had where they were captured."""

    __tablename__ = "result_artifact"
    __table_args__ = (Index("ix_result_artifact_artifact", "artifact_id"),)
    result_id: Mapped[int] = mapped_column(ForeignKey("result.id", ondelete="CASCADE"), primary_key=True)
    artifact_id: Mapped[int] = mapped_column(ForeignKey("artifact.id"), primary_key=True)
    name: Mapped[str] = mapped_column(String(255), primary_key=True)


class Finding(Base):
    """A detector's verdict that a series changed at a commit, stamped with the detector's name and version."""

    __tablename__ = "finding"
    __table_args__ = (
        UniqueConstraint("series_id", "commit_id", "detector"),
        Index("ix_finding_commit", "commit_id"),
    )
    id: Mapped[int] = mapped_column(Id, primary_key=True)
    series_id: Mapped[int] = mapped_column(ForeignKey("series.id", ondelete="CASCADE"))
    commit_id: Mapped[int] = mapped_column(ForeignKey("commit.id", ondelete="CASCADE"))
    previous_commit_id: Mapped[int | None] = mapped_column(ForeignKey("commit.id"), nullable=True)
    detector: Mapped[str] = mapped_column(String(100))
    detector_version: Mapped[int] = mapped_column(Integer)
    kind: Mapped[str] = mapped_column(String(16))  # time | static | numerics
    direction: Mapped[str] = mapped_column(String(16))  # regression | improvement
    magnitude: Mapped[float] = mapped_column(Float)  # relative change of the level, after/before - 1
    confidence: Mapped[float] = mapped_column(Float)  # step size in units of the series' own noise
    value_before: Mapped[float] = mapped_column(Float)
    value_after: Mapped[float] = mapped_column(Float)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    attribution: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)


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
    parser_version: Mapped[int] = mapped_column(Integer)
