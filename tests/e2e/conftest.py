from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO_ROOT
from tests.processes import clean_env, start_web

CHROMIUM = "/usr/bin/chromium"
# Without these, Chromium keeps trying to reach Google's hosts, which this machine cannot.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
SCREENSHOTS = REPO_ROOT / "test-output" / "screenshots"


def open_page(browser: Any, base: str, width: int = 1280, height: int = 900) -> tuple[Any, list[str]]:
    """A new page, and the list it records each request to anything outside ``base`` in (the pages must fetch
    nothing from outside)."""
    page = browser.new_page(viewport={"width": width, "height": height})
    outside: list[str] = []
    page.on("request", lambda r: outside.append(r.url) if not r.url.startswith(base) else None)
    return page, outside


def serve(env: dict[str, str]) -> Iterator[str]:
    """`kernelwatch serve` in its own process; yields its base URL once it answers. Its log lies beside
    KERNELWATCH_HOME."""
    with start_web(env, Path(env["KERNELWATCH_HOME"]).parent, name="serve") as web:
        yield web.url


@pytest.fixture(scope="session")
def browser():  # type: ignore[no-untyped-def]
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: install Debian's chromium (make test does)")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield b
        b.close()


# The demo's data (real commits, real JAX runs), made once for every test that reads it: the demo's own tests
# and the dashboard journey.
@pytest.fixture(scope="session")
def demo(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    base = tmp_path_factory.mktemp("demo")
    env = clean_env(base / "home", KERNELWATCH_CALIBRATE="1")  # as a user has it: its results are held under roofs
    workdir = base / "work"
    proc = subprocess.run(
        [sys.executable, "-m", "service.cli", "demo", "--no-serve", "--workdir", str(workdir),
         "--samples", "10", "--rounds", "3"],
        env=env, capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    repo = workdir / "kernels-demo"
    log = subprocess.run(["git", "-C", str(repo), "log", "--format=%H %s", "--reverse"], check=True,
                         capture_output=True, text=True).stdout.splitlines()
    planted = next(line.split()[0] for line in log if "streaming normaliser" in line)
    return {"env": env, "stdout": proc.stdout, "planted": planted, "commits": [line.split()[0] for line in log],
            "db": f"sqlite:///{base / 'home' / 'kernelwatch.db'}"}


@pytest.fixture(scope="session")
def dashboard(demo: dict) -> Iterator[str]:  # type: ignore[type-arg]
    yield from serve(demo["env"])
