"""Hostile input against the web process, in three phases against one server; every answer must be a 2xx (or 3xx)
or a 4xx in its stable form, never a 5xx (the security issue: at least 1,000 API requests a run, zero 5xx, every
4xx with the stable shape; issue 18: the pages and the webhook too).

1. api: /api/v1 against its own OpenAPI document: schemathesis generates requests for every operation (valid and
   invalid data), and every error must be in the stable error shape (service/api/errors.py) and a status the
   document lists.
2. pages: every GET page of the dashboard, walked from the app's own URL map (everything but /api/, /hooks/ and
   /static), with hypothesis-generated path segments (ids that exist, past BIGINT, negative; text with NUL,
   control characters, surrogates and invalid UTF-8 as percent-escapes, long strings) and query arguments (the
   names the pages read, found in web/, and those Flask's url_for takes as its own), every other request logged
   in. A 4xx must be an HTML page without a traceback.
3. webhook: POST /hooks/github with a valid HMAC signature (every tenth one wrong or missing) over generated
   deliveries: events pull_request, issue_comment, push, ping, unknown and hostile names; GitHub's payloads with
   wrong types or hostile values at the fields the handler reads, JSON of random shapes, deep nesting, non-JSON
   bodies; delivery ids missing, repeated, too long or hostile. A 4xx must be in the API's error shape, a 2xx a
   JSON object; each delivery is counted as stored, duplicate, ignored, ping or refused. On the scratch database
   the stored ones are counted again in webhook_delivery (each once, no other), and each is run through the
   handler in this process as the embedded form runs it before answering: one it raises on fails the run.

On the scratch service the exceptions of the web process's log are printed, counted: what the 5xx were.

By default it starts the real web process (`kernelwatch serve`) on a scratch PostgreSQL database brought to head by
the migrations, with a broker (Redis database 5, emptied) and a webhook secret, seeds it with a small history (a
step in one series, so there are runs, series, findings and alerts to read), creates a token with the submit and
triage scopes, and drops the database at the end. With --url and --token it fuzzes a running service instead
(nothing is seeded or dropped; the webhook phase needs --webhook-secret).

    python bench/api_fuzz.py [--max-examples 40] [--page-examples 40] [--webhook-examples 400] [--seed N]
                             [--skip api|pages|webhook ...] [--min-requests 1000] [--admin-url URL]
                             [--redis-url redis://127.0.0.1:6379/5]
    python bench/api_fuzz.py --url http://127.0.0.1:8000 --token kw_... [--webhook-secret S]

Each API operation is fuzzed --max-examples times in schemathesis's positive mode (data the document allows) and as
many in its negative mode (data it does not); every fifth request carries a wrong token or none. Each page route
gets --page-examples generated URLs and as many built on stored values, each class of webhook event (pull_request,
issue_comment, ping, the others) --webhook-examples deliveries. Hypothesis runs derandomized (or
with --seed), its database off, so a run is repeatable; the seed is printed. Prints a table (operation, requests,
2xx/4xx/5xx, shape violations, slowest answer) and the first failing requests as curl commands; exits 1 on any
5xx, transport error or error not in its shape, or with fewer than --min-requests API requests.
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import json
import os
import re
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:  # run as a script: the service and tests packages import from the root
    sys.path.insert(0, str(REPO_ROOT))

WRONG_TOKEN = "kw_0000000000_notavalidsecretnotavalidsecret"
SLOW_S = 2.0  # an answer slower than this is reported (the web statement timeout is 5 s)
PHASES = ("api", "pages", "webhook")
WEBHOOK_SECRET = "kw-fuzz-webhook-secret"  # the scratch service's


@dataclass
class Tally:
    """What one operation answered."""

    requests: int = 0
    ok: int = 0  # 2xx (and 3xx, which this API never sends)
    client_errors: int = 0  # 4xx
    server_errors: int = 0  # 5xx
    transport_errors: int = 0  # no answer at all: a crash, a hang past the client's timeout
    shape_violations: int = 0  # a 4xx or 5xx whose body is not the stable error shape
    undocumented: int = 0  # a status the OpenAPI document does not list for the operation
    documented: set[str] = field(default_factory=set)  # the statuses it lists
    slowest_s: float = 0.0
    skipped: str = ""  # why a generation mode produced nothing (e.g. nothing to make invalid)
    failures: list[str] = field(default_factory=list)  # curl commands of the first failing requests
    phase: str = "api"  # api, pages or webhook
    outcomes: Counter[str] = field(default_factory=Counter)  # the webhook's: stored, duplicate, ignored, refused...
    mismatches: int = 0  # the webhook's: deliveries answered as stored that the database does not hold, or more

    @property
    def failed(self) -> bool:
        return bool(self.server_errors or self.transport_errors or self.shape_violations or self.undocumented
                    or self.mismatches)

    def count(self, status: int) -> None:
        if status >= 500:
            self.server_errors += 1
        elif status >= 400:
            self.client_errors += 1
        else:
            self.ok += 1


def error_shape_problem(content_type: str, body: bytes) -> str | None:
    """Why an error answer is not ``{"error": {"code": str, "message": str[, "details": object]}}``; None if it is."""
    if not content_type.startswith("application/json"):
        return f"content type {content_type!r}, not application/json"
    try:
        doc = json.loads(body)
    except ValueError:
        return "body is not JSON"
    if not isinstance(doc, dict) or set(doc) != {"error"} or not isinstance(doc["error"], dict):
        return "body is not {\"error\": {...}}"
    error = doc["error"]
    if not isinstance(error.get("code"), str) or not isinstance(error.get("message"), str):
        return "error lacks a string code or message"
    if set(error) - {"code", "message", "details"}:
        return f"error has unexpected keys {sorted(set(error) - {'code', 'message', 'details'})}"
    if "details" in error and not isinstance(error["details"], dict):
        return "error details is not an object"
    if "Traceback" in body.decode("utf-8", "replace"):
        return "body carries a traceback"
    return None


def _header(headers: dict[str, list[str]], name: str) -> str:
    for key, values in headers.items():
        if key.lower() == name.lower() and values:
            return values[0]
    return ""


def stored_values(api_url: str, timeout_s: float = 30) -> dict[str, Any]:
    """Parameter values that name something stored (an alert, a series, two commits to compare), read from the
    API itself: random ids and shas name nothing, so without these the handlers past the lookup go untried."""
    import requests

    values: dict[str, Any] = {}
    alerts = requests.get(f"{api_url}/alerts", params={"limit": 1}, timeout=timeout_s).json().get("alerts") or []
    if alerts:
        alert = alerts[0]
        values.update(alert_id=alert["id"], base=alert["previous_sha"], head=alert["commit_sha"],
                      repo=alert["repository"], repository=alert["repository"])
    findings = requests.get(f"{api_url}/findings", params={"limit": 1}, timeout=timeout_s).json().get("findings")
    if findings:
        values.update(series_id=findings[0]["series_id"], hardware=findings[0]["hardware"])
    return values


def fuzz_api(api_url: str, token: str, *, max_examples: int, seed: int | None = None, wrong_token_every: int = 5,
             timeout_s: float = 30, known: dict[str, Any] | None = None,
             progress: Callable[[str], None] | None = None) -> dict[str, Tally]:
    """Fuzz every operation of the OpenAPI document served at ``{api_url}/openapi.json``; a tally per operation.

    ``api_url`` is the API's root (http://host:port/api/v1). Each operation gets ``max_examples`` positive and as
    many negative examples, and as many positive ones again with the ``known`` values (``stored_values``, plus
    any the caller adds, such as a ``run_uid``) for those of its parameters that take them. Shape violations and
    5xx are counted, not raised: hypothesis does not shrink, so each operation gets exactly its examples."""
    import hypothesis
    import requests
    import schemathesis
    from hypothesis import HealthCheck, Phase
    from schemathesis import GenerationMode

    schema = schemathesis.openapi.from_url(f"{api_url}/openapi.json", timeout=timeout_s)
    session = requests.Session()
    paths = session.get(f"{api_url}/openapi.json", timeout=timeout_s).json()["paths"]
    tallies: dict[str, Tally] = {}
    counter = 0
    for result in schema.get_all_operations():
        operation = result.ok()  # type: ignore[union-attr]  # an invalid operation raises here, loudly
        tally = tallies.setdefault(operation.label, Tally())
        tally.documented = set(paths[operation.path][operation.method.lower()]["responses"])

        def one(case: Any, tally: Tally) -> None:
            nonlocal counter
            counter += 1
            headers: dict[str, Any] = {"Authorization": f"Bearer {token}"}
            if wrong_token_every and counter % wrong_token_every == 0:
                # Alternately a token nobody issued and no token at all (None drops the header).
                headers["Authorization"] = f"Bearer {WRONG_TOKEN}" if counter % 2 else None
            tally.requests += 1
            started = time.perf_counter()
            try:
                response = case.call(base_url=api_url, session=session, headers=headers, timeout=timeout_s)
            except requests.RequestException as exc:
                tally.transport_errors += 1
                if len(tally.failures) < 3:
                    tally.failures.append(f"{type(exc).__name__}: {case.as_curl_command(headers)}")
                return
            tally.slowest_s = max(tally.slowest_s, time.perf_counter() - started)
            status = response.status_code
            problem = None
            if status >= 500:
                tally.server_errors += 1
                problem = f"{status}"
            elif status >= 400:
                tally.client_errors += 1
            else:
                tally.ok += 1
            if str(status) not in tally.documented:
                tally.undocumented += 1
                problem = f"{status} not documented" if problem is None else f"{problem}, not documented"
            if status >= 400 and case.method.upper() != "HEAD":
                shape = error_shape_problem(_header(response.headers, "content-type"), response.content)
                if shape is not None:
                    tally.shape_violations += 1
                    problem = f"{status} {shape}" if problem is None else f"{problem}, {shape}"
            if problem is not None and len(tally.failures) < 3:
                tally.failures.append(f"{problem}: {case.as_curl_command(headers)} -> "
                                      f"{response.content[:300]!r}")

        values = known or {}
        path = {p.name: values[p.name] for p in operation.path_parameters if p.name in values}
        query = {p.name: values[p.name] for p in operation.query if p.name in values}
        strategies = [(mode.value, operation.as_strategy(generation_mode=mode))
                      for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)]
        if path or query:
            strategies.append(("stored", operation.as_strategy(generation_mode=GenerationMode.POSITIVE,
                                                               path_parameters=path or None, query=query or None)))
        for mode, strategy in strategies:
            test = hypothesis.given(strategy)(_bound(one, tally))
            test = hypothesis.settings(max_examples=max_examples, derandomize=seed is None, database=None,
                                       deadline=None, phases=[Phase.explicit, Phase.generate],
                                       suppress_health_check=list(HealthCheck),
                                       verbosity=hypothesis.Verbosity.quiet)(test)
            if seed is not None:
                test = hypothesis.seed(seed)(test)
            try:
                test()
            except hypothesis.errors.Unsatisfiable:  # nothing to make invalid (no parameters, no body)
                tally.skipped = mode
        if progress is not None:
            progress(f"{operation.label}: {tally.requests} requests")
    return tallies


def _bound(check: Callable[[Any, Tally], None], tally: Tally) -> Callable[[Any], None]:
    # A plain one-argument function: hypothesis's @given refuses defaults and partials.
    def test(case: Any) -> None:
        check(case, tally)

    return test


def table(tallies: dict[str, Tally]) -> str:
    header = ("operation", "requests", "2xx", "4xx", "5xx", "no answer", "shape violations", "undocumented",
              "slowest ms")
    rows: list[tuple[str, ...]] = [(label, str(t.requests), str(t.ok), str(t.client_errors), str(t.server_errors),
             str(t.transport_errors), str(t.shape_violations), str(t.undocumented), f"{t.slowest_s * 1000:.0f}")
            for label, t in tallies.items()]
    total = [sum(getattr(t, f) for t in tallies.values()) for f in
             ("requests", "ok", "client_errors", "server_errors", "transport_errors", "shape_violations",
              "undocumented")]
    slowest = max((t.slowest_s for t in tallies.values()), default=0.0)
    rows.append(("total", *(str(v) for v in total), f"{slowest * 1000:.0f}"))
    widths = [max(len(r[i]) for r in (header, *rows)) for i in range(len(header))]

    def line(cells: tuple[str, ...]) -> str:
        pairs = enumerate(zip(cells, widths, strict=True))
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in pairs)

    return "\n".join([line(header), line(tuple("-" * w for w in widths)), *(line(r) for r in rows)])


# --- the dashboard's pages ---------------------------------------------------------------------------------------

PAGE_PREFIXES_SKIPPED = ("/api/", "/hooks/", "/static")
# Query argument names that Flask's url_for takes as its own keywords: a page that hands its request's arguments
# on to url_for (to keep them in a link) must not hand these on.
URL_FOR_NAMES = ("_external", "_scheme", "_anchor", "_method", "endpoint", "values")
# Names the pages read without a literal ``args.get("...")`` in web/ (a loop over a dataclass's fields, a tuple).
INDIRECT_QUERY_NAMES = ("repository", "branch", "hardware", "state", "suite", "kernel", "from", "to")
HOSTILE_SAMPLES = ("\x00", "a\x00b", "\ud800", "\udfff", "x\ud83d", "\x7f", "\r\n", "\t", " ", "", "..",
                   "../../etc/passwd", "%00", "' OR 1=1 --", "<script>alert(1)</script>", "{{7*7}}", "\u202e",
                   "\ufeff", "null", "true", "[]", "{}", "NaN", "-0", "1e999", "0x10", "\u0661\u0662", "1.5", "+1",
                   "regression,improvement,nonsense", "main", "cpu", "loops", "1")
BOUNDARY_INTS = (0, 1, -1, 2**31 - 1, 2**31, 2**53 + 1, 2**63 - 1, 2**63, -(2**63) - 1, 2**64, 10**40)
# Sent as they are, not quoted again: NUL, a surrogate, invalid and overlong UTF-8, broken escapes.
RAW_ESCAPES = ("%00", "%ED%A0%80", "%ED%BF%BF", "%FF", "%C0%AF", "%C0%80", "%E2%80%AE", "%zz", "%", "%%", "%0", "+",
               "%2F", "%2F%2Fevil.example", "%0D%0ALocation:%20x", "%F4%90%80%80")
_SEGMENT = re.compile(r"<(?:(?P<converter>\w+)(?:\([^)]*\))?:)?(?P<name>\w+)>")


@dataclass
class PageValues:
    """What exists in the store, for the pages' path segments and arguments: random ids name nothing."""

    ids: dict[str, list[int]] = field(default_factory=dict)  # by the path argument's name: series_id, result_id...
    texts: list[str] = field(default_factory=list)  # commit shas, the repository, hardware, kernel names, run ids
    queries: list[list[tuple[str, str]]] = field(default_factory=list)  # arguments that get past the checks


def page_rules(app: Any) -> list[Any]:
    """The dashboard's GET routes, from the app's URL map: everything but the API, the webhook and static files
    (the /login and /logout forms included)."""
    return [rule for rule in app.url_map.iter_rules()
            if "GET" in (rule.methods or set()) and not rule.rule.startswith(PAGE_PREFIXES_SKIPPED)
            and rule.endpoint != "static"]


def dashboard_rules() -> list[Any]:
    """The GET page routes of an app built as `kernelwatch serve` builds it (over a SQLite file it never opens)."""
    import tempfile

    from service.app import create_app
    from service.settings import load_settings

    with tempfile.TemporaryDirectory(prefix="kw-urlmap-") as home:
        app = create_app(load_settings({"KERNELWATCH_HOME": home,
                                        "KERNELWATCH_DATABASE_URL": f"sqlite:///{home}/unused.db"}))
        try:
            return page_rules(app)
        finally:
            app.extensions["kernelwatch"].close()


def page_query_names() -> list[str]:
    """The query argument names the pages read: every ``args.get("name")`` (and the ``_int``/``_result_id`` helpers'
    names) in web/, and those read indirectly."""
    pattern = re.compile(r"""\bargs\.get\(\s*["']([^"']+)["']|\b_(?:int|result_id)\(\s*["']([^"']+)["']""")
    names = set(INDIRECT_QUERY_NAMES)
    for path in sorted((REPO_ROOT / "web").rglob("*.py")):
        for match in pattern.finditer(path.read_text()):
            names.add(match.group(1) or match.group(2))
    return sorted(names)


def stored_page_values(known: dict[str, Any], database_url: str | None = None) -> PageValues:
    """Ids and names that exist: from the API's ``stored_values`` (``known``), and on the scratch database a few
    of each table's ids as well (results and findings have no listing the API offers)."""
    values = PageValues()
    for name in ("alert_id", "series_id"):
        if isinstance(known.get(name), int):
            values.ids[name] = [known[name]]
    values.texts = sorted({str(v) for k, v in known.items() if isinstance(v, str)})
    if database_url:
        from sqlalchemy import text

        from service.store.db import make_engine

        engine = make_engine(database_url)
        try:
            with engine.connect() as conn:
                for table, name in (("result", "result_id"), ("finding", "finding_id"), ("series", "series_id"),
                                    ("alert", "alert_id")):
                    found = conn.execute(text(f"SELECT id FROM {table} ORDER BY id DESC LIMIT 4")).scalars()
                    values.ids[name] = sorted({*values.ids.get(name, []), *found})
                values.texts = sorted({*values.texts,
                                       *conn.execute(text("SELECT sha FROM commit ORDER BY id LIMIT 3")).scalars(),
                                       *conn.execute(text("SELECT name FROM kernel_code LIMIT 3")).scalars()})
        finally:
            engine.dispose()
    base, head, repo = known.get("base"), known.get("head"), known.get("repo")
    results = values.ids.get("result_id", [])
    values.queries = [[]]
    if base and head:
        values.queries += [[("base", base), ("head", head)], [("base", base), ("head", head), ("repo", repo or "")],
                           [("base", base[:10]), ("head", head[:10])]]
    if len(results) >= 2:
        values.queries += [[("base", str(results[0])), ("head", str(results[-1]))]]
    if repo:
        values.queries += [[("repo", repo)], [("repository", repo)], [("repository", repo), ("state", "open")]]
    if known.get("hardware"):
        values.queries += [[("hardware", str(known["hardware"]))]]
    return values


def _quote(text: str) -> str:
    return quote(text.encode("utf-8", "surrogatepass"), safe="")


def hostile_text() -> Any:
    """Text no column may hold, or that a page must read with care: NUL, control characters, lone surrogates,
    long strings, numbers past every integer type, markup."""
    from hypothesis import strategies as st

    return st.one_of(
        st.sampled_from(HOSTILE_SAMPLES),
        st.text(max_size=40),
        st.text(st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), min_size=1, max_size=3),
        st.text(st.characters(max_codepoint=0x1F) | st.sampled_from("\x7f\x85\u2028\u2029"), min_size=1,
                max_size=8),
        st.builds(lambda piece, n: piece * n,
                  st.sampled_from(["a", "\x00", "\u00e9", "\U0001f600", "\ud800", "%", "/"]), st.integers(300, 3000)),
        st.sampled_from(BOUNDARY_INTS).map(str),
        st.integers(min_value=-(2**80), max_value=2**80).map(str),
    )


def _page_strategy(rule: Any, values: PageValues, names: list[str], stored: bool) -> Any:
    """URLs of one page route (path and query, percent-encoded). ``stored``: segments and arguments that exist
    (``values``) with a few hostile arguments added, in any order; otherwise any names and values."""
    from hypothesis import strategies as st

    known_texts = [_quote(t) for t in values.texts] or ["x"]
    every_id = sorted({i for ids in values.ids.values() for i in ids}) or [1]
    hostile_value = st.one_of(hostile_text().map(_quote), st.sampled_from(RAW_ESCAPES),
                              st.binary(min_size=1, max_size=12).map(lambda b: quote(b, safe="")))
    value = st.one_of(st.sampled_from(known_texts), st.sampled_from(every_id).map(str), hostile_value)

    def segment(converter: str | None, name: str) -> Any:
        if converter == "int":
            ids = values.ids.get(name) or every_id
            if stored:
                return st.sampled_from(ids).map(str)
            return st.one_of(st.sampled_from(ids), st.integers(0, 60), st.sampled_from(BOUNDARY_INTS),
                             st.integers(2**63, 2**200)).map(str) | st.sampled_from(["01", "1.0", "+1", "%201"])
        text = st.sampled_from(known_texts) if stored else value
        if converter == "path":
            return st.lists(text, min_size=1, max_size=3).map("/".join)
        return text

    parts = _SEGMENT.split(rule.rule)  # literal, converter, name, literal, converter, name, ..., literal
    segments = [segment(parts[i + 1], parts[i + 2]) for i in range(0, len(parts) - 1, 3)]
    name = st.one_of(st.sampled_from(names), st.sampled_from(names), st.sampled_from(URL_FOR_NAMES),
                     hostile_text().map(_quote))
    extra = st.lists(st.tuples(name, value), max_size=3 if stored else 6)
    if stored:
        base = st.sampled_from(values.queries).map(lambda q: [(n, _quote(v)) for n, v in q])
        query = st.tuples(base, extra).flatmap(lambda pair: st.permutations([*pair[0], *pair[1]]))
    else:
        query = extra

    def url(drawn: tuple[list[str], list[tuple[str, str]]]) -> str:
        filled, args = drawn
        path = "".join(p + (filled[i // 3] if i + 1 < len(parts) else "")
                       for i, p in enumerate(parts) if i % 3 == 0)
        return path + ("?" + "&".join(f"{n}={v}" for n, v in args) if args else "")

    return st.tuples(st.tuples(*segments).map(list), query).map(url)


def page_problem(content_type: str, body: bytes, status: int) -> str | None:
    """Why a page's answer is not what a person should see: a traceback anywhere, or an error that is not a page."""
    text = body.decode("utf-8", "replace")
    if "Traceback" in text or "Werkzeug Debugger" in text:
        return "body carries a traceback"
    if status >= 400 and not content_type.startswith("text/html"):
        return f"content type {content_type!r}, not a page"
    return None


def log_in(base_url: str, token: str, timeout_s: float = 30) -> Any:
    """A requests session logged in to the dashboard with ``token`` (it needs the triage scope)."""
    import requests

    session = requests.Session()
    form = session.get(f"{base_url}/login", timeout=timeout_s)
    match = re.search(r'name="csrf_token" value="([^"]+)"', form.text)
    if match is None:
        raise RuntimeError(f"no CSRF token on /login ({form.status_code}): {form.text[:300]!r}")
    answer = session.post(f"{base_url}/login", data={"csrf_token": match.group(1), "token": token, "next": "/"},
                          allow_redirects=False, timeout=timeout_s)
    if answer.status_code != 303:
        raise RuntimeError(f"logging in answered {answer.status_code}: {answer.text[:300]!r}")
    return session


def fuzz_pages(base_url: str, token: str | None, *, max_examples: int, seed: int | None = None,
               values: PageValues | None = None, rules: list[Any] | None = None, timeout_s: float = 30,
               progress: Callable[[str], None] | None = None) -> dict[str, Tally]:
    """Every GET page route (``dashboard_rules``), ``max_examples`` generated URLs and as many with stored values
    (``values``); every other request logged in with ``token`` when one is given. A tally per route."""
    import requests

    values = values or PageValues(queries=[[]])
    names = page_query_names()
    anonymous = requests.Session()
    sessions = [anonymous, log_in(base_url, token, timeout_s) if token else anonymous]
    tallies: dict[str, Tally] = {}
    counter = 0
    for rule in rules if rules is not None else dashboard_rules():
        tally = tallies.setdefault(f"page GET {rule.rule}", Tally(phase="pages"))

        def one(url: str, tally: Tally) -> None:
            nonlocal counter
            counter += 1
            session = sessions[counter % 2]
            who = "logged in" if session is not anonymous else "anonymous"
            tally.requests += 1
            started = time.perf_counter()
            try:
                response = session.get(base_url + url, allow_redirects=False, timeout=timeout_s)
            except requests.RequestException as exc:
                tally.transport_errors += 1
                if len(tally.failures) < 3:
                    tally.failures.append(f"{type(exc).__name__} ({who}): curl -i '{base_url}{url}'")
                return
            tally.slowest_s = max(tally.slowest_s, time.perf_counter() - started)
            tally.count(response.status_code)
            problem = f"{response.status_code}" if response.status_code >= 500 else None
            shape = page_problem(response.headers.get("content-type", ""), response.content, response.status_code)
            if shape is not None:
                tally.shape_violations += 1
                problem = shape if problem is None else f"{problem}, {shape}"
            if problem is not None and len(tally.failures) < 3:
                tally.failures.append(f"{problem} ({who}): curl -i '{base_url}{url}' -> {response.content[:300]!r}")

        for stored in (False, True):
            _run_examples(_page_strategy(rule, values, names, stored), _bound(one, tally), max_examples, seed)
        if progress is not None:
            progress(f"page GET {rule.rule}: {tally.requests} requests")
    return tallies


def _run_examples(strategy: Any, test: Callable[[Any], None], max_examples: int, seed: int | None) -> None:
    """``test`` over ``max_examples`` examples of ``strategy``, repeatable (derandomized, or ``seed``), unshrunk."""
    import hypothesis
    from hypothesis import HealthCheck, Phase

    wrapped = hypothesis.given(strategy)(test)
    wrapped = hypothesis.settings(max_examples=max_examples, derandomize=seed is None, database=None, deadline=None,
                                  phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck),
                                  verbosity=hypothesis.Verbosity.quiet)(wrapped)
    if seed is not None:
        wrapped = hypothesis.seed(seed)(wrapped)
    wrapped()


# --- the GitHub webhook ------------------------------------------------------------------------------------------

HOOK_PATH = "/hooks/github"
HOOK_REPO = "acme/kernels"
HOOK_LABEL = "kernelwatch:run"  # the default KERNELWATCH_GITHUB_PR_LABEL
DEEP = "__kw_fuzz_deep__"
_DELETE = object()
# Fields the handler reads beyond those ``payload_problem`` requires (service/pipeline/pull_requests.py _REQUIRED).
_READ_TOO = {
    "pull_request": ("action", "number", "label", "label.name", "installation", "installation.id",
                     "pull_request.labels", "pull_request.head.repo", "pull_request.head.repo.full_name",
                     "pull_request.head.ref", "pull_request.state", "repository"),
    "issue_comment": ("action", "issue.pull_request", "comment.body", "installation", "installation.id"),
}
_HEADER_VALUE = re.compile(r"^\S[^\r\n]*$")  # what requests lets through as a header value


def hook_payload(event: str, sha: tuple[str, str] = ("a" * 40, "b" * 40)) -> dict[str, Any]:
    """A delivery of ``event`` as GitHub sends it, that the hook stores (a pull request opened, a run command)."""
    clone = f"https://github.com/{HOOK_REPO}.git"
    if event == "issue_comment":
        return {"action": "created", "issue": {"number": 7, "pull_request": {"url": "https://x"}},
                "comment": {"body": "/kernelwatch run", "user": {"login": "ada"}},
                "repository": {"full_name": HOOK_REPO}, "installation": {"id": 77}}
    pull = {"number": 7, "state": "open", "labels": [{"name": HOOK_LABEL}],
            "base": {"ref": "main", "sha": sha[0], "repo": {"full_name": HOOK_REPO, "clone_url": clone}},
            "head": {"ref": "feature", "sha": sha[1], "repo": {"full_name": HOOK_REPO, "clone_url": clone}}}
    return {"action": "opened", "number": 7, "pull_request": pull, "repository": {"full_name": HOOK_REPO},
            "installation": {"id": 77}, "label": {"name": HOOK_LABEL}}


def _json_values() -> Any:
    from hypothesis import strategies as st

    scalar = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.sampled_from(BOUNDARY_INTS),
                       st.floats(allow_nan=True, allow_infinity=True), hostile_text(), st.text(max_size=20))
    return st.recursive(scalar, lambda inner: st.lists(inner, max_size=4)
                        | st.dictionaries(st.text(max_size=10) | st.sampled_from(["name", "sha", "id", "number"]),
                                          inner, max_size=4), max_leaves=10)


def _set_path(payload: dict[str, Any], path: str, value: Any) -> None:
    parts = path.split(".")
    node: Any = payload
    for part in parts[:-1]:
        if not isinstance(node, dict):
            return
        node = node.setdefault(part, {}) if not isinstance(node.get(part), dict) else node[part]
    if isinstance(node, dict):
        if value is _DELETE:
            node.pop(parts[-1], None)
        else:
            node[parts[-1]] = value


def _hook_bodies(event: str) -> Any:
    """(body, content type) pairs: GitHub's payload of ``event`` with wrong types or hostile values at the fields
    the handler reads, JSON of any shape, deep nesting, bodies that are not JSON."""
    from hypothesis import strategies as st

    from service.pipeline.pull_requests import _REQUIRED

    shaped_event = event if event in _REQUIRED else "pull_request"
    paths = [p for p, _ in _REQUIRED[shaped_event]] + list(_READ_TOO[shaped_event])
    # What a field of the right type may still hold that no column takes, or JSON that is no JSON.
    pointed: Any = st.sampled_from([float("nan"), float("inf"), -float("inf"), 2**31, 2**63, 2**70, -1, True, None, "",
                                    "a\x00b", "\ud800", "x" * 41, "x" * 256, "x" * 5000, [], {}, DEEP])
    mutation = st.tuples(st.sampled_from(paths), st.one_of(pointed, pointed, pointed, _json_values(), st.just(_DELETE)))
    actions = st.sampled_from(["opened", "synchronize", "reopened", "closed", "labeled", "edited", "created",
                               "deleted"]) | _json_values()

    @st.composite
    def shaped(draw: Any) -> tuple[bytes, str]:
        payload = hook_payload(shaped_event)
        if draw(st.integers(0, 3)) == 0:
            payload["action"] = draw(actions)
        for path, value in draw(st.lists(mutation, min_size=1, max_size=2)):
            _set_path(payload, path, value)
        depth = draw(st.sampled_from([2, 50, 900, 990, 2000]))
        encoding = draw(st.sampled_from(["ascii", "utf-8", "duplicate keys", "bom"]))
        if encoding == "ascii":
            text = json.dumps(payload)  # lone surrogates as \ud800 escapes, NaN as NaN
        else:
            text = json.dumps(payload, ensure_ascii=False)
        text = text.replace(json.dumps(DEEP), "[" * depth + "]" * depth)
        if encoding == "duplicate keys" and text.endswith("}"):
            text = text[:-1] + ', "action": "opened"}'
        body = text.encode("utf-8", "surrogatepass")  # a lone surrogate as the bytes no decoder takes
        return (b"\xef\xbb\xbf" + body if encoding == "bom" else body), "application/json"

    def nested(depth: int, kind: str) -> bytes:
        if kind == "list":
            return b"[" * depth + b"]" * depth
        return b'{"a":' * depth + b"1" + b"}" * depth

    any_json = _json_values().map(lambda v: (json.dumps(v).encode(), "application/json"))
    deep = st.builds(lambda d, k: (nested(d, k), "application/json"),
                     st.sampled_from([100, 990, 1000, 5000, 100_000]), st.sampled_from(["list", "dict"]))
    not_json = st.tuples(
        st.one_of(st.binary(max_size=200),
                  st.sampled_from([b"", b"null", b"{", b'{"action": "opened",}', b"\xff\xfe{\x00}\x00", b"NaN",
                                   b'"text"', b"123", b"[]", b"\xef\xbb\xbf{}",
                                   b"payload=%7B%22action%22%3A%22opened%22%7D"])),
        st.sampled_from(["application/json", "application/x-www-form-urlencoded", "text/plain", ""]))
    return st.one_of(shaped(), shaped(), shaped(), any_json, deep, not_json)


def _header_text() -> Any:
    from hypothesis import strategies as st

    return st.text(st.characters(max_codepoint=0xFF, exclude_characters="\r\n"), min_size=1,
                   max_size=120).filter(lambda t: _HEADER_VALUE.match(t) is not None)


def _hook_strategy(kind: str) -> Any:
    """(event header or None, delivery header or None, body, content type) of one class of event."""
    from hypothesis import strategies as st

    events = {"pull_request": st.just("pull_request"), "issue_comment": st.just("issue_comment"),
              "ping": st.just("ping"),
              "other events": st.one_of(st.sampled_from(["push", "unknown", "installation", "check_suite",
                                                         "PULL_REQUEST", "pull_request ", "", None]),
                                        _header_text())}[kind]
    delivery = st.one_of(st.uuids().map(str), st.uuids().map(str), st.sampled_from(["dup-1", "dup-2", "dup-3"]),
                         st.sampled_from([None, "", "d" * 100, "d" * 101, "d" * 300, "\x01", "\xe9t\xe9"]),
                         st.sampled_from(["\x00", "ab\x00c", "\x00" * 100]), _header_text())
    body = _hook_bodies(kind if kind in ("pull_request", "issue_comment") else "pull_request")
    return st.tuples(events, delivery, body)


def fuzz_webhook(base_url: str, secret: str, *, max_examples: int, seed: int | None = None,
                 wrong_signature_every: int = 10, timeout_s: float = 30,
                 progress: Callable[[str], None] | None = None) -> tuple[dict[str, Tally], set[str]]:
    """POST /hooks/github, ``max_examples`` deliveries of each class of event, signed with ``secret`` (every
    ``wrong_signature_every``-th with a wrong signature or none): a tally per class, and the delivery ids the hook
    answered as stored (202)."""
    import requests

    session = requests.Session()
    stored: set[str] = set()
    tallies: dict[str, Tally] = {}
    counter = 0
    for kind in ("pull_request", "issue_comment", "ping", "other events"):
        tally = tallies.setdefault(f"POST {HOOK_PATH} {kind}", Tally(phase="webhook"))

        def one(drawn: tuple[str | None, str | None, tuple[bytes, str]], tally: Tally) -> None:
            nonlocal counter
            counter += 1
            event, delivery, (body, content_type) = drawn
            signature: str | None = "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
            if wrong_signature_every and counter % wrong_signature_every == 0:
                # Alternately a signature over another body, and none at all.
                signature = None if counter % 2 else "sha256=" + hmac.new(secret.encode(), body + b" ",
                                                                          hashlib.sha256).hexdigest()
            headers = {"X-GitHub-Event": event, "X-GitHub-Delivery": delivery, "X-Hub-Signature-256": signature,
                       "Content-Type": content_type or None, "User-Agent": "GitHub-Hookshot/kw-fuzz"}
            sent = {k: v for k, v in headers.items() if v is not None}
            tally.requests += 1
            started = time.perf_counter()
            try:
                response = session.post(base_url + HOOK_PATH, data=body, headers=sent, allow_redirects=False,
                                        timeout=timeout_s)
            except requests.RequestException as exc:
                tally.transport_errors += 1
                if len(tally.failures) < 3:
                    tally.failures.append(f"{type(exc).__name__}: {_hook_curl(base_url, sent, body)}")
                return
            tally.slowest_s = max(tally.slowest_s, time.perf_counter() - started)
            status = response.status_code
            tally.count(status)
            content_type_got = response.headers.get("content-type", "")
            problem = f"{status}" if status >= 500 else None
            if status >= 400:
                shape = error_shape_problem(content_type_got, response.content)
                code = _error_code(response.content)
                tally.outcomes[f"refused {status}" + (f" {code}" if code else "")] += 1
            else:
                shape, outcome = _hook_answer(content_type_got, response.content, status)
                tally.outcomes[outcome] += 1
                if outcome == "stored" and delivery is not None:
                    stored.add(delivery.strip(" \t"))  # what HTTP strips of a header value
            if shape is not None:
                tally.shape_violations += 1
                problem = f"{status} {shape}" if problem is None else f"{problem}, {shape}"
            if problem is not None and len(tally.failures) < 3:
                tally.failures.append(f"{problem}: {_hook_curl(base_url, sent, body)} -> {response.content[:300]!r}")

        _run_examples(_hook_strategy(kind), _bound(one, tally), max_examples, seed)
        if progress is not None:
            progress(f"POST {HOOK_PATH} {kind}: {tally.requests} requests")
    return tallies, stored


def _error_code(body: bytes) -> str:
    try:
        return str(json.loads(body)["error"]["code"])
    except (ValueError, KeyError, TypeError):
        return ""


def _hook_answer(content_type: str, body: bytes, status: int) -> tuple[str | None, str]:
    """(why a 2xx is not ``{"ok": true, ...}`` or None, what the hook did: stored, duplicate, ignored or ping)."""
    if not content_type.startswith("application/json"):
        return f"content type {content_type!r}, not application/json", "unreadable"
    try:
        doc = json.loads(body)
    except ValueError:
        return "body is not JSON", "unreadable"
    if not isinstance(doc, dict) or doc.get("ok") is not True:
        return "body is not {\"ok\": true, ...}", "unreadable"
    if status == 202 and doc.get("queued") is True:
        return None, "stored"
    for outcome in ("duplicate", "ignored"):
        if outcome in doc:
            return None, outcome
    if doc.get("event") == "ping":
        return None, "ping"
    return f"{status} answer of no known kind", "unreadable"


def _hook_curl(base_url: str, headers: dict[str, str], body: bytes) -> str:
    shown = " ".join(f"-H {json.dumps(f'{k}: {v}')}" for k, v in headers.items())
    data = body[:200].decode("utf-8", "backslashreplace")
    return f"curl -i -X POST {base_url}{HOOK_PATH} {shown} --data-binary {json.dumps(data)}" + (
        f" ({len(body)} bytes)" if len(body) > 200 else "")


def check_stored_deliveries(database_url: str, stored: set[str], tally: Tally) -> str:
    """The deliveries the hook answered as stored against the rows of webhook_delivery (the scratch database holds
    no others): each stored once, and nothing refused stored. A mismatch is counted on ``tally``."""
    from sqlalchemy import text

    from service.store.db import make_engine

    engine = make_engine(database_url)
    try:
        with engine.connect() as conn:
            rows = list(conn.execute(text("SELECT delivery_uid, event, state FROM webhook_delivery")))
    finally:
        engine.dispose()
    held = Counter(uid for uid, _, _ in rows)
    states = Counter(f"{event} {state}" for _, event, state in rows)
    extra, missing = set(held) - stored, stored - set(held)
    if extra or missing or any(n > 1 for n in held.values()):
        tally.mismatches += 1
        tally.failures.append(f"the database holds {len(rows)} deliveries for {len(stored)} answered as stored: "
                              f"not answered {sorted(extra)[:5]}, missing {sorted(missing)[:5]}")
    return (f"webhook_delivery holds {len(rows)} rows for {len(stored)} deliveries answered 202 "
            f"({', '.join(f'{n} {k}' for k, n in sorted(states.items()))})")


def handle_stored_deliveries(database_url: str, tally: Tally) -> str:
    """Each stored delivery through the handler in this process, as the embedded form does before answering (no
    GitHub credentials, the runs it asks for dropped): a delivery the hook let in that the handler cannot take
    (it raises) would have been a 500 there, and is counted on ``tally``."""
    import tempfile

    from sqlalchemy import text

    from service.context import Context
    from service.settings import load_settings

    outcomes: Counter[str] = Counter()
    unhandled: list[str] = []
    with tempfile.TemporaryDirectory(prefix="kw-fuzz-hook-") as home:
        ctx = Context.create(load_settings({"KERNELWATCH_HOME": home, "KERNELWATCH_DATABASE_URL": database_url,
                                            "KERNELWATCH_FOLLOW_UP": "none"}))
        hooks = ctx.pull_requests
        assert hooks is not None  # made by every Context.create
        try:
            with ctx.engine.connect() as conn:
                ids = list(conn.execute(text("SELECT id FROM webhook_delivery ORDER BY id")).scalars())
            for delivery_id in ids:
                try:
                    outcome = hooks.handle_delivery(delivery_id, lambda runs: None)
                except Exception as exc:  # noqa: BLE001 - any of them is the finding
                    tally.mismatches += 1
                    outcomes["raised"] += 1
                    if len(tally.failures) < 6:
                        tally.failures.append(f"the handler raised on stored delivery {delivery_id}: "
                                              f"{type(exc).__name__}: {str(exc)[:300]}")
                    continue
                outcomes[next((k for k in ("not handled", "ignored") if outcome.startswith(k)), "handled")] += 1
                if outcome.startswith("not handled") and len(unhandled) < 2:
                    unhandled.append(outcome[:160])
        finally:
            ctx.close()
    return (f"handled in-process: {', '.join(f'{n} {k}' for k, n in sorted(outcomes.items())) or 'none stored'}"
            + "".join(f"\n    {line}" for line in unhandled))


# --- the scratch service -----------------------------------------------------------------------------------------

def seed_history(database_url: str, home: Path) -> list[str]:
    """Twenty runs of one benchmark with a 10 % step at the tenth: runs, series, findings and an alert to read."""
    from service.context import Context
    from service.settings import load_settings
    from tests import builders

    ctx = Context.create(load_settings({"KERNELWATCH_HOME": str(home), "KERNELWATCH_DATABASE_URL": database_url,
                                        "KERNELWATCH_FOLLOW_UP": "none"}))
    manifests = builders.step_series_manifests([1.0] * 10 + [1.1] * 10, seed=7)
    try:
        for manifest in manifests:
            ctx.submit(manifest)
    finally:
        ctx.close()
    return [m["run_id"] for m in manifests]


def fuzz_token(database_url: str) -> str:
    """A token holding submit and triage (reads need none, or any): everything but admin, so the fuzzer cannot
    revoke its own token."""
    from service.pipeline.tokens import create_token
    from service.store.db import make_engine, make_session_factory, unit_of_work

    engine = make_engine(database_url)
    try:
        with unit_of_work(make_session_factory(engine)) as session:
            return create_token(session, f"fuzz-{uuid.uuid4().hex[:8]}", ["submit", "triage"])[1]
    finally:
        engine.dispose()


@dataclass
class Target:
    """The service fuzzed: its root URL, a token with the submit and triage scopes, what exists in its store."""

    base_url: str
    token: str
    known: dict[str, Any]  # stored_values, for the API's parameters
    webhook_secret: str | None = None
    database_url: str | None = None  # the scratch database's (the stored deliveries are counted there)
    server_log: Callable[[], str] | None = None  # the scratch web process's log so far

    @property
    def api_url(self) -> str:
        return f"{self.base_url}/api/v1"


@contextmanager
def scratch_service(admin_url: str, redis_url: str, home: Path, **settings: str) -> Iterator[Target]:
    """`kernelwatch serve` over a seeded scratch database, in the distributed form (a broker, so that enqueueing
    a run is accepted, not the embedded form's 503), with a webhook secret; yields the target. The broker's
    database is emptied before and after: runs and deliveries enqueued here go nowhere."""
    import redis

    from tests.processes import clean_env, start_web
    from tests.scratch_database import scratch_database

    broker = redis.Redis.from_url(redis_url, socket_connect_timeout=3)
    broker.flushdb()
    try:
        with scratch_database("kw_fuzz", admin_url, migrate=True) as database_url:
            run_ids = seed_history(database_url, home)
            token = fuzz_token(database_url)
            settings = {"KERNELWATCH_GITHUB_WEBHOOK_SECRET": WEBHOOK_SECRET, **settings}
            env = clean_env(home, KERNELWATCH_DATABASE_URL=database_url, KERNELWATCH_REDIS_URL=redis_url,
                            KERNELWATCH_FOLLOW_UP="none", **settings)
            with start_web(env, home) as web:
                known = {**stored_values(f"{web.url}/api/v1"), "run_uid": run_ids[-1]}
                yield Target(web.url, token, known, settings["KERNELWATCH_GITHUB_WEBHOOK_SECRET"] or None,
                             database_url, web.process.output)
    finally:
        broker.flushdb()
        broker.close()


def fuzz_all(target: Target, phases: tuple[str, ...], *, max_examples: int, page_examples: int,
             webhook_examples: int, seed: int | None = None,
             progress: Callable[[str], None] | None = None) -> tuple[dict[str, Tally], list[str]]:
    """The phases asked for, in order, against one service: the tallies, and a line per phase (requests, answers,
    wall time; the webhook's outcomes)."""
    tallies: dict[str, Tally] = {}
    notes: list[str] = []
    for phase in phases:
        started = time.monotonic()
        after: list[str] = []
        if phase == "api":
            found = fuzz_api(target.api_url, target.token, max_examples=max_examples, seed=seed, known=target.known,
                             progress=progress)
        elif phase == "pages":
            values = stored_page_values(target.known, target.database_url)
            found = fuzz_pages(target.base_url, target.token, max_examples=page_examples, seed=seed, values=values,
                               progress=progress)
        elif target.webhook_secret:
            found, stored = fuzz_webhook(target.base_url, target.webhook_secret, max_examples=webhook_examples,
                                         seed=seed, progress=progress)
            outcomes = sum((t.outcomes for t in found.values()), Counter())
            after.append("  deliveries: " + ", ".join(f"{n} {k}" for k, n in sorted(outcomes.items())))
            if target.database_url:
                first = next(iter(found.values()))
                after.append("  " + check_stored_deliveries(target.database_url, stored, first))
                after.append("  " + handle_stored_deliveries(target.database_url, first))
        else:
            notes.append("webhook: skipped (no --webhook-secret)")
            continue
        tallies.update(found)
        notes += [f"{phase}: {phase_summary(found.values())}, {time.monotonic() - started:.0f} s", *after]
    if target.server_log is not None:
        raised = server_exceptions(target.server_log())
        notes.append(f"server log: {sum(raised.values())} tracebacks" + "".join(
            f"\n  {n} x {line}" for line, n in raised.most_common(8)))
    return tallies, notes


def server_exceptions(log: str) -> Counter[str]:
    """The exceptions of the tracebacks in a web process's log (the last line of each, cut short), counted: what
    the 5xx were, which the answers do not say."""
    found: Counter[str] = Counter()
    for chunk in log.split("Traceback (most recent call last):")[1:]:
        if "The above exception was the direct cause" in chunk or "During handling of the above" in chunk:
            continue  # a chain's inner exception: its outer one is counted
        lines = [line for line in chunk.splitlines() if re.match(r"[A-Za-z_][\w.]*(: |$)", line)]
        if lines:
            found[lines[0][:200]] += 1
    return found


def phase_summary(tallies: Any) -> str:
    t = list(tallies)
    return (f"{sum(x.requests for x in t)} requests, {sum(x.ok for x in t)} 2xx/3xx, "
            f"{sum(x.client_errors for x in t)} 4xx, {sum(x.server_errors for x in t)} 5xx, "
            f"{sum(x.transport_errors for x in t)} no answer, {sum(x.shape_violations for x in t)} shape violations")


def report(tallies: dict[str, Tally], min_requests: int, notes: list[str] | None = None) -> int:
    print(table(tallies))
    for label, tally in tallies.items():
        for failure in tally.failures:
            print(f"\n{label}: {failure}")
    print()
    for note in notes or []:
        print(note)
    api = [t for t in tallies.values() if t.phase == "api"]
    total = sum(t.requests for t in api)
    slow = [label for label, t in tallies.items() if t.slowest_s > SLOW_S]
    if slow:
        print(f"\nslower than {SLOW_S:.0f} s: {', '.join(slow)}")
    failed = [label for label, t in tallies.items() if t.failed]
    if failed:
        print(f"\nFAILED: {', '.join(failed)}")
        return 1
    if api and total < min_requests:
        print(f"\nFAILED: only {total} API requests, fewer than --min-requests {min_requests}")
        return 1
    print(f"\nok: {sum(t.requests for t in tallies.values())} requests, no 5xx, every error in its stable shape, "
          "every API status documented")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", help="the service's root (http://host:port); default: start one on a scratch "
                                      "PostgreSQL database")
    parser.add_argument("--token", help="with --url: a token with the submit and triage scopes")
    parser.add_argument("--webhook-secret", help="with --url: the service's KERNELWATCH_GITHUB_WEBHOOK_SECRET "
                                                 "(without it the webhook phase is skipped)")
    parser.add_argument("--max-examples", type=int, default=40, help="examples per API operation and mode")
    parser.add_argument("--page-examples", type=int, default=40, help="examples per page route and mode")
    parser.add_argument("--webhook-examples", type=int, default=400, help="deliveries per class of webhook event")
    parser.add_argument("--skip", action="append", choices=PHASES, default=[], help="a phase not to run (repeatable)")
    parser.add_argument("--seed", type=int, help="hypothesis seed (default: derandomized)")
    parser.add_argument("--min-requests", type=int, default=1000, help="API requests a run makes at least")
    parser.add_argument("--admin-url", default=os.environ.get("KERNELWATCH_TEST_PG_ADMIN",
                                                              "postgresql://postgres@127.0.0.1:5432/postgres"))
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/5",
                        help="the scratch service's broker (its database is emptied)")
    args = parser.parse_args()
    if bool(args.url) != bool(args.token):
        parser.error("--url and --token go together")
    phases = tuple(p for p in PHASES if p not in args.skip)
    print(f"hypothesis: {'seed ' + str(args.seed) if args.seed is not None else 'derandomized'}; phases "
          f"{', '.join(phases)}; max_examples {args.max_examples} per API operation and mode, "
          f"{args.page_examples} per page and mode, {args.webhook_examples} per webhook event class")
    started = time.monotonic()
    examples = {"max_examples": args.max_examples, "page_examples": args.page_examples,
                "webhook_examples": args.webhook_examples, "seed": args.seed, "progress": print}
    if args.url:
        base_url = args.url.rstrip("/")
        target = Target(base_url, args.token, stored_values(f"{base_url}/api/v1"), args.webhook_secret)
        tallies, notes = fuzz_all(target, phases, **examples)  # type: ignore[arg-type]
    else:
        import tempfile

        with tempfile.TemporaryDirectory(prefix="kw-fuzz-") as home, \
                scratch_service(args.admin_url, args.redis_url, Path(home)) as target:
            tallies, notes = fuzz_all(target, phases, **examples)  # type: ignore[arg-type]
    print(f"\n{time.monotonic() - started:.0f} s\n")
    return report(tallies, args.min_requests, notes)


if __name__ == "__main__":
    sys.exit(main())
