"""Manifest → database, in one transaction, idempotently.

Submitting the same run (same ``run_id``, same content) again changes nothing and says so; the same
``run_id`` with different content is a Conflict. Rows shared between runs (repository, commit, environment,
benchmark, series) are created on first sight, tolerating a concurrent ingest that creates them first.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from typing import Any

from sqlalchemy.orm import Session

from kernelwatch.errors import AnotherProject, Conflict, InvalidInput
from runners.gitrepo import GitError, check_remote_location
from service.contract import ArtifactInfo, BenchmarkResult, Manifest
from service.contract.manifest import UNSET_IDENTITY
from service.detect.summary import summarize_many
from service.pipeline.identity import environment_fingerprint, manifest_digest, series_key, versioned_series_key
from service.pipeline.result_roofline_rows import (
    ROOFLINE_COLUMNS,
    efficiency_results,
    roofline_columns,
    roofline_figures,
    roofline_times,
    run_roof,
)
from service.store import ingest_rows
from service.store.ingest_rows import get_or_create
from service.store.models import Artifact, Benchmark, Commit, Environment, Repository, ResultArtifact, Run, Series
from service.store.runs import run_named


@dataclass(frozen=True)
class IngestOutcome:
    run_id: int
    created: bool
    series_ids: list[int] = field(default_factory=list)  # series that received a new ok result
    captured_result_ids: list[int] = field(default_factory=list)  # new results with artifacts to parse


def _benchmark_ids(session: Session, results: Sequence[BenchmarkResult]) -> dict[tuple[str, str, str], int]:
    """The benchmark id of every (suite, name, params_key) the results name: looked up in batches, the few
    missing ones created (first sight)."""
    first: dict[tuple[str, str, str], BenchmarkResult] = {}
    for r in results:
        first.setdefault((r.suite, r.name, r.params_key()), r)
    ids = ingest_rows.benchmark_ids(session, list(first))
    for key, r in first.items():
        if key not in ids:
            ids[key] = get_or_create(
                session, Benchmark, {"suite": r.suite, "name": r.name, "params_key": key[2]},
                partial(Benchmark, suite=r.suite, name=r.name, params_key=key[2], params=dict(r.params),
                        unit=r.unit, direction=r.direction),
            ).id
    return ids


def _series_ids(session: Session, repository_id: int, environment_id: int,
                wanted: dict[str, BenchmarkResult]) -> dict[str, int]:
    """The series id of every key, looked up in batches; the missing ones (first sight) created, with their
    benchmarks."""
    ids = ingest_rows.series_ids(session, list(wanted))
    missing = {key: r for key, r in wanted.items() if key not in ids}
    if missing:
        benchmark_ids = _benchmark_ids(session, list(missing.values()))
        for key, r in missing.items():
            build = partial(Series, key=key, repository_id=repository_id,
                            benchmark_id=benchmark_ids[(r.suite, r.name, r.params_key())],
                            environment_id=environment_id, metric=r.metric, unit=r.unit, direction=r.direction,
                            benchmark_version=r.benchmark_version)
            ids[key] = get_or_create(session, Series, {"key": key}, build).id
    return ids


def _versioned_keys(session: Session, keys: list[str], results: Sequence[BenchmarkResult]) -> list[str]:
    """Each result's series key, its benchmark's version considered: a series belongs to the version that first
    arrived for it (or adopted it, when it was stored before versions were), and a result of another version of
    the benchmark goes to a series of that version's own: an edited benchmark starts a new history rather than
    a step. A result without a version carries on in the series as it is."""
    asked = sorted({k for k, r in zip(keys, results, strict=True) if r.benchmark_version is not None})
    versions = ingest_rows.series_versions(session, asked)
    out = []
    adopt: dict[str, str] = {}
    for key, r in zip(keys, results, strict=True):
        version, stored = r.benchmark_version, versions.get(key)
        if version is not None and key in versions and stored is None:
            adopt[key] = version  # a series from before versions: the first version measured takes it over
        out.append(versioned_series_key(key, version) if version is not None and stored not in (None, version)
                   else key)
    by_version: dict[str, list[str]] = {}
    for key, version in adopt.items():
        by_version.setdefault(version, []).append(key)
    for version, adopted in by_version.items():  # one UPDATE per version and chunk, not one per series
        ingest_rows.adopt_version(session, sorted(adopted), version)  # only where still unclaimed
    return out


def _link_artifacts(session: Session, result_id: int, artifacts: list[ArtifactInfo]) -> None:
    now = datetime.now(UTC)
    seen: set[tuple[int, str]] = set()
    for info in artifacts:
        artifact = get_or_create(
            session, Artifact, {"sha256": info.sha256},
            partial(Artifact, sha256=info.sha256, kind=info.kind, size=info.size, created_at=now),
        )
        # Bytes retention had removed are back: submit checks every listed artifact is in the store first.
        if artifact.pruned_at is not None:
            artifact.pruned_at = None
        if (artifact.id, info.name) not in seen:  # the same bytes under the same name, listed twice
            seen.add((artifact.id, info.name))
            session.add(ResultArtifact(result_id=result_id, artifact_id=artifact.id, name=info.name))


log = logging.getLogger(__name__)

RESULT_COLUMNS = ("id", "run_id", "series_id", "status", "message", "samples", "sample_count", "median", "mean",
                  "stddev", "minimum", "maximum", "compile_time_s", "flops", "bytes_accessed", "max_abs_error",
                  "cost", *ROOFLINE_COLUMNS)


def another_project(stored: Sequence[str], roots: Sequence[str]) -> bool:
    """Whether a history with these root commits is another project than the one stored under its name: both
    known and sharing none (a shallow clone knows none, and a history merged from two projects shares one)."""
    return bool(stored) and bool(roots) and not set(stored) & set(roots)


def another_project_message(name: str, stored: Sequence[str], roots: Sequence[str]) -> str:
    return (f"repository {name!r} in this store is another project (its first commit {min(stored)[:12]}, this "
            f"one's {min(roots)[:12]}): give this one a name of its own (kernelwatch run/ci --repository-name NAME, "
            "or name = 'NAME' in its kernelwatch.toml)")


def _same_project(repository: Repository, roots: Sequence[str]) -> None:
    """AnotherProject (a 409) where the run's history is another project than the one stored under its name; else
    its roots are kept with the stored ones (a repository stored before roots were recorded takes the first given)."""
    if another_project(repository.first_commits, roots):
        raise AnotherProject(another_project_message(repository.name, repository.first_commits, roots))
    merged = sorted({*repository.first_commits, *roots})
    if merged != sorted(repository.first_commits):
        repository.first_commits = merged


def ingest_manifest(session: Session, manifest: Manifest) -> IngestOutcome:
    """Store one validated manifest; the caller owns the transaction (commit or roll back as a whole)."""
    payload = manifest.model_dump(mode="json")
    # Optional fields added after runs were first stored are digested only when set, as they were before the
    # fields existed: a run stored then and submitted again must not conflict.
    if payload["environment"]["calibration"] is None:
        del payload["environment"]["calibration"]
    for name in UNSET_IDENTITY:
        if payload["environment"][name] in (None, ""):
            del payload["environment"][name]
    for optional in ("host_health", "round"):
        if payload[optional] is None:
            del payload[optional]
    if not payload["repository"]["first_commits"]:
        del payload["repository"]["first_commits"]
    for result in payload["results"]:
        if result["benchmark_version"] is None:
            del result["benchmark_version"]
    digest = manifest_digest(payload)
    existing = run_named(session, manifest.run_id)
    if existing is not None:
        if existing.manifest_digest != digest:
            raise Conflict(f"run {manifest.run_id} was already submitted with different content")
        return IngestOutcome(run_id=existing.id, created=False)

    repo_info = manifest.repository
    try:
        # The repository's URL is what confirmations and bisections clone: a location KernelWatch would not open
        # (ext::, fd::, an option) was stored and failed later, in a log.
        check_remote_location(repo_info.url)
    except GitError as exc:
        raise InvalidInput(f"repository.url: {exc}") from None
    repository = get_or_create(
        session, Repository, {"name": repo_info.name},
        lambda: Repository(name=repo_info.name, url=repo_info.url, default_branch=repo_info.default_branch,
                           first_commits=list(repo_info.first_commits)),
    )
    _same_project(repository, repo_info.first_commits)
    c = manifest.commit
    commit = get_or_create(
        session, Commit, {"repository_id": repository.id, "sha": c.sha},
        lambda: Commit(repository_id=repository.id, sha=c.sha, parents=list(c.parents), author=c.author,
                       authored_at=c.authored_at, subject=c.subject, position=c.position),
    )
    env = manifest.environment
    fingerprint = environment_fingerprint(env.identity())
    environment = get_or_create(
        session, Environment, {"fingerprint": fingerprint},
        lambda: Environment(fingerprint=fingerprint, backend=env.backend, device_kind=env.device_kind,
                            device_count=env.device_count, details=env.identity()),
    )
    run = Run(
        run_uid=manifest.run_id, manifest_digest=digest, commit_id=commit.id, environment_id=environment.id,
        branch=manifest.branch, trigger=manifest.trigger, pr_number=manifest.pr_number, status=manifest.status,
        started_at=manifest.started_at, finished_at=manifest.finished_at, host_details=dict(env.extra),
        calibration=env.calibration.model_dump(exclude_defaults=True) if env.calibration is not None else None,
        host_health=manifest.host_health.model_dump() if manifest.host_health is not None else None,
        round_session=manifest.round.session if manifest.round is not None else None,
        round_index=manifest.round.index if manifest.round is not None else None,
    )
    session.add(run)
    session.flush()

    # Each wall-time result's roofline figures, and its efficiency series' result: analysis done once, here,
    # so that no page computes it. One table lookup per run; a few float operations per result.
    stats = summarize_many([r.samples for r in manifest.results])
    hardware = run_roof(env)
    times = roofline_times(manifest.results, [s.median for s in stats])
    figures = [roofline_figures(hardware, r, median) for r, (median, _) in zip(manifest.results, times, strict=True)]
    above = [f"{r.suite}/{r.name} {r.params_key()}" for r, f in zip(manifest.results, figures, strict=True)
             if f is not None and f.above]
    if above:  # stored as each result's roofline_above; said here too, since it is the roof's defect, not theirs
        log.warning("run %s: %d result(s) measured faster than their roof allows (%s): the roof (%s) does not bound "
                    "them", manifest.run_id, len(above), ", ".join(above[:5]) + (", ..." if len(above) > 5 else ""),
                    next(f.peak_source for f in figures if f is not None and f.above))
    derived = efficiency_results(hardware, manifest.results, figures, [samples for _, samples in times])
    results = [*manifest.results, *derived]
    figures += [None] * len(derived)
    stats += summarize_many([r.samples for r in derived])

    # Shared rows in batches, then every result in one multi-row INSERT: a run of thousands of results costs a
    # few round trips, not several per result.
    keys = _versioned_keys(session, [series_key(repository.name, r.suite, r.name, r.params_key(), r.metric,
                                                fingerprint) for r in results], results)
    wanted: dict[str, BenchmarkResult] = {}
    for key, r in zip(keys, results, strict=True):
        wanted.setdefault(key, r)
    series_ids = _series_ids(session, repository.id, environment.id, wanted)
    rows: list[dict[str, Any]] = []
    for key, r, stat, figure in zip(keys, results, stats, figures, strict=True):
        rows.append(dict(
            run_id=run.id, series_id=series_ids[key], status=r.status, message=r.message, samples=list(r.samples),
            sample_count=stat.count, median=stat.median, mean=stat.mean, stddev=stat.stddev,
            minimum=stat.minimum, maximum=stat.maximum, compile_time_s=r.compile_time_s, flops=r.flops,
            bytes_accessed=r.bytes_accessed, max_abs_error=r.max_abs_error, cost=dict(r.cost),
            **roofline_columns(figure),
        ))
    result_ids = ingest_rows.insert_results(session, rows, RESULT_COLUMNS)  # COPY on PostgreSQL, in these columns
    captured: list[int] = []
    for result_id, r in zip(result_ids, results, strict=True):
        if r.artifacts:
            _link_artifacts(session, result_id, r.artifacts)
            captured.append(result_id)
    touched = {series_ids[key] for key, r in zip(keys, results, strict=True) if r.status == "ok"}
    session.flush()
    return IngestOutcome(run_id=run.id, created=True, series_ids=sorted(touched), captured_result_ids=captured)
