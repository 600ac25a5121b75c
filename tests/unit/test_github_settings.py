"""The pull-request hook's settings: defaults, and errors that say what to set."""

from __future__ import annotations

from pathlib import Path

import pytest

from kernelwatch.errors import ConfigurationError
from service.settings import load_settings

PEM = "-----BEGIN RSA PRIVATE KEY-----\\nMIIB\\n-----END RSA PRIVATE KEY-----"


def test_defaults_post_nothing_and_run_on_cpu(tmp_path: Path) -> None:
    gh = load_settings({"KERNELWATCH_HOME": str(tmp_path)}).github
    assert (gh.api_url, gh.pr_hardware, gh.pr_label, gh.pr_samples, gh.pr_rounds) == (
        "https://api.github.com", ("cpu",), "kernelwatch:run", 20, 4)
    assert not gh.can_post and not gh.webhook_secret


def test_an_app_key_from_a_file_or_inline_with_escaped_newlines(tmp_path: Path) -> None:
    key_file = tmp_path / "app.pem"
    key_file.write_text(PEM.replace("\\n", "\n"))
    from_file = load_settings({"KERNELWATCH_HOME": str(tmp_path), "KERNELWATCH_GITHUB_APP_ID": "12",
                               "KERNELWATCH_GITHUB_APP_PRIVATE_KEY_FILE": str(key_file)}).github
    inline = load_settings({"KERNELWATCH_HOME": str(tmp_path), "KERNELWATCH_GITHUB_APP_ID": "12",
                            "KERNELWATCH_GITHUB_APP_PRIVATE_KEY": PEM}).github
    assert from_file.app_private_key == inline.app_private_key == PEM.replace("\\n", "\n")
    assert inline.uses_app and "PRIVATE" not in repr(inline)


@pytest.mark.parametrize(("env", "says"), [
    ({"KERNELWATCH_GITHUB_APP_ID": "12"}, "GITHUB_APP_PRIVATE_KEY"),
    ({"KERNELWATCH_GITHUB_APP_ID": "my-app", "KERNELWATCH_GITHUB_APP_PRIVATE_KEY": PEM}, "numeric id"),
    ({"KERNELWATCH_GITHUB_APP_ID": "1", "KERNELWATCH_GITHUB_APP_PRIVATE_KEY": "hunter2"}, "PEM"),
    ({"KERNELWATCH_PR_HARDWARE": "cpu,H200!"}, "PR_HARDWARE"),
    ({"KERNELWATCH_PR_SAMPLES": "0"}, "PR_SAMPLES"),
    ({"KERNELWATCH_PR_ROUNDS": "0"}, "PR_ROUNDS"),
    ({"KERNELWATCH_PR_ROUNDS": "three"}, "PR_ROUNDS"),
    ({"KERNELWATCH_GITHUB_API_URL": "api.github.com"}, "GITHUB_API_URL"),
])
def test_mistakes_name_the_variable(tmp_path: Path, env: dict[str, str], says: str) -> None:
    with pytest.raises(ConfigurationError, match=says):
        load_settings({"KERNELWATCH_HOME": str(tmp_path), **env})
