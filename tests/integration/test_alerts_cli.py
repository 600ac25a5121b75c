"""`kernelwatch alerts list` and `kernelwatch alerts triage` as a user types them, on both databases."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from sqlalchemy import select

from service.contract import parse_manifest
from service.detect.series_detector import EDivisiveDetector
from service.pipeline.detection import detect_many
from service.pipeline.ingest import ingest_manifest
from service.store.db import make_engine, make_session_factory, unit_of_work, upgrade
from service.store.models import Series
from tests import builders
from tests.cli_inprocess import run_cli
from tests.processes import clean_env


def kernelwatch(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return run_cli(args, env)  # in this process (tests/cli_inprocess.py says why)


def stored_step(database_url: str) -> None:
    """Two benchmarks that both double at commit 5, detected: one alert."""
    upgrade(database_url)
    engine = make_engine(database_url)
    sessions = make_session_factory(engine)
    try:
        with unit_of_work(sessions) as s:
            for p, level in enumerate([1e-3] * 5 + [2e-3] * 5):
                results = [builders.result(name=n, samples=[level * (1 + 0.002 * i) for i in range(5)])
                           for n in ("one", "two")]
                ingest_manifest(s, parse_manifest(builders.manifest(p, results)))
        with unit_of_work(sessions) as s:
            detect_many(s, list(s.scalars(select(Series.id))), EDivisiveDetector())
    finally:
        engine.dispose()


def test_list_and_triage_from_the_command_line(tmp_path: Path, database_url: str) -> None:
    stored_step(database_url)
    env = clean_env(tmp_path / "home", KERNELWATCH_DATABASE_URL=database_url, USER="ci")

    listed = kernelwatch(["alerts", "list", "--format", "json"], env)
    assert listed.returncode == 0, listed.stderr
    [alert] = json.loads(listed.stdout)["alerts"]
    assert (alert["state"], alert["kind"], alert["commit_sha"]) == ("untriaged", "regression",
                                                                    builders.sha_for("demo-5"))
    assert len(alert["findings"]) == 2 and alert["notes"] == []

    triaged = kernelwatch(["alerts", "triage", str(alert["id"]), "acknowledged", "--note", "planted"], env)
    assert triaged.returncode == 0, triaged.stderr
    assert triaged.stdout == f"alert {alert['id']} is acknowledged (note added)\n"

    text = kernelwatch(["alerts", "list", "--state", "acknowledged", "--repo", "demo"], env)
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert lines[0].startswith(f"alert {alert['id']}  acknowledged  regression  demo  ")
    assert lines[-1].endswith("ci untriaged -> acknowledged: planted")
    # Issue 18: stored text reaches the terminal with its control characters shown, not obeyed.
    hostile = kernelwatch(["alerts", "triage", str(alert["id"]), "investigating", "--note",
                           "see \x1b]0;TITLE\x07\x1b[2J here"], env)
    assert hostile.returncode == 0, hostile.stderr
    shown = kernelwatch(["alerts", "list", "--state", "investigating"], env)
    assert shown.returncode == 0 and "\x1b" not in shown.stdout and "\x07" not in shown.stdout, shown.stdout
    assert shown.stdout.splitlines()[-1].endswith("see \\x1b]0;TITLE\\x07\\x1b[2J here"), shown.stdout
    none = kernelwatch(["alerts", "list", "--state", "fixed"], env)
    assert (none.returncode, none.stdout) == (0, "no alerts\n")

    for args, message in [
        (["alerts", "triage", "999999", "fixed"], "kernelwatch: error: no alert 999999\n"),
        (["alerts", "triage", str(alert["id"]), "closed"],
         f"kernelwatch: error: alert {alert['id']}: unknown alert state 'closed'; one of: untriaged, "
         "acknowledged, investigating, invalid, wontfix, fixed, improvement\n"),
        (["alerts", "list", "--state", "closed"], "kernelwatch: error: unknown alert state 'closed'; one of: "
         "untriaged, acknowledged, investigating, invalid, wontfix, fixed, improvement\n"),
    ]:
        refused = kernelwatch(args, env)
        assert (refused.returncode, refused.stdout, refused.stderr) == (2, "", message)
