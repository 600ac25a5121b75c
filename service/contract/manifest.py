"""Version 1 of the result manifest a runner uploads after running a suite at one commit.

The manifest is validated here, at the boundary: a wrong version, a missing field or an impossible value is
refused with a message that names the field, before anything is stored.
"""

from __future__ import annotations

import json
import math
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from service.errors import InvalidInput

FORMAT_VERSION = 1

Direction = Literal["lower_is_better", "higher_is_better"]
ResultStatus = Literal["ok", "failed"]
RunStatus = Literal["complete", "partial", "failed"]
# "schedule": a run of a tracked branch's tip made by `kernelwatch beat`.
Trigger = Literal["push", "pr", "manual", "bisect", "confirm", "schedule"]

_SHA_PATTERN = r"^[0-9a-f]{40}$"
_NAME_PATTERN = r"^[A-Za-z0-9_.\-]{1,200}$"


class ManifestError(InvalidInput):
    """A manifest the service cannot accept; the message lists every problem with its field path."""


class _Strict(BaseModel):
    # Unknown keys are refused rather than dropped: a typo in a runner must not silently lose data.
    model_config = ConfigDict(extra="forbid", frozen=True)


class RepositoryInfo(_Strict):
    name: str = Field(pattern=_NAME_PATTERN)
    url: str = Field(min_length=1, max_length=2000)
    default_branch: str = Field(default="main", min_length=1, max_length=255)


class CommitInfo(_Strict):
    sha: str = Field(pattern=_SHA_PATTERN)
    parents: list[str] = Field(default_factory=list, max_length=64)
    author: str = Field(default="", max_length=500)
    authored_at: datetime
    subject: str = Field(default="", max_length=2000)
    # Number of first-parent ancestors: orders commits of one branch without asking git again.
    position: int = Field(ge=0)

    @field_validator("parents")
    @classmethod
    def _parents_are_shas(cls, value: list[str]) -> list[str]:
        for parent in value:
            if len(parent) != 40 or any(c not in "0123456789abcdef" for c in parent):
                raise ValueError(f"parent {parent!r} is not a 40-character lowercase hex sha")
        return value


class CalibrationInfo(_Strict):
    """What the runner's calibration micro-benchmark measured on its host (runners/calibrate.py): the roof of a
    host with no published figures. Optional, so that runners older than it, and accelerator hosts (which have
    published figures), still send valid version-1 manifests."""

    flops_per_s: float = Field(gt=0, allow_inf_nan=False)
    bytes_per_s: float = Field(gt=0, allow_inf_nan=False)
    dtype: str = Field(min_length=1, max_length=32)


class EnvironmentInfo(_Strict):
    backend: str = Field(min_length=1, max_length=64)
    device_kind: str = Field(min_length=1, max_length=200)
    device_count: int = Field(ge=1, le=65536)
    jax_version: str = Field(max_length=64)
    jaxlib_version: str = Field(max_length=64)
    xla_flags: str = Field(default="", max_length=10000)
    cpu_model: str = Field(default="", max_length=500)
    host_isa: str = Field(default="", max_length=200)
    python_version: str = Field(default="", max_length=64)
    # Optional facts of accelerator hosts (empty where they do not apply), all part of the identity.
    topology: str = Field(default="", max_length=500)
    platform_version: str = Field(default="", max_length=500)  # the runtime's own: CUDA driver, libtpu build
    libtpu_version: str = Field(default="", max_length=64)
    libtpu_init_args: str = Field(default="", max_length=10000)
    # Facts recorded for people but not part of the identity of an environment (hostname, dirty checkout...).
    extra: dict[str, str] = Field(default_factory=dict)
    # Measured afresh by every run, so it differs from run to run on the same host: kept out of the identity, or
    # every run would start a series of its own.
    calibration: CalibrationInfo | None = None

    def identity(self) -> dict[str, Any]:
        """What makes two measurements comparable; the environment fingerprint is a hash of this."""
        return self.model_dump(exclude={"extra", "calibration"})


class ArtifactInfo(_Strict):
    """A captured file, by digest: the bytes travel apart from the manifest (content-addressed)."""

    kind: str = Field(pattern=r"^[a-z0-9][a-z0-9\-]{0,31}$")
    # Only a file name, never a path: it is shown to people and must not name a place to write to.
    name: str = Field(pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.\-]{0,254}$")
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    size: int = Field(ge=0)


class BenchmarkResult(_Strict):
    suite: str = Field(pattern=_NAME_PATTERN)
    name: str = Field(pattern=_NAME_PATTERN)
    params: dict[str, str | int | float | bool] = Field(default_factory=dict)
    metric: str = Field(default="wall_time", pattern=_NAME_PATTERN)
    unit: str = Field(default="s", max_length=32)
    direction: Direction = "lower_is_better"
    status: ResultStatus
    message: str | None = Field(default=None, max_length=20000)
    samples: list[float] = Field(default_factory=list, max_length=100000)
    compile_time_s: float | None = Field(default=None, ge=0)
    flops: float | None = Field(default=None, ge=0)
    bytes_accessed: float | None = Field(default=None, ge=0)
    max_abs_error: float | None = Field(default=None, ge=0)
    artifacts: list[ArtifactInfo] = Field(default_factory=list, max_length=10000)
    # XLA's cost analysis of the compiled program ("flops", "bytes accessed", "transcendentals"...).
    cost: dict[str, float] = Field(default_factory=dict, max_length=64)

    @field_validator("cost")
    @classmethod
    def _cost_is_finite(cls, value: dict[str, float]) -> dict[str, float]:
        for key, number in value.items():
            if not math.isfinite(number) or number < 0:
                raise ValueError(f"cost {key!r} is {number}, not a finite non-negative number")
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


class Manifest(_Strict):
    format_version: Literal[1]
    run_id: str = Field(pattern=r"^[A-Za-z0-9_\-]{8,64}$")
    repository: RepositoryInfo
    commit: CommitInfo
    branch: str | None = Field(default=None, max_length=255)
    trigger: Trigger = "manual"
    pr_number: int | None = Field(default=None, ge=1)
    environment: EnvironmentInfo
    started_at: datetime
    finished_at: datetime
    status: RunStatus
    results: list[BenchmarkResult] = Field(max_length=100000)

    @model_validator(mode="after")
    def _consistent(self) -> Manifest:
        if self.finished_at < self.started_at:
            raise ValueError("finished_at is before started_at")
        seen: set[tuple[str, str, str, str]] = set()
        for result in self.results:
            key = (result.suite, result.name, result.params_key(), result.metric)
            if key in seen:
                raise ValueError(f"result {result.suite}/{result.name} {result.params_key()} appears twice")
            seen.add(key)
        return self


def _describe(error: ValidationError) -> str:
    lines = []
    for item in error.errors():
        where = ".".join(str(part) for part in item["loc"]) or "(manifest)"
        lines.append(f"{where}: {item['msg']}")
    return "; ".join(lines)


def parse_manifest(payload: bytes | str | dict[str, Any]) -> Manifest:
    """Parse and validate a manifest from JSON text or an already-decoded object.

    Raises ManifestError with every problem listed; an unsupported format_version is named as such, so a runner
    newer than the service gets a clear answer instead of a list of unknown fields.
    """
    if isinstance(payload, bytes | str):
        try:
            data = json.loads(payload)
        except (ValueError, UnicodeDecodeError) as exc:
            raise ManifestError(f"manifest is not valid JSON: {exc}") from None
    else:
        data = payload
    if not isinstance(data, dict):
        raise ManifestError("manifest must be a JSON object")
    version = data.get("format_version")
    if version != FORMAT_VERSION:
        raise ManifestError(
            f"unsupported manifest format_version {version!r}: this service reads format_version {FORMAT_VERSION}"
        )
    try:
        return Manifest.model_validate(data)
    except ValidationError as exc:
        raise ManifestError(f"invalid manifest: {_describe(exc)}") from None


def manifest_json_schema() -> dict[str, Any]:
    schema = Manifest.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = f"https://kernelwatch.dev/schemas/manifest-v{FORMAT_VERSION}.json"
    return schema
