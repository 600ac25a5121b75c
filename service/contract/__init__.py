"""The runner → service manifest. Runners import this package and nothing else of the service."""

from service.contract.manifest import (
    FORMAT_VERSION,
    MAX_MANIFEST_BYTES,
    ArtifactInfo,
    BenchmarkResult,
    CalibrationInfo,
    CommitInfo,
    EnvironmentInfo,
    GpuHealthInfo,
    HostHealthInfo,
    Manifest,
    ManifestError,
    RepositoryInfo,
    parse_manifest,
)

__all__ = [
    "FORMAT_VERSION",
    "MAX_MANIFEST_BYTES",
    "ArtifactInfo",
    "BenchmarkResult",
    "CalibrationInfo",
    "CommitInfo",
    "EnvironmentInfo",
    "GpuHealthInfo",
    "HostHealthInfo",
    "Manifest",
    "ManifestError",
    "RepositoryInfo",
    "parse_manifest",
]
