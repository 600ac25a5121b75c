"""The manifest's optional host_health object and the CPU noise-reduction facts of its environment: valid with and
without them, malformed values refused naming the field, and nothing stored before them changing identity."""

from __future__ import annotations

import json
from typing import Any

import pytest

from service.contract import ManifestError, parse_manifest
from service.pipeline.identity import environment_fingerprint
from tests import builders

HEALTH: dict[str, Any] = {
    "steal_fraction": 0.125, "busy_fraction": 0.5, "cores": 8, "load_1m": 3.5,
    "gpus": [{"index": 0, "sm_clock_mhz": 1980, "mem_clock_mhz": 2619, "throttle_reasons": ["sw_power_cap"]}],
}
# The fingerprint of builders.environment() as the service computed it before these fields existed (read off the
# commit before them): environments stored then must keep theirs, or every series would start again.
FINGERPRINT_BEFORE = "9ef5f7090f3dd0de77de1792830de0c6e12f36a8392c08a9273be6d9af4a2fa1"


def test_a_manifest_without_host_health_is_valid() -> None:
    assert parse_manifest(builders.manifest()).host_health is None


def test_a_manifest_with_host_health_reads_it_back() -> None:
    m = parse_manifest(json.dumps(builders.manifest(host_health=HEALTH)))
    assert m.host_health is not None
    assert m.host_health.model_dump() == HEALTH


def test_only_the_cpu_figures_are_required() -> None:
    m = parse_manifest(builders.manifest(host_health={"steal_fraction": 0, "busy_fraction": 1, "cores": 1}))
    assert m.host_health is not None and m.host_health.load_1m is None and m.host_health.gpus == []


@pytest.mark.parametrize(("change", "field", "why"), [
    ({"steal_fraction": "0.1"}, "host_health.steal_fraction", "valid number"),
    ({"steal_fraction": 1.5}, "host_health.steal_fraction", "less than or equal to 1"),
    ({"steal_fraction": float("nan")}, "host_health.steal_fraction", "finite"),
    ({"busy_fraction": -0.1}, "host_health.busy_fraction", "greater than or equal to 0"),
    ({"cores": 0}, "host_health.cores", "greater than or equal to 1"),
    ({"cores": True}, "host_health.cores", "valid integer"),
    ({"cores": 2.0}, "host_health.cores", "valid integer"),
    ({"load_1m": "high"}, "host_health.load_1m", "valid number"),
    ({"steal": 0.1}, "host_health.steal", "Extra inputs are not permitted"),
    ({"steal_fraction": 0.6, "busy_fraction": 0.6}, "host_health", "more than all of the interval's CPU time"),
    ({"gpus": [{"index": 0, "throttle_reasons": ["HW Slowdown"]}]}, "host_health.gpus.0.throttle_reasons.0",
     "should match pattern"),
    ({"gpus": [{"index": 0, "sm_clock_mhz": "1980"}]}, "host_health.gpus.0.sm_clock_mhz", "valid integer"),
    ({"gpus": [{"index": -1}]}, "host_health.gpus.0.index", "greater than or equal to 0"),
    ({"gpus": [{"index": 0, "temperature": 80}]}, "host_health.gpus.0.temperature", "Extra inputs"),
])
def test_malformed_host_health_is_refused_naming_the_field(change: dict[str, Any], field: str, why: str) -> None:
    with pytest.raises(ManifestError) as refused:
        parse_manifest(builders.manifest(host_health={**HEALTH, **change}))
    assert f"{field}: " in str(refused.value) and why in str(refused.value)


def test_host_health_that_is_not_an_object_is_refused() -> None:
    with pytest.raises(ManifestError, match="host_health: Input should be a valid dictionary"):
        parse_manifest(builders.manifest(host_health=[0.1, 0.5]))


def test_environments_without_the_new_facts_keep_the_fingerprint_they_had() -> None:
    env = parse_manifest(builders.manifest()).environment
    assert "cpu_affinity" not in env.identity() and "cpu_threads" not in env.identity()
    assert "malloc_mmap_threshold" not in env.identity()
    assert environment_fingerprint(env.identity()) == FINGERPRINT_BEFORE


def test_pinning_and_a_single_thread_are_each_an_environment_of_their_own() -> None:
    def fingerprint(**facts: Any) -> str:
        return environment_fingerprint(parse_manifest(builders.manifest(
            environment=builders.environment(**facts))).environment.identity())

    prints = {fingerprint(), fingerprint(cpu_affinity="0"), fingerprint(cpu_affinity="0-1"),
              fingerprint(cpu_threads=1), fingerprint(cpu_affinity="0", cpu_threads=1),
              fingerprint(malloc_mmap_threshold=2**30)}
    assert len(prints) == 6


@pytest.mark.parametrize(("facts", "field"), [
    ({"cpu_affinity": "0-"}, "environment.cpu_affinity"), ({"cpu_affinity": "all"}, "environment.cpu_affinity"),
    ({"cpu_threads": 0}, "environment.cpu_threads"),
    ({"malloc_mmap_threshold": -1}, "environment.malloc_mmap_threshold"),
    ({"malloc_mmap_threshold": "big"}, "environment.malloc_mmap_threshold"),
])
def test_malformed_noise_reduction_facts_are_refused(facts: dict[str, Any], field: str) -> None:
    with pytest.raises(ManifestError, match=field):
        parse_manifest(builders.manifest(environment=builders.environment(**facts)))
