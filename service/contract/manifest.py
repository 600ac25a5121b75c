"""Version 1 of the result manifest a runner uploads after running a suite at one commit.

The manifest is validated here, at the boundary: a wrong version, a missing field or an impossible value is
refused with a message that names the field (and, inside a result, the result), before anything is stored.
Hostile input is refused the same way: more than MAX_RESULTS results, NaN or infinite numbers, text no database
can hold (NUL, lone surrogates), control characters anywhere but in free text, numbers past their columns' range,
and times no reader can convert back. Artifact names are plain file names, never paths.

The published JSON schema (manifest.v1.schema.json, `python -m service.contract.export`) states every one of these
rules that JSON Schema can state, the validators' included (see _ManifestSchema and _Publish), and names the few it
cannot in its description (Manifest's docstring); tests/unit/test_manifest_schema_parity.py holds the two to that.
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Sequence
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    GetJsonSchemaHandler,
    Strict,
    ValidationError,
    WithJsonSchema,
    field_validator,
    model_validator,
)
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import CoreSchema, core_schema

from kernelwatch.errors import InvalidInput
from kernelwatch.memory_hierarchy import MAX_CACHE_LEVELS, MAX_POINTS

FORMAT_VERSION = 1

# The values of kernelwatch/vocabulary.py's Polarity, ResultStatus, RunStatus and Trigger, as Literals: a strict
# model takes a string for a Literal, where it would want an enum member for an enum (tests/unit/test_vocabulary.py
# holds the two to each other). A result's polarity is its "direction" in the manifest.
Polarity = Literal["lower_is_better", "higher_is_better"]
ResultStatus = Literal["ok", "failed"]
RunStatus = Literal["complete", "partial", "failed"]
# "schedule": a run of a tracked branch's tip made by `kernelwatch beat`.
Trigger = Literal["push", "pr", "manual", "bisect", "confirm", "schedule"]

_SHA_PATTERN = r"^[0-9a-f]{40}$"
_NAME_PATTERN = r"^[A-Za-z0-9_.\-]{1,200}$"
# A branch as git names one: no leading '-' (git would read an option), no space or control character (git refuses
# them in a ref name); anything else git allows, Unicode included.
BRANCH_PATTERN = r"^[^\s\x00-\x1f\x7f-][^\s\x00-\x1f\x7f]*$"
# The same rule as characters, for what makes a name (runners/local.py repository_name) or checks one before a run
# (runners/project_file.py name_problem): a repository's name, a benchmark's suite and name.
NAME_CHARACTERS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")
NAME_MAX_LENGTH = 200

# A real suite has hundreds of results; a run's results are stored in one transaction, at ~3,000 a second, so
# this bounds one submission to seconds. More is refused up front, before any of them is validated.
MAX_RESULTS = 10_000
# The most a manifest document may weigh, read from a request or a file (the API's app.config
# KERNELWATCH_MAX_MANIFEST_BYTES overrides it for a request).
MAX_MANIFEST_BYTES = 64 * 1024 * 1024
_INT32_MAX = 2**31 - 1  # commit positions and pull request numbers are 32-bit columns
_INT64_MAX = 2**63 - 1
# Times outside these years cannot be read back once shifted to UTC (Python's datetime stops at years 1 and 9999).
_YEARS = (1900, 9000)
MAX_PARAMS = 64
_MAX_DEPTH = 6  # containers nest 4 deep in a valid manifest (results.N.artifacts.M); deeper is refused unwalked
# Text no database column can hold (PostgreSQL refuses NUL; a lone surrogate is not UTF-8), in any field.
_UNSTORABLE = re.compile(r"[\x00\ud800-\udfff]")
# Control characters (C0, DEL, C1): refused in names, versions, flags and parameters, where they would reach a
# header, a table or a terminal; free text (a failure's traceback, a commit subject) keeps them.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
# The same two rules as the published schema states them: patterns it must not match (searched, not anchored, so
# that no reader's idea of where "$" matches matters). Lone surrogates it cannot state (Manifest's docstring).
_SCHEMA_CONTROL = {"pattern": r"[\x00-\x1f\x7f-\x9f]"}
_SCHEMA_NUL = {"pattern": r"\x00"}

# A time as ISO 8601 text the way Python's isoformat writes it (RFC 3339 with the offset optional), each part in
# its range and the year in _YEARS: what the parser reads and what the schema publishes, one pattern. pydantic on
# its own also read "2026-02-01", "2026-02-01 00:00", "+0000" and Unix times (numbers, or digits as text).
_TIMESTAMP = (r"(19[0-9]{2}|[2-8][0-9]{3}|9000)-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])"
              r"T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{1,9})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])?")
_TIMESTAMP_TEXT = re.compile(_TIMESTAMP)
_OFFSET_AT_END = r"(Z|[+-][0-9]{2}:[0-9]{2})$"


def _timestamp_text(value: Any) -> Any:
    if isinstance(value, datetime):  # a runner building the model in Python
        return value
    if isinstance(value, str) and _TIMESTAMP_TEXT.fullmatch(value):
        return value
    shown = _shown(value) if isinstance(value, str) else type(value).__name__
    raise ValueError(f"{shown} is not a time written as YYYY-MM-DDTHH:MM:SS, a fraction of a second and a UTC "
                     f"offset (Z or +HH:MM) optional, in the years {_YEARS[0]}..{_YEARS[1]}")


def _plausible_time(value: datetime) -> datetime:
    if not _YEARS[0] <= value.year <= _YEARS[1]:
        raise ValueError(f"year {value.year} is outside {_YEARS[0]}..{_YEARS[1]}")
    return value


class _Publish:
    """Annotation metadata: a rule one of this module's validators enforces on a value, added to the value's
    published JSON schema (pydantic publishes only the constraints it enforces itself)."""

    def __init__(self, keywords: dict[str, Any]) -> None:
        self.keywords = keywords

    def __get_pydantic_json_schema__(self, schema: CoreSchema, handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        json_schema = handler(schema)
        json_schema.update(self.keywords)
        return json_schema


# Lax (strict models read only datetime objects in Python), but only from text of the one form, or a datetime.
# Published without RFC 3339's "date-time" format, which would refuse a time without an offset.
Timestamp = Annotated[datetime, Strict(False), BeforeValidator(_timestamp_text), AfterValidator(_plausible_time),
                      WithJsonSchema({
                          "type": "string", "pattern": f"^{_TIMESTAMP}$", "not": _SCHEMA_CONTROL,
                          "description": "A time as ISO 8601 text, YYYY-MM-DDTHH:MM:SS, a fraction of a second and a "
                                         "UTC offset (Z or +HH:MM) optional, in the years 1900..9000",
                      })]
# Text that keeps its control characters (a traceback, a commit subject); NUL it cannot, as no text can.
FreeText = Annotated[str, _Publish({"not": _SCHEMA_NUL})]


class ManifestError(InvalidInput):
    """A manifest the service cannot accept; the message lists every problem with its field path."""


class _Strict(BaseModel):
    # Unknown keys are refused rather than dropped: a typo in a runner must not silently lose data. No coercion
    # either, as the schema allows none: a number that arrives as text ("0.1", "7") or a boolean is a runner's bug.
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


def _shas(what: str, values: list[str]) -> list[str]:
    for sha in values:
        if len(sha) != 40 or any(c not in "0123456789abcdef" for c in sha):
            raise ValueError(f"{what} {_shown(sha)} is not a 40-character lowercase hex sha")
    return values


class RepositoryInfo(_Strict):
    name: str = Field(pattern=_NAME_PATTERN)
    url: str = Field(min_length=1, max_length=2000)
    default_branch: str = Field(default="main", min_length=1, max_length=255, pattern=BRANCH_PATTERN)
    # The root commits the measured commit descends from (runners/gitrepo.py first_commits): two projects given
    # one name (two folders called "kernels") are told apart by them at ingest. Empty: not known (a shallow clone).
    first_commits: list[Annotated[str, _Publish({"pattern": _SHA_PATTERN})]] = Field(default_factory=list,
                                                                                  max_length=64)

    @field_validator("first_commits")
    @classmethod
    def _first_commits_are_shas(cls, value: list[str]) -> list[str]:
        return _shas("first commit", value)


class CommitInfo(_Strict):
    sha: str = Field(pattern=_SHA_PATTERN)
    parents: list[Annotated[str, _Publish({"pattern": _SHA_PATTERN})]] = Field(default_factory=list, max_length=64)
    author: FreeText = Field(default="", max_length=500)
    authored_at: Timestamp
    subject: FreeText = Field(default="", max_length=2000)
    # Number of first-parent ancestors: orders commits of one branch without asking git again.
    position: int = Field(ge=0, le=_INT32_MAX)

    @field_validator("parents")
    @classmethod
    def _parents_are_shas(cls, value: list[str]) -> list[str]:
        return _shas("parent", value)


class BandwidthPointInfo(_Strict):
    working_set_bytes: int = Field(ge=1, le=_INT64_MAX)
    bytes_per_s: float = Field(gt=0, allow_inf_nan=False)


class CacheLevelInfo(_Strict):
    name: str = Field(pattern=r"^L[1-9]$")
    size_bytes: int = Field(ge=1, le=_INT64_MAX)


class CalibrationInfo(_Strict):
    """What the runner's calibration micro-benchmark measured on its host (runners/calibrate.py): the roof of a
    host with no published figures. Optional, so that runners older than it, and accelerator hosts (which have
    published figures), still send valid version-1 manifests."""

    flops_per_s: float = Field(gt=0, allow_inf_nan=False)
    bytes_per_s: float = Field(gt=0, allow_inf_nan=False)
    dtype: str = Field(min_length=1, max_length=32)
    # The cache-aware roofline's (kernelwatch/memory_hierarchy.py), from runners that measure it: matmul FLOP/s of
    # every dtype measured, the streaming bandwidth at a ladder of working sets, and the caches those cross.
    # Absent from older runners, whose one memory roof is bytes_per_s.
    flops_by_dtype: dict[Annotated[str, Field(pattern=r"^[a-z0-9_]{1,32}$")],
                         Annotated[float, Field(gt=0, allow_inf_nan=False)]] = Field(
        default_factory=dict, max_length=16)
    bandwidth: list[BandwidthPointInfo] = Field(default_factory=list, max_length=MAX_POINTS)
    caches: list[CacheLevelInfo] = Field(default_factory=list, max_length=MAX_CACHE_LEVELS)


class EnvironmentInfo(_Strict):
    backend: str = Field(min_length=1, max_length=64)
    device_kind: str = Field(min_length=1, max_length=200)
    device_count: int = Field(ge=1, le=65536)
    jax_version: str = Field(max_length=64)
    jaxlib_version: str = Field(max_length=64)
    xla_flags: FreeText = Field(default="", max_length=10000)
    cpu_model: str = Field(default="", max_length=500)
    host_isa: str = Field(default="", max_length=200)
    python_version: str = Field(default="", max_length=64)
    # Optional facts of accelerator hosts (empty where they do not apply), all part of the identity.
    topology: str = Field(default="", max_length=500)
    platform_version: str = Field(default="", max_length=500)  # the runtime's own: CUDA driver, libtpu build
    libtpu_version: str = Field(default="", max_length=64)
    libtpu_init_args: FreeText = Field(default="", max_length=10000)
    # Facts recorded for people but not part of the identity of an environment (hostname, dirty checkout...).
    extra: dict[str, FreeText] = Field(default_factory=dict)
    # Measured afresh by every run, so it differs from run to run on the same host: kept out of the identity, or
    # every run would start a series of its own.
    calibration: CalibrationInfo | None = None
    # CPU noise reduction a runner was asked for (runners/local.py RunRequest): the CPUs the benchmark process was
    # pinned to ("0-3,6"), and the size of XLA's CPU thread pool it was held to. Both change what is measured, so
    # both are identity; unset they are left out of it, so environments from before them keep their fingerprints.
    cpu_affinity: str = Field(default="", max_length=2000,
                              pattern=r"^([0-9]{1,5}(-[0-9]{1,5})?(,[0-9]{1,5}(-[0-9]{1,5})?)*)?$")  # ASCII digits
    cpu_threads: int | None = Field(default=None, ge=1, le=65536)
    # glibc's mmap threshold in the benchmark process, where the runner set it (`--keep-pages`): large outputs then
    # reuse freed pages instead of faulting fresh ones in on every call (bench/fresh_pages.py: about 3x on a 32 MiB
    # softmax output), so it is identity too, left out while unset.
    malloc_mmap_threshold: int | None = Field(default=None, ge=0, le=2**62)
    # A run of a working copy rather than of its commit (`run --working-tree`, or a checkout found edited): the
    # sha256 of the files measured (runners/gitrepo.py tree_digest). Identity, so such a run is an environment of
    # its own and never a point of the commit's history (nor of its spread between runs), while the rounds of one
    # working copy share it; left out of the identity while unset.
    working_tree: str = Field(default="", pattern=r"^([0-9a-f]{64})?$")

    def identity(self) -> dict[str, Any]:
        """What makes two measurements comparable; the environment fingerprint is a hash of this."""
        unset = {name for name in UNSET_IDENTITY if getattr(self, name) in (None, "")}
        return self.model_dump(exclude={"extra", "calibration", *unset})


# Identity fields added after the first environments were stored: left out of the identity (and of a run's digest,
# service/pipeline/ingest.py) while unset, so that everything stored before them keeps its fingerprint.
UNSET_IDENTITY = ("cpu_affinity", "cpu_threads", "malloc_mmap_threshold", "working_tree")


class GpuHealthInfo(_Strict):
    """One GPU's clocks and throttle reasons as NVML read them when the run's last benchmark ended."""

    index: int = Field(ge=0, le=65535)
    sm_clock_mhz: int | None = Field(default=None, ge=0, le=100_000)
    mem_clock_mhz: int | None = Field(default=None, ge=0, le=100_000)
    throttle_reasons: list[Annotated[str, Field(pattern=r"^[a-z0-9_]{1,64}$")]] = Field(default_factory=list,
                                                                                       max_length=64)


class HostHealthInfo(_Strict):
    """How healthy the host was while the run measured (runners/host_health.py): over the interval from before
    its first benchmark to after its last, the share of all CPU time the hypervisor stole and the share the host
    was busy, with the 1-minute load average and the CPU count at its end. Optional: runners older than it, and
    hosts without /proc/stat (macOS), send none."""

    steal_fraction: float = Field(ge=0, le=1, allow_inf_nan=False)
    busy_fraction: float = Field(ge=0, le=1, allow_inf_nan=False)
    cores: int = Field(ge=1, le=65536)
    load_1m: float | None = Field(default=None, ge=0, le=1e6, allow_inf_nan=False)
    gpus: list[GpuHealthInfo] = Field(default_factory=list, max_length=1024)

    @model_validator(mode="after")
    def _shares_add_up(self) -> HostHealthInfo:
        # Both are shares of the same interval's CPU time (rounded to 6 places each): together at most all of it.
        if self.steal_fraction + self.busy_fraction > 1 + 1e-5:
            raise ValueError(f"steal_fraction {self.steal_fraction} and busy_fraction {self.busy_fraction} add up "
                             "to more than all of the interval's CPU time")
        return self


class ArtifactInfo(_Strict):
    """A captured file, by digest: the bytes travel apart from the manifest (content-addressed)."""

    kind: str = Field(pattern=r"^[a-z0-9][a-z0-9\-]{0,31}$")
    # Only a file name, never a path: it is shown to people and must not name a place to write to.
    name: str = Field(pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.\-]{0,254}$")
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    size: int = Field(ge=0, le=_INT64_MAX)


# What _params_are_plain, _cost_is_finite and _samples_are_times enforce, as the schema states it.
_ParamName = Annotated[str, _Publish({"minLength": 1, "maxLength": 200})]
_ParamText = Annotated[str, _Publish({"maxLength": 2000})]
_Figure = Annotated[float, _Publish({"minimum": 0})]


class BenchmarkResult(_Strict):
    # _ok_has_samples, as the schema states it.
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, json_schema_extra={"allOf": [
        {"if": {"properties": {"status": {"const": "ok"}}},
         "then": {"required": ["samples"], "properties": {"samples": {"minItems": 1}}}},
        {"if": {"properties": {"status": {"const": "failed"}}},
         "then": {"required": ["message"], "properties": {"message": {"type": "string", "minLength": 1}}}},
    ]})

    suite: str = Field(pattern=_NAME_PATTERN)
    name: str = Field(pattern=_NAME_PATTERN)
    params: dict[_ParamName, _ParamText | int | float | bool] = Field(default_factory=dict, max_length=MAX_PARAMS)
    metric: str = Field(default="wall_time", pattern=_NAME_PATTERN)
    unit: str = Field(default="s", max_length=32)
    direction: Polarity = "lower_is_better"
    status: ResultStatus
    message: FreeText | None = Field(default=None, max_length=20000)
    samples: list[_Figure] = Field(default_factory=list, max_length=100000)
    compile_time_s: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    flops: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    bytes_accessed: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    max_abs_error: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    artifacts: list[ArtifactInfo] = Field(default_factory=list, max_length=10000)
    # XLA's cost analysis of the compiled program ("flops", "bytes accessed", "transcendentals"...).
    cost: dict[str, _Figure] = Field(default_factory=dict, max_length=64)
    # A hash of the benchmark's own code (runners/suite.py benchmark_version): an edited benchmark starts a series
    # of its own. Absent: unknown (an older runner, a source that could not be read), and the series carries on.
    benchmark_version: str | None = Field(default=None, pattern=r"^[0-9a-f]{16}$")

    @field_validator("params")
    @classmethod
    def _params_are_plain(cls, value: dict[str, str | int | float | bool]) -> dict[str, str | int | float | bool]:
        # Parameters are part of a series' identity and stored as JSON: names short and present, numbers JSON
        # can carry (NaN and infinities are not JSON), values short enough to show in a table.
        for key, item in value.items():
            if not 1 <= len(key) <= 200:
                raise ValueError(f"parameter name {_shown(key)} is not 1 to 200 characters")
            if isinstance(item, float) and not math.isfinite(item):
                raise ValueError(f"parameter {_shown(key)} is {item}, not a finite number")
            if isinstance(item, str) and len(item) > 2000:
                raise ValueError(f"parameter {_shown(key)} is longer than 2000 characters")
            if isinstance(item, int) and not isinstance(item, bool) and abs(item) > _INT64_MAX:
                raise ValueError(f"parameter {_shown(key)} is outside the 64-bit integer range")
        return value

    @field_validator("cost")
    @classmethod
    def _cost_is_finite(cls, value: dict[str, float]) -> dict[str, float]:
        for key, number in value.items():
            if not math.isfinite(number) or number < 0:
                raise ValueError(f"cost {_shown(key)} is {number}, not a finite non-negative number")
        return value

    @field_validator("samples")
    @classmethod
    def _samples_are_times(cls, value: list[float]) -> list[float]:
        for index, sample in enumerate(value):
            if not math.isfinite(sample):
                raise ValueError(f"sample {index} is {sample}, not a finite number")
            if sample < 0:
                raise ValueError(f"sample {index} is negative ({sample}); a duration cannot be")
        return value

    @model_validator(mode="after")
    def _ok_has_samples(self) -> BenchmarkResult:
        if self.status == "ok" and not self.samples:
            raise ValueError("a result with status 'ok' needs at least one sample")
        if self.status == "failed" and not self.message:
            raise ValueError("a failed result needs a message saying why")
        return self

    def params_key(self) -> str:
        """Canonical, order-independent text of the parameters."""
        return json.dumps(self.params, sort_keys=True, separators=(",", ":"))


class RoundInfo(_Strict):
    """Which round of which interleaved session made the run (runners/local.run_commits): runs of different
    commits with the same session and index were made back to back, so a drift of the host during the session
    lands on both alike, and a comparison pairs them."""

    session: str = Field(pattern=r"^[A-Za-z0-9_\-]{8,64}$")
    index: int = Field(ge=0, le=10_000)


class Manifest(_Strict):
    """The results of one run of a suite at one commit, as a runner uploads them (version 1 of the manifest).

    Besides what this schema states, the service refuses what JSON Schema cannot state: a key given twice in one
    object; an integer written as 1.0 or 1e2 where an integer is due, format_version included (to JSON Schema 1.0
    is the integer 1); an integer parameter past the 64-bit range, beyond +-(2**63 - 1) (the schema could bound
    it only by bounding every number); a string holding a lone surrogate (U+D800..U+DFFF); a timestamp naming a
    day its month does not have (the calendar's); finished_at earlier than started_at; two results with the same
    suite, name, parameters and metric; host_health's steal_fraction and busy_fraction adding up to more than 1.
    """

    # _consistent's first rule, as the schema states it: both times with a UTC offset, or neither.
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, json_schema_extra={"allOf": [
        {"if": {"properties": {"started_at": {"pattern": _OFFSET_AT_END}}},
         "then": {"properties": {"finished_at": {"pattern": _OFFSET_AT_END}}},
         "else": {"properties": {"finished_at": {"not": {"pattern": _OFFSET_AT_END}}}}},
    ]})

    format_version: Literal[1]
    run_id: str = Field(pattern=r"^[A-Za-z0-9_\-]{8,64}$")
    repository: RepositoryInfo
    commit: CommitInfo
    branch: str | None = Field(default=None, max_length=255, pattern=BRANCH_PATTERN)
    trigger: Trigger = "manual"
    pr_number: int | None = Field(default=None, ge=1, le=_INT32_MAX)
    environment: EnvironmentInfo
    started_at: Timestamp
    finished_at: Timestamp
    status: RunStatus
    results: list[BenchmarkResult] = Field(max_length=MAX_RESULTS)
    host_health: HostHealthInfo | None = None
    round: RoundInfo | None = None

    @model_validator(mode="after")
    def _consistent(self) -> Manifest:
        if (self.started_at.utcoffset() is None) != (self.finished_at.utcoffset() is None):
            raise ValueError("started_at and finished_at must both carry a UTC offset, or neither")
        if self.finished_at < self.started_at:
            raise ValueError("finished_at is before started_at")
        seen: set[tuple[str, str, str, str]] = set()
        for result in self.results:
            key = (result.suite, result.name, result.params_key(), result.metric)
            if key in seen:
                raise ValueError(f"result {result.suite}/{result.name} {result.params_key()} appears twice")
            seen.add(key)
        return self


def _shown(text: str, limit: int = 80) -> str:
    """Text quoted for a message: escaped, so that no control character or surrogate reaches whoever reads it."""
    clipped = text[:limit] + ("..." if len(text) > limit else "")
    return "'" + clipped.encode("unicode_escape").decode("ascii").replace("'", "\\'") + "'"


def _where(data: dict[str, Any], loc: Sequence[str | int]) -> str:
    """A field path for people, naming the result (suite/name) a path inside ``results`` points into."""
    parts = [str(part) if len(str(part)) <= 80 else _shown(str(part))[1:-1] for part in loc]  # a long key
    results = data.get("results")
    if len(loc) >= 2 and loc[0] == "results" and isinstance(loc[1], int) and isinstance(results, list) \
            and 0 <= loc[1] < len(results) and isinstance(results[loc[1]], dict):
        entry = results[loc[1]]
        suite, name = entry.get("suite"), entry.get("name")
        if isinstance(suite, str) and isinstance(name, str):
            parts[1] = f"{loc[1]} ({_shown(suite + '/' + name)[1:-1]})"
    return ".".join(parts) or "(manifest)"


# Problems a refusal names, at most: a list of a thousand entries each missing a field was a 45,000-character
# message (found by the parity test's random mutations); the count of the rest is said.
MAX_LISTED_PROBLEMS = 50


def _describe(error: ValidationError, data: dict[str, Any]) -> str:
    items = error.errors()
    lines = [f"{_where(data, item['loc'])}: {item['msg']}" for item in items[:MAX_LISTED_PROBLEMS]]
    if len(items) > MAX_LISTED_PROBLEMS:
        lines.append(f"... and {len(items) - MAX_LISTED_PROBLEMS} more")
    return "; ".join(lines)


def _is_free_text(path: tuple[str | int, ...]) -> bool:
    if len(path) == 2:
        return path in (("commit", "author"), ("commit", "subject"), ("environment", "xla_flags"),
                        ("environment", "libtpu_init_args"))
    return len(path) == 3 and (path[0] == "results" and path[2] == "message"
                               or path[:2] == ("environment", "extra"))


def _text_problem(data: dict[str, Any]) -> str | None:
    """The first string (a key or a value, anywhere in the document) that cannot be stored, or that carries a
    control character outside free text, described with its path; None when all are fine. Iterative, so a deeply
    nested document costs no recursion; a result's samples, the bulk of a manifest, are left to the model."""
    stack: list[tuple[tuple[str | int, ...], Any]] = [((), data)]
    while stack:
        path, value = stack.pop()
        if len(path) > _MAX_DEPTH and isinstance(value, dict | list):
            return f"{_where(data, path)}: nested deeper than a manifest goes"
        if isinstance(value, str):
            problem = _string_problem(value, free=_is_free_text(path))
            if problem:
                return f"{_where(data, path)}: value {_shown(value)} contains {problem}"
        elif isinstance(value, dict):
            for key in value:
                problem = _string_problem(key, free=False) if isinstance(key, str) else None
                if problem:
                    return f"{_where(data, path)}: name {_shown(key)} contains {problem}"
            stack.extend(((*path, str(key)), item) for key, item in reversed(value.items())
                         if isinstance(item, str | dict | list))
        elif isinstance(value, list):
            if len(path) == 3 and path[0] == "results" and path[2] == "samples":
                continue  # numbers only (the model turns any text in it into a float or refuses it): the bulk
            stack.extend(((*path, index), value[index]) for index in reversed(range(len(value)))
                         if isinstance(value[index], str | dict | list))
    return None


def _string_problem(text: str, free: bool) -> str | None:
    bad = _UNSTORABLE.search(text) or (None if free else _CONTROL.search(text))
    if bad is None:
        return None
    code = f"U+{ord(bad.group()):04X}"
    return f"{code}, which cannot be stored" if _UNSTORABLE.match(bad.group()) else f"{code}, a control character"


def refuse_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object with a key twice: which one a reader keeps is the reader's choice, so the document is refused."""
    found: dict[str, Any] = {}
    for key, value in pairs:
        if key in found:
            raise ValueError(f"the key {key[:80]!r} appears twice in one object")
        found[key] = value
    return found


def parse_manifest(payload: bytes | str | dict[str, Any]) -> Manifest:
    """Parse and validate a manifest from JSON text or an already-decoded object.

    Raises ManifestError with every problem listed (the first MAX_LISTED_PROBLEMS, and how many more); an
    unsupported format_version is named as such, so a runner newer than the service gets a clear answer instead of
    a list of unknown fields.
    """
    if isinstance(payload, bytes | str):
        try:
            data = json.loads(payload, object_pairs_hook=refuse_duplicate_keys)
        except (ValueError, UnicodeDecodeError) as exc:
            raise ManifestError(f"manifest is not valid JSON: {exc}") from None
        except RecursionError:
            raise ManifestError("manifest is not valid JSON: nested too deeply") from None
    else:
        data = payload
    if not isinstance(data, dict):
        raise ManifestError("manifest must be a JSON object")
    version = data.get("format_version")
    if type(version) is not int or version != FORMAT_VERSION:  # True and 1.0 equal 1, and are not it
        raise ManifestError(
            f"unsupported manifest format_version {repr(version)[:80]}: "
            f"this service reads format_version {FORMAT_VERSION}"
        )
    results = data.get("results")
    if isinstance(results, list) and len(results) > MAX_RESULTS:
        raise ManifestError(f"invalid manifest: results: {len(results)} results, over the limit of {MAX_RESULTS} "
                            "a run; split the suite over several runs")
    problem = _text_problem(data)
    if problem:
        raise ManifestError(f"invalid manifest: {problem}")
    try:
        return Manifest.model_validate(data)
    except ValidationError as exc:
        raise ManifestError(f"invalid manifest: {_describe(exc, data)}") from None


class _ManifestSchema(GenerateJsonSchema):
    """pydantic's JSON schema with the rules parse_manifest enforces on every value of a kind: no string holds a
    control character (free text, whose fields say so with FreeText, only no NUL), and every number is finite
    (each float field refuses NaN and the infinities; a number past the double range, 1e999, reads as one)."""

    def str_schema(self, schema: core_schema.StringSchema) -> JsonSchemaValue:
        json_schema = super().str_schema(schema)
        json_schema["not"] = _SCHEMA_CONTROL
        return json_schema

    def float_schema(self, schema: core_schema.FloatSchema) -> JsonSchemaValue:
        json_schema = super().float_schema(schema)
        if "maximum" not in json_schema and "exclusiveMaximum" not in json_schema:
            json_schema["maximum"] = sys.float_info.max
        if "minimum" not in json_schema and "exclusiveMinimum" not in json_schema:
            json_schema["minimum"] = -sys.float_info.max
        return json_schema


def manifest_json_schema() -> dict[str, Any]:
    schema = Manifest.model_json_schema(schema_generator=_ManifestSchema)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = f"https://kernelwatch.dev/schemas/manifest-v{FORMAT_VERSION}.json"
    return schema
