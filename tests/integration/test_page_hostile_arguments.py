"""Every dashboard page, walked from the app's own URL map as the API's auth test walks its routes, with what no
column can hold: a NUL byte or a lone surrogate in a query argument or a path segment, and ids past BIGINT.
Issue 18: on PostgreSQL a NUL was a 500 (psycopg.DataError) on 18 page URLs, and an id past 2^63-1 a 500 on both
databases. Each is now a page that says what is wrong: 400, or 404 for an id no row can have."""

from __future__ import annotations

from urllib.parse import quote

from werkzeug.routing import IntegerConverter, Rule

from tests import builders
from tests.api_client import Api

PAST_BIGINT = 2**63
HOSTILE_TEXT = ["\x00", "a\x00b", "\ud800"]


def page_rules(api: Api) -> list[Rule]:
    """The dashboard's GET routes: everything but the API, the webhook and static files."""
    return [rule for rule in api.app.url_map.iter_rules()
            if "GET" in (rule.methods or set()) and not rule.rule.startswith(("/api/", "/hooks/", "/static"))
            and rule.endpoint != "static"]


def fill(rule: Rule, text: str, number: int) -> str:
    """The rule's URL with every integer segment ``number`` and every other segment ``text``, quoted."""
    url = rule.rule
    for argument, converter in rule._converters.items():  # noqa: SLF001 - werkzeug keeps them only here
        value = str(number) if isinstance(converter, IntegerConverter) else quote(text.encode("utf-8", "surrogatepass"))
        url = url.replace(f"<{'int:' if isinstance(converter, IntegerConverter) else ''}{argument}>", value)
        url = url.replace(f"<path:{argument}>", value).replace(f"<string:{argument}>", value)
    return url


def test_every_page_refuses_what_no_column_can_hold(api: Api) -> None:
    for manifest in builders.step_series_manifests([1.0] * 4 + [1.3] * 4, seed=5):
        api.ctx.submit(manifest)
    rules = page_rules(api)
    assert len(rules) >= 10, [r.rule for r in rules]  # the walk finds the pages, not nothing
    queries = ["repository", "base", "head", "repo", "series", "branch", "hardware", "state", "kernel", "next"]
    tried = 0
    for rule in rules:
        for text in HOSTILE_TEXT:
            encoded = quote(text.encode("utf-8", "surrogatepass"))
            urls = [f"{fill(rule, 'x', 1)}?{'&'.join(f'{q}={encoded}' for q in queries)}"]
            if rule.arguments:
                urls += [fill(rule, text, 1), fill(rule, "x", PAST_BIGINT)]
            for url in urls:
                response = api.client.get(url)
                tried += 1
                assert response.status_code < 500, (url, response.status_code, response.data[:300])
                if response.status_code >= 400:
                    assert b"Traceback" not in response.data
    assert tried > 3 * len(rules)
    # The two cases the issue names, exactly.
    nul = api.client.get("/?repository=%00")
    assert nul.status_code == 400 and b"NUL" in nul.data
    huge = api.client.get(f"/series/{PAST_BIGINT}")
    assert huge.status_code == 404
