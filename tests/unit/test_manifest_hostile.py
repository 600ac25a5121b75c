"""The contract's refusals of hostile manifests, without a database: the same checks whether the manifest arrives
as JSON text (the API) or as an object (a runner in-process), with messages that name the field and the result
and never echo a control character."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from service.contract import ManifestError, parse_manifest
from service.contract.manifest import MAX_RESULTS
from tests import builders


def refusal(payload: dict[str, Any] | str) -> str:
    with pytest.raises(ManifestError) as caught:
        parse_manifest(payload)
    message = str(caught.value)
    assert message.isprintable(), message  # escaped: no control character reaches a log or a terminal
    return message


def test_too_many_results_are_refused_before_any_is_validated() -> None:
    results = [{"not": "even a result"}] * (MAX_RESULTS + 1)
    started = time.monotonic()
    message = refusal(builders.manifest(results=results))
    assert f"{MAX_RESULTS + 1} results, over the limit of {MAX_RESULTS}" in message
    assert time.monotonic() - started < 1


@pytest.mark.parametrize("as_text", [True, False])
def test_text_checks_apply_to_objects_and_to_json_text(as_text: bool) -> None:
    doc = builders.manifest(results=[builders.result(), builders.result(name="second", params={"k\x1b": 1})])
    message = refusal(json.dumps(doc) if as_text else doc)
    assert message == ("invalid manifest: results.1 (softmax/second).params: name 'k\\x1b' contains U+001B, "
                       "a control character")


def test_free_text_keeps_newlines_and_escapes_but_not_nul() -> None:
    doc = builders.manifest(results=[builders.result(status="failed", samples=[],
                                                     message="Traceback:\n\t\x1b[31mboom\x1b[0m\r\n")])
    doc["commit"]["subject"] = "subject\n\nbody\twith tab"
    assert parse_manifest(doc).results[0].message == "Traceback:\n\t\x1b[31mboom\x1b[0m\r\n"
    doc["commit"]["subject"] = "a\x00b"
    assert "commit.subject: value 'a\\x00b' contains U+0000, which cannot be stored" in refusal(doc)


def test_nesting_costs_no_recursion() -> None:
    doc = builders.manifest()
    deep: list[Any] = []
    for _ in range(50_000):  # far past the interpreter's recursion limit
        deep = [deep]
    doc["environment"]["extra"] = {"deep": deep}
    assert "environment.extra.deep" in refusal(doc)
    assert "nested too deeply" in refusal("[" * 100_000 + "]" * 100_000)


def test_a_hostile_result_name_is_escaped_where_it_names_the_result() -> None:
    doc = builders.manifest(results=[builders.result(suite="s\u202e\x00", samples=[float("nan")])])
    message = refusal(doc)
    assert "results.0 (s\\u202e\\x00/softmax_rows)" in message


@pytest.mark.parametrize(("mutate", "words"), [
    (lambda m: m.update(format_version=True), "unsupported manifest format_version True"),
    (lambda m: m.update(format_version=1.0), "unsupported manifest format_version 1.0"),
    (lambda m: m["results"][0].update(samples=["0.001", "0.002"]), "samples"),
    (lambda m: m["results"][0].update(samples=[True, False]), "samples"),
    (lambda m: m["results"][0].update(compile_time_s="0.5"), "compile_time_s"),
])
def test_the_parser_is_as_strict_as_the_published_schema(mutate: Any, words: str) -> None:
    """Issue 18: a boolean or float format_version, and numbers given as text, were accepted (201) although the
    schema refuses them; a runner sending them has a bug worth hearing about."""
    doc = builders.manifest()
    mutate(doc)
    for given in (doc, json.dumps(doc)):
        with pytest.raises(ManifestError, match=words):
            parse_manifest(given)


def test_a_key_given_twice_is_refused() -> None:
    """Which of two values of one key a reader keeps is the reader's choice: the document is refused instead."""
    text = json.dumps(builders.manifest())
    doubled = text.replace('"trigger": "push"', '"trigger": "push", "trigger": "pr"', 1)
    assert doubled != text
    with pytest.raises(ManifestError, match="'trigger' appears twice"):
        parse_manifest(doubled)
    parse_manifest(text)  # the document itself is fine
