"""docker-compose.yml cannot run here (no Docker engine), so check it by construction."""

from __future__ import annotations

import re
import shutil
import tomllib
from pathlib import Path

import pytest
import yaml

from kernelwatch.errors import ConfigurationError
from service.cli import build_parser
from service.settings import Settings, load_settings
from tests.conftest import REPO_ROOT

COMPOSE = yaml.safe_load((REPO_ROOT / "docker-compose.yml").read_text())
SETTINGS_VARIABLES = {"KERNELWATCH_DATABASE_URL", "KERNELWATCH_REDIS_URL", "KERNELWATCH_HOME", "KERNELWATCH_SECRET_KEY",
                      "KERNELWATCH_TASK_VISIBILITY_TIMEOUT", "KERNELWATCH_FOLLOW_UP",
                      "KERNELWATCH_TRACK", "KERNELWATCH_TRACK_PERIOD", "KERNELWATCH_READ_TOKEN_REQUIRED",
                      "KERNELWATCH_URL", "KERNELWATCH_TOKEN", "KERNELWATCH_SLACK_TOKEN", "KERNELWATCH_SLACK_CHANNEL",
                      "KERNELWATCH_SLACK_API_URL", "KERNELWATCH_PUBLIC_URL", "KERNELWATCH_WEB_STATEMENT_TIMEOUT_MS"}
GITHUB_VARIABLES = {"KERNELWATCH_GITHUB_WEBHOOK_SECRET", "KERNELWATCH_GITHUB_API_URL", "KERNELWATCH_GITHUB_APP_ID",
                    "KERNELWATCH_GITHUB_APP_PRIVATE_KEY", "KERNELWATCH_GITHUB_APP_PRIVATE_KEY_FILE",
                    "KERNELWATCH_GITHUB_TOKEN", "KERNELWATCH_PR_HARDWARE", "KERNELWATCH_PR_LABEL",
                    "KERNELWATCH_PR_SAMPLES", "KERNELWATCH_PR_ROUNDS"}
RUNNER_VARIABLES = {"KERNELWATCH_CALIBRATION_CACHE"}  # runners/calibration_cache.py
KNOWN_VARIABLES = SETTINGS_VARIABLES | GITHUB_VARIABLES | RUNNER_VARIABLES


def app_services() -> dict[str, dict]:  # type: ignore[type-arg]
    return {name: svc for name, svc in COMPOSE["services"].items() if "build" in svc}


def test_the_services_of_the_distributed_form_are_there() -> None:
    assert {"postgres", "redis", "migrate", "web", "worker", "beat", "runner-cpu"} <= set(COMPOSE["services"])
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
    assert {f"KERNELWATCH_{m}" for m in re.findall(r'ENV_PREFIX}(\w+)', source)} == SETTINGS_VARIABLES
    source = (REPO_ROOT / "service/github_settings.py").read_text()
    read = {f"KERNELWATCH_{m}" for m in re.findall(r'_PREFIX}(\w+)', source)}
    read |= {f"KERNELWATCH_{m}" for m in re.findall(r'_url\(env, "(\w+)"', source)}  # read through _url(env, NAME)
    assert read == GITHUB_VARIABLES
    from runners.calibration_cache import CACHE_SETTING

    assert {CACHE_SETTING} == RUNNER_VARIABLES


def test_every_setting_of_the_service_reaches_its_containers() -> None:
    """Compose reads .env only to fill in the variables the file names: one it leaves out never reaches a
    container, whatever .env says (the GitHub hook could not be turned on, the visibility timeout not changed).
    A runner's own (its service address and token, its calibration file) are the runner's."""
    shared = set(COMPOSE["x-kernelwatch"]["environment"])
    runner_only = {"KERNELWATCH_URL", "KERNELWATCH_TOKEN", "KERNELWATCH_GITHUB_APP_PRIVATE_KEY_FILE"} | RUNNER_VARIABLES
    assert KNOWN_VARIABLES - runner_only <= shared, KNOWN_VARIABLES - runner_only - shared
    # Each default is the code's own: an empty KERNELWATCH_PR_HARDWARE or FOLLOW_UP would mean none.
    from service.github_settings import load_github_settings

    github = load_github_settings({k: _interpolated(v) for k, v in COMPOSE["x-kernelwatch"]["environment"].items()})
    assert github.pr_hardware == ("cpu",) and not github.webhook_secret
    assert (github.pr_samples, github.pr_rounds) == (20, 4)
    assert _settings("worker", Path("/nonexistent")).follow_up == ("bisect", "confirm")
    # and the runner keeps what it learns of its host on its volume
    runner = app_services()["runner-cpu"]
    [volume] = runner["volumes"]
    assert runner["environment"]["KERNELWATCH_CALIBRATION_CACHE"].startswith(volume.split(":")[1] + "/")


def test_each_process_runs_the_verb_and_queues_its_role_needs() -> None:
    parser = build_parser()
    parsed = {name: parser.parse_args(svc["command"][1:]) for name, svc in app_services().items()
              if svc["command"][0] == "kernelwatch"}
    assert parsed["migrate"].command == "db" and parsed["beat"].command == "beat"
    assert parsed["worker"].command == "worker" and parsed["worker"].queues.split(",") == ["ingest", "detect", "notify"]
    assert parsed["runner-cpu"].command == "worker" and parsed["runner-cpu"].queues == "runner.cpu"
    # A bare `kernelwatch worker` serves the same queues as the compose worker.
    assert parser.parse_args(["worker"]).queues == parsed["worker"].queues


def _interpolated(value: object, shell: dict[str, str] | None = None) -> str:
    """What compose passes for ``${VAR:-default}``: VAR from the shell's environment, else the default."""
    return re.sub(r"\$\{(\w+):-([^}]*)\}", lambda m: (shell or {}).get(m[1]) or m[2], str(value))


def _settings(name: str, home: Path, shell: dict[str, str] | None = None) -> Settings:
    env = {k: _interpolated(v, shell) for k, v in app_services()[name]["environment"].items()}
    env["KERNELWATCH_HOME"] = str(home / name)  # /data does not exist here
    return load_settings(env)  # raises ConfigurationError with the variable's name


def test_the_environment_passed_is_valid_settings(tmp_path: Path) -> None:
    for name in app_services():
        if name == "runner-cpu":
            continue  # below: it needs the token the operator makes
        settings = _settings(name, tmp_path)
        assert settings.redis_url and settings.database_url and not settings.uploads_over_http, name


def test_the_runner_uploads_to_web_over_http_and_has_no_database(tmp_path: Path) -> None:
    settings = _settings("runner-cpu", tmp_path, {"KERNELWATCH_RUNNER_TOKEN": "kw_abc_secret"})
    assert settings.uploads_over_http and settings.service_token == "kw_abc_secret"
    assert settings.database_url is None and settings.redis_url == _settings("worker", tmp_path).redis_url
    web = COMPOSE["services"]["web"]["command"]
    port = web[web.index("--bind") + 1].rsplit(":", 1)[1]
    assert settings.service_url == f"http://web:{port}"
    assert app_services()["runner-cpu"]["volumes"] != app_services()["web"]["volumes"], "a host of its own"
    # Before the operator has made the token, the runner says what is missing instead of falling back to a
    # database it does not have.
    with pytest.raises(ConfigurationError, match="KERNELWATCH_TOKEN"):
        _settings("runner-cpu", tmp_path)


def test_web_is_checked_on_the_health_endpoint_without_curl() -> None:
    web = COMPOSE["services"]["web"]
    test = web["healthcheck"]["test"]
    assert test[:3] == ["CMD", "python", "-c"], "the image has python but no curl"
    compile(test[3], "healthcheck", "exec")  # a syntax error would leave web unhealthy forever
    port = web["command"][web["command"].index("--bind") + 1].rsplit(":", 1)[1]
    assert f"http://127.0.0.1:{port}/api/v1/health" in test[3]


def test_depends_on_conditions_are_sound() -> None:
    services = COMPOSE["services"]
    conditions = {"service_started", "service_healthy", "service_completed_successfully"}
    for name, svc in services.items():
        for target, spec in svc.get("depends_on", {}).items():
            assert target in services, f"{name} depends on a missing {target}"
            assert spec["condition"] in conditions, (name, target)
            if spec["condition"] == "service_healthy":
                assert "healthcheck" in services[target], f"{name} waits for {target} to be healthy: it has no check"
            if spec["condition"] == "service_completed_successfully":
                assert services[target].get("restart") == "no", f"{target} is waited for to exit: make it one-shot"
    for name, svc in app_services().items():
        if name in ("migrate", "beat", "runner-cpu"):
            continue  # migrate makes the schema; beat only talks to Redis; the runner to Redis and web
        assert svc["depends_on"]["migrate"]["condition"] == "service_completed_successfully", name
    assert COMPOSE["services"]["runner-cpu"]["depends_on"]["web"]["condition"] == "service_healthy"
    assert COMPOSE["services"]["migrate"]["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert COMPOSE["services"]["beat"]["depends_on"]["redis"]["condition"] == "service_healthy"

    def reaches(start: str, seen: tuple[str, ...]) -> None:
        for target in services[start].get("depends_on", {}):
            assert target not in seen, f"depends_on cycle: {' -> '.join((*seen, target))}"
            reaches(target, (*seen, target))

    for name in services:
        reaches(name, (name,))


def test_the_dockerfile_copies_every_package_and_has_git() -> None:
    dockerfile = (REPO_ROOT / "Dockerfile").read_text()
    pyproject = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    packages = {p.rstrip("*") for p in pyproject["tool"]["setuptools"]["packages"]["find"]["include"]}
    copied = set(re.findall(r"^COPY (\S+) \./\1\s*$", dockerfile, re.M))
    assert packages <= copied, f"not copied into the image: {packages - copied}"
    assert "install -y --no-install-recommends git" in dockerfile, "runners and beat call git"


def test_the_image_runs_as_a_user_of_its_own() -> None:
    """README: run runners as a user of their own; the image ran everything, a repository's benchmarks included, as
    root. The data directory is that user's before the volume is mounted there."""
    dockerfile = (REPO_ROOT / "Dockerfile").read_text()
    users = re.findall(r"^USER (\S+)\s*$", dockerfile, re.M)
    assert users and users[-1] not in ("root", "0"), users
    made = dockerfile.index(f"useradd --create-home --uid 10001 {users[-1]}")
    assert made < dockerfile.index(f"USER {users[-1]}") < dockerfile.index("VOLUME /data")
    assert f"chown {users[-1]}:{users[-1]} /data" in dockerfile
