"""The pull-request hook's settings (KERNELWATCH_GITHUB_*, KERNELWATCH_PR_*), read and validated with the rest of
the settings (``service.settings.load_settings``); links use the shared KERNELWATCH_PUBLIC_URL."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from kernelwatch.digits import is_whole
from kernelwatch.errors import ConfigurationError
from service.task_names import HARDWARE_NAME

_PREFIX = "KERNELWATCH_"
DEFAULT_API_URL = "https://api.github.com"
DEFAULT_LABEL = "kernelwatch:run"


@dataclass(frozen=True)
class GitHubSettings:
    """Secrets stay out of repr: a Settings object ends up in logs and tracebacks."""

    webhook_secret: str = field(default="", repr=False)
    api_url: str = DEFAULT_API_URL
    # A GitHub App (check runs, an installation token per repository) or else a plain token (commit statuses).
    app_id: str = ""
    app_private_key: str = field(default="", repr=False)
    token: str = field(default="", repr=False)
    # Where a pull request's base and head run: one runner.<hardware> queue each.
    pr_hardware: tuple[str, ...] = ("cpu",)
    # A pull request from a fork runs nothing until a maintainer adds this label (or comments /kernelwatch run).
    pr_label: str = DEFAULT_LABEL
    pr_samples: int = 20
    pr_rounds: int = 4

    @property
    def uses_app(self) -> bool:
        return bool(self.app_id and self.app_private_key)

    @property
    def can_post(self) -> bool:
        return self.uses_app or bool(self.token)


def _url(env: Mapping[str, str], name: str, default: str, example: str) -> str:
    value = env.get(f"{_PREFIX}{name}", "").strip().rstrip("/") or default
    if value and (urlsplit(value).scheme not in ("http", "https") or not urlsplit(value).netloc):
        raise ConfigurationError(f"{_PREFIX}{name} is an http(s) address such as {example}, got {value[:100]!r}")
    return value


def _private_key(env: Mapping[str, str]) -> str:
    inline = env.get(f"{_PREFIX}GITHUB_APP_PRIVATE_KEY", "").strip()
    path = env.get(f"{_PREFIX}GITHUB_APP_PRIVATE_KEY_FILE", "").strip()
    if inline and path:
        raise ConfigurationError(f"set {_PREFIX}GITHUB_APP_PRIVATE_KEY or {_PREFIX}GITHUB_APP_PRIVATE_KEY_FILE, "
                                 "not both")
    if path:
        try:
            inline = Path(path).expanduser().read_text().strip()
        except OSError as exc:
            raise ConfigurationError(f"{_PREFIX}GITHUB_APP_PRIVATE_KEY_FILE={path} cannot be read: "
                                     f"{exc.strerror}") from None
    # An environment variable often carries the PEM with its newlines escaped.
    key = inline.replace("\\n", "\n")
    if key and "PRIVATE KEY-----" not in key:
        raise ConfigurationError(f"{_PREFIX}GITHUB_APP_PRIVATE_KEY is the app's PEM private key "
                                 "(-----BEGIN RSA PRIVATE KEY-----...), as GitHub downloads it")
    return key


def load_github_settings(env: Mapping[str, str]) -> GitHubSettings:
    app_id = env.get(f"{_PREFIX}GITHUB_APP_ID", "").strip()
    if app_id and not is_whole(app_id):
        raise ConfigurationError(f"{_PREFIX}GITHUB_APP_ID is the app's numeric id, got {app_id[:40]!r}")
    key = _private_key(env)
    if bool(app_id) != bool(key):
        missing = "GITHUB_APP_PRIVATE_KEY (or _FILE)" if app_id else "GITHUB_APP_ID"
        raise ConfigurationError(f"a GitHub App needs both its id and its private key: set {_PREFIX}{missing} "
                                 "too, or unset the other")
    hardware = tuple(h.strip() for h in env.get(f"{_PREFIX}PR_HARDWARE", "cpu").split(",") if h.strip())
    bad = [h for h in hardware if not HARDWARE_NAME.match(h)]
    if bad or not hardware:
        raise ConfigurationError(f"{_PREFIX}PR_HARDWARE is a comma-separated list of runner queue suffixes "
                                 f"(cpu, h200, tpu-v5e-8...), got {env.get(f'{_PREFIX}PR_HARDWARE', '')!r}")
    raw_samples = env.get(f"{_PREFIX}PR_SAMPLES", "").strip() or "20"
    if not is_whole(raw_samples) or not 1 <= int(raw_samples) <= 10000:
        raise ConfigurationError(f"{_PREFIX}PR_SAMPLES is a whole number of samples from 1 to 10000, "
                                 f"got {raw_samples!r}")
    raw_rounds = env.get(f"{_PREFIX}PR_ROUNDS", "").strip() or "4"
    if not is_whole(raw_rounds) or not 1 <= int(raw_rounds) <= 50:
        raise ConfigurationError(f"{_PREFIX}PR_ROUNDS is a whole number of runs per side from 1 to 50, "
                                 f"got {raw_rounds[:40]!r}")
    return GitHubSettings(
        webhook_secret=env.get(f"{_PREFIX}GITHUB_WEBHOOK_SECRET", "").strip(),
        api_url=_url(env, "GITHUB_API_URL", DEFAULT_API_URL, DEFAULT_API_URL),
        app_id=app_id,
        app_private_key=key,
        token=env.get(f"{_PREFIX}GITHUB_TOKEN", "").strip(),
        pr_hardware=hardware,
        pr_label=env.get(f"{_PREFIX}PR_LABEL", "").strip() or DEFAULT_LABEL,
        pr_samples=int(raw_samples),
        pr_rounds=int(raw_rounds),
    )
