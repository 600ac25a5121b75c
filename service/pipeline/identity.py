"""Content hashes that identify environments and series; computed once, at ingest."""

from __future__ import annotations

import hashlib
import json
from typing import Any


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def environment_fingerprint(identity: dict[str, Any]) -> str:
    return _digest(identity)


def series_key(repository: str, suite: str, name: str, params_key: str, metric: str, environment: str) -> str:
    return _digest([repository, suite, name, params_key, metric, environment])


def versioned_series_key(key: str, benchmark_version: str) -> str:
    """The series of a benchmark edited since its series ``key`` was adopted by another version of it."""
    return _digest([key, benchmark_version])


def manifest_digest(payload: dict[str, Any]) -> str:
    return _digest(payload)
