"""docker-compose.yml cannot run here (no Docker engine), so check it by construction."""

from __future__ import annotations

import re
import shutil

import yaml

from service.cli import build_parser
from tests.conftest import REPO_ROOT

COMPOSE = yaml.safe_load((REPO_ROOT / "docker-compose.yml").read_text())
KNOWN_VARIABLES = {"KERNELWATCH_DATABASE_URL", "KERNELWATCH_REDIS_URL", "KERNELWATCH_HOME", "KERNELWATCH_SECRET_KEY",
                   "KERNELWATCH_TASK_VISIBILITY_TIMEOUT", "KERNELWATCH_FOLLOW_UP"}


def app_services() -> dict[str, dict]:  # type: ignore[type-arg]
    return {name: svc for name, svc in COMPOSE["services"].items() if "build" in svc}


def test_the_services_of_the_distributed_form_are_there() -> None:
    assert {"postgres", "redis", "migrate", "web", "worker", "runner-cpu"} <= set(COMPOSE["services"])
    assert "healthcheck" in COMPOSE["services"]["postgres"] and "healthcheck" in COMPOSE["services"]["redis"]
    assert COMPOSE["services"]["web"]["depends_on"]["migrate"]["condition"] == "service_completed_successfully"


def test_every_kernelwatch_command_parses() -> None:
    parser = build_parser()
    for name, svc in app_services().items():
        command = svc["command"]
        if command[0] == "kernelwatch":
            parser.parse_args(command[1:])  # raises SystemExit on an unknown verb or option
        elif command[0] == "gunicorn":
            module, _, attr = command[-1].partition(":")
            assert (REPO_ROOT / (module.replace(".", "/") + ".py")).exists(), name
            assert re.search(rf"^{attr} = ", (REPO_ROOT / (module.replace(".", "/") + ".py")).read_text(), re.M)
            assert shutil.which("gunicorn") or (REPO_ROOT / ".venv/bin/gunicorn").exists()
        else:
            raise AssertionError(f"{name}: unexpected command {command}")


def test_only_variables_the_settings_know_are_passed() -> None:
    for name, svc in app_services().items():
        unknown = set(svc["environment"]) - KNOWN_VARIABLES
        assert not unknown, f"{name} passes {unknown}"


def test_known_variables_are_the_ones_settings_read() -> None:
    source = (REPO_ROOT / "service/settings.py").read_text()
    read = {f"KERNELWATCH_{m}" for m in re.findall(r'ENV_PREFIX}(\w+)', source)}
    assert read == KNOWN_VARIABLES
