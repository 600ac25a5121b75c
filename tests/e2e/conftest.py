from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO_ROOT
from tests.processes import start_web

CHROMIUM = "/usr/bin/chromium"
# Without these, Chromium keeps trying to reach Google's hosts, which this machine cannot.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
SCREENSHOTS = REPO_ROOT / "test-output" / "screenshots"


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
