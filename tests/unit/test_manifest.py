import json

import pytest

from service.contract import ManifestError, parse_manifest
from service.contract.export import SCHEMA_PATH, render_schema
from service.pipeline.identity import environment_fingerprint
from tests import builders


def test_a_good_manifest_parses() -> None:
    m = parse_manifest(builders.manifest())
    assert m.format_version == 1 and m.results[0].samples == [1e-3, 1.01e-3, 0.99e-3]


def test_json_text_and_bytes_parse_alike() -> None:
    doc = builders.manifest()
    assert parse_manifest(json.dumps(doc)) == parse_manifest(json.dumps(doc).encode())


@pytest.mark.parametrize("version", [2, 0, "1", None])
def test_wrong_version_is_named(version: object) -> None:
    doc = builders.manifest(format_version=version)
    with pytest.raises(ManifestError, match="unsupported manifest format_version"):
        parse_manifest(doc)


def test_missing_fields_are_listed() -> None:
    doc = builders.manifest()
    del doc["commit"]["sha"]
    del doc["environment"]
    with pytest.raises(ManifestError) as info:
        parse_manifest(doc)
    assert "commit.sha" in str(info.value) and "environment" in str(info.value)


@pytest.mark.parametrize(("samples", "message"), [
    ([1e-3, -1e-3], "negative"),
    ([float("nan")], "not a finite number"),
    ([float("inf")], "not a finite number"),
])
def test_impossible_samples_are_refused(samples: list[float], message: str) -> None:
    with pytest.raises(ManifestError, match=message):
        parse_manifest(builders.manifest(results=[builders.result(samples=samples)]))


def test_ok_result_without_samples_and_failed_without_message() -> None:
    with pytest.raises(ManifestError, match="at least one sample"):
        parse_manifest(builders.manifest(results=[builders.result(samples=[])]))
    with pytest.raises(ManifestError, match="needs a message"):
        parse_manifest(builders.manifest(results=[builders.result(samples=[], status="failed")]))


def test_unknown_fields_and_duplicate_results_are_refused() -> None:
    with pytest.raises(ManifestError, match="surprise"):
        parse_manifest(builders.manifest(surprise=1))
    with pytest.raises(ManifestError, match="appears twice"):
        parse_manifest(builders.manifest(results=[builders.result(), builders.result()]))


def test_not_json_and_not_an_object() -> None:
    with pytest.raises(ManifestError, match="not valid JSON"):
        parse_manifest(b"{truncated")
    with pytest.raises(ManifestError, match="JSON object"):
        parse_manifest("[1, 2]")


def test_bad_sha_is_refused() -> None:
    with pytest.raises(ManifestError, match="commit.sha"):
        parse_manifest(builders.manifest(commit=builders.commit(0, sha="not-a-sha")))


def test_checked_in_schema_is_current() -> None:
    assert SCHEMA_PATH.read_text() == render_schema(), "run `python -m service.contract.export`"


@pytest.mark.parametrize("name", ["../etc/passwd", "/abs/path", "a/b", "x\0y", ".hidden", ""])
def test_artifact_names_cannot_be_paths(name: str) -> None:
    artifact = {"kind": "hlo", "name": name, "sha256": "0" * 64, "size": 1}
    with pytest.raises(ManifestError, match="artifacts.0.name"):
        parse_manifest(builders.manifest(results=[builders.result(artifacts=[artifact])]))


def test_cost_figures_must_be_finite() -> None:
    with pytest.raises(ManifestError, match="not a finite"):
        parse_manifest(builders.manifest(results=[builders.result(cost={"flops": float("inf")})]))


def test_an_environment_may_carry_its_calibration() -> None:
    assert parse_manifest(builders.manifest()).environment.calibration is None  # optional: older runners
    doc = builders.manifest(environment=builders.environment(calibration=builders.calibration()))
    c = parse_manifest(doc).environment.calibration
    assert c is not None and (c.flops_per_s, c.bytes_per_s, c.dtype) == (100e9, 10e9, "float32")


@pytest.mark.parametrize(("change", "field"), [
    ({"flops_per_s": 0.0}, "flops_per_s"), ({"bytes_per_s": -1.0}, "bytes_per_s"),
    ({"flops_per_s": float("inf")}, "flops_per_s"), ({"dtype": ""}, "dtype"), ({"unit": "GB"}, "unit"),
])
def test_a_calibration_is_validated(change: dict[str, object], field: str) -> None:
    doc = builders.manifest(environment=builders.environment(calibration=builders.calibration(**change)))
    with pytest.raises(ManifestError, match=f"environment.calibration.{field}"):
        parse_manifest(doc)


def test_the_calibration_is_not_part_of_the_environment_identity() -> None:
    plain = parse_manifest(builders.manifest()).environment
    measured = parse_manifest(builders.manifest(environment=builders.environment(
        calibration=builders.calibration(flops_per_s=123e9)))).environment
    assert "calibration" not in plain.identity()
    assert environment_fingerprint(plain.identity()) == environment_fingerprint(measured.identity())
