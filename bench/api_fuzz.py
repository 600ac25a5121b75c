"""/api/v1 against its own OpenAPI document: schemathesis generates requests for every operation (valid and
invalid data), and every answer must be a 2xx or a 4xx in the stable error shape (service/api/errors.py), never a
5xx (the security issue: at least 1,000 requests a run, zero 5xx, every 4xx with the stable shape).

By default it starts the real web process (`kernelwatch serve`) on a scratch PostgreSQL database brought to head by
the migrations, with a broker (Redis database 5, emptied), seeds it with a small history (a step in one series, so
there are runs, series, findings and alerts to read), creates a token with the submit and triage scopes, and drops
the database at the end. With --url and --token it fuzzes a running service instead (nothing is seeded or
dropped).

    python bench/api_fuzz.py [--max-examples 40] [--seed N] [--min-requests 1000] [--admin-url URL]
                             [--redis-url redis://127.0.0.1:6379/5]
    python bench/api_fuzz.py --url http://127.0.0.1:8000 --token kw_...

Each operation is fuzzed --max-examples times in schemathesis's positive mode (data the document allows) and as
many in its negative mode (data it does not); every fifth request carries a wrong token or none. Hypothesis runs
derandomized (or with --seed), its database off, so a run is repeatable; the seed is printed. Prints a table
(operation, requests, 2xx/4xx/5xx, shape violations, slowest answer) and the first failing requests as curl
commands; exits 1 on any 5xx, transport error or 4xx not in the shape, or with fewer than --min-requests requests.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:  # run as a script: the service and tests packages import from the root
    sys.path.insert(0, str(REPO_ROOT))

WRONG_TOKEN = "kw_0000000000_notavalidsecretnotavalidsecret"
SLOW_S = 2.0  # an answer slower than this is reported (the web statement timeout is 5 s)


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

    @property
    def failed(self) -> bool:
        return bool(self.server_errors or self.transport_errors or self.shape_violations or self.undocumented)


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


@contextmanager
def scratch_service(admin_url: str, redis_url: str, home: Path,
                    **settings: str) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """`kernelwatch serve` over a seeded scratch database, in the distributed form (a broker, so that enqueueing
    a run is accepted, not the embedded form's 503); yields (API root URL, token, stored values). The broker's
    database is emptied before and after: runs enqueued here go nowhere."""
    import redis

    from tests.processes import clean_env, start_web
    from tests.scratch_database import scratch_database

    broker = redis.Redis.from_url(redis_url, socket_connect_timeout=3)
    broker.flushdb()
    try:
        with scratch_database("kw_fuzz", admin_url, migrate=True) as database_url:
            run_ids = seed_history(database_url, home)
            token = fuzz_token(database_url)
            env = clean_env(home, KERNELWATCH_DATABASE_URL=database_url, KERNELWATCH_REDIS_URL=redis_url,
                            KERNELWATCH_FOLLOW_UP="none", **settings)
            with start_web(env, home) as web:
                api_url = f"{web.url}/api/v1"
                yield api_url, token, {**stored_values(api_url), "run_uid": run_ids[-1]}
    finally:
        broker.flushdb()
        broker.close()


def report(tallies: dict[str, Tally], min_requests: int) -> int:
    print(table(tallies))
    for label, tally in tallies.items():
        for failure in tally.failures:
            print(f"\n{label}: {failure}")
    total = sum(t.requests for t in tallies.values())
    slow = [label for label, t in tallies.items() if t.slowest_s > SLOW_S]
    if slow:
        print(f"\nslower than {SLOW_S:.0f} s: {', '.join(slow)}")
    failed = [label for label, t in tallies.items() if t.failed]
    if failed:
        print(f"\nFAILED: {', '.join(failed)}")
        return 1
    if total < min_requests:
        print(f"\nFAILED: only {total} requests, fewer than --min-requests {min_requests}")
        return 1
    print(f"\nok: {total} requests, no 5xx, every error in the stable shape, every status documented")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", help="the service's root (http://host:port); default: start one on a scratch "
                                      "PostgreSQL database")
    parser.add_argument("--token", help="with --url: a token with the submit and triage scopes")
    parser.add_argument("--max-examples", type=int, default=40, help="examples per operation and mode")
    parser.add_argument("--seed", type=int, help="hypothesis seed (default: derandomized)")
    parser.add_argument("--min-requests", type=int, default=1000)
    parser.add_argument("--admin-url", default=os.environ.get("KERNELWATCH_TEST_PG_ADMIN",
                                                              "postgresql://postgres@127.0.0.1:5432/postgres"))
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/5",
                        help="the scratch service's broker (its database is emptied)")
    args = parser.parse_args()
    if bool(args.url) != bool(args.token):
        parser.error("--url and --token go together")
    print(f"hypothesis: {'seed ' + str(args.seed) if args.seed is not None else 'derandomized'}, "
          f"max_examples {args.max_examples} per operation and mode")
    started = time.monotonic()
    if args.url:
        api_url = f"{args.url.rstrip('/')}/api/v1"
        tallies = fuzz_api(api_url, args.token, max_examples=args.max_examples, seed=args.seed,
                           known=stored_values(api_url), progress=print)
    else:
        import tempfile

        with tempfile.TemporaryDirectory(prefix="kw-fuzz-") as home, \
                scratch_service(args.admin_url, args.redis_url, Path(home)) as (api_url, token, known):
            tallies = fuzz_api(api_url, token, max_examples=args.max_examples, seed=args.seed, known=known,
                               progress=print)
    print(f"\n{time.monotonic() - started:.0f} s\n")
    return report(tallies, args.min_requests)


if __name__ == "__main__":
    sys.exit(main())
