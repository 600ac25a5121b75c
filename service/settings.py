"""Typed settings read once from the environment, validated at start, with messages that say what to set."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from urllib.parse import urlsplit

from kernelwatch.digits import is_whole
from kernelwatch.errors import ConfigurationError
from kernelwatch.http_call import check_url
from service.github_settings import GitHubSettings, load_github_settings
from service.tracked import TrackedBranch, TrackError, parse_track

ENV_PREFIX = "KERNELWATCH_"
_DB_SCHEMES = ("sqlite", "postgresql", "postgresql+psycopg")
_REDIS_SCHEMES = ("redis", "rediss")
FOLLOW_UPS = ("bisect", "confirm")


def redact_url(url: str | None) -> str | None:
    """A URL with its password replaced by ``***`` (postgresql://kw:***@db/kw): what may be shown or logged."""
    if not url:
        return url
    parts = urlsplit(url)
    if parts.password is None:
        return url
    user = f"{parts.username}:" if parts.username else ":"
    host = parts.netloc.rsplit("@", 1)[1]
    return parts._replace(netloc=f"{user}***@{host}").geturl()


@dataclass(frozen=True)
class Settings:
    """Everything the service needs to know about its surroundings.

    ``database_url`` None means the embedded default (a SQLite file under ``home``); ``redis_url`` None means
    tasks run in-process, synchronously.
    """

    home: Path
    # Shown in repr with their passwords masked (see __repr__); the fields themselves hold the real URLs.
    database_url: str | None = field(default=None, repr=False)
    redis_url: str | None = field(default=None, repr=False)
    # Secrets never appear in repr: a Settings object ends up in logs and tracebacks.
    secret_key: str = field(default="", repr=False)
    # How long a task taken by a worker that then vanished (killed, host lost) waits before another worker
    # gets it. Longer than the longest suite run, or a slow run would be handed out twice.
    task_visibility_timeout_s: int = 3600
    # How long one SQL statement of a web request may run before PostgreSQL cancels it (0: no limit). The web
    # process's engine only: ingest and detection in workers keep no limit (service/store/db.limit_statements).
    web_statement_timeout_ms: int = 5000
    # What happens after a time regression is found: "bisect" measures the unmeasured commits of its range until
    # one is isolated, "confirm" re-runs base and head interleaved until their samples decide. Both cost runner
    # time on the hardware queue the series was measured on.
    follow_up: tuple[str, ...] = ("bisect", "confirm")
    # Branches whose tip `kernelwatch beat` has run on their hardware every `track_period_s` (trigger schedule).
    tracked: tuple[TrackedBranch, ...] = ()
    track_period_s: int = 3600
    # Reads of the HTTP API (/api/v1) need a valid token too, not only writes.
    read_token_required: bool = False
    # A runner with both uploads its manifests and artifacts to this service's HTTP API (a token with scope
    # submit) instead of writing to a database of its own.
    service_url: str | None = None
    service_token: str = field(default="", repr=False)
    # Slack alerts (service/pipeline/notify.py): off while the bot token is unset. The channel is where each new
    # alert gets its one top-level message; the API URL is only ever changed to point tests at a fake server.
    slack_token: str = field(default="", repr=False)
    slack_channel: str = ""
    slack_api_url: str = "https://slack.com/api/"
    # The dashboard's address as people reach it (https://kernelwatch.example.com): links in messages.
    public_url: str | None = None
    # The pull-request hook: webhook secret, GitHub credentials, where PRs run (service/github_settings.py).
    github: GitHubSettings = field(default_factory=GitHubSettings)

    def __repr__(self) -> str:
        shown = [f"home={self.home!r}", f"database_url={redact_url(self.database_url)!r}",
                 f"redis_url={redact_url(self.redis_url)!r}"]
        shown += [f"{f.name}={getattr(self, f.name)!r}" for f in fields(self) if f.repr and f.name != "home"]
        return f"Settings({', '.join(shown)})"

    @property
    def effective_database_url(self) -> str:
        if self.database_url:
            return self.database_url
        return f"sqlite:///{self.home / 'kernelwatch.db'}"

    @property
    def uploads_over_http(self) -> bool:
        return bool(self.service_url and self.service_token)

    @property
    def slack_enabled(self) -> bool:
        return bool(self.slack_token)

    @property
    def embedded(self) -> bool:
        return self.redis_url is None

    @property
    def worktree_dir(self) -> Path:
        return self.home / "worktrees"

    @property
    def artifacts_dir(self) -> Path:
        return self.home / "artifacts"

    @property
    def repos_dir(self) -> Path:
        return self.home / "repos"

    def ensure_dirs(self) -> None:
        self.home.mkdir(parents=True, exist_ok=True)


def _normalise_database_url(url: str) -> str:
    scheme = urlsplit(url).scheme
    if scheme not in _DB_SCHEMES:
        raise ConfigurationError(
            f"{ENV_PREFIX}DATABASE_URL has scheme {scheme!r}; use postgresql://user@host:5432/db "
            "or sqlite:///path/to/file.db (or leave it unset for the embedded SQLite file)"
        )
    # psycopg 3 is the driver we ship; SQLAlchemy's bare "postgresql" would look for psycopg2.
    if scheme == "postgresql":
        return "postgresql+psycopg" + url[len("postgresql") :]
    return url


def load_settings(environ: Mapping[str, str] | None = None) -> Settings:
    """Read and validate settings; raise ConfigurationError naming the variable when one is wrong."""
    env = os.environ if environ is None else environ
    home_raw = env.get(f"{ENV_PREFIX}HOME", "").strip()
    home = Path(home_raw).expanduser() if home_raw else Path.home() / ".kernelwatch"
    if home.exists() and not home.is_dir():
        raise ConfigurationError(f"{ENV_PREFIX}HOME={home} exists and is not a directory")

    database_url = env.get(f"{ENV_PREFIX}DATABASE_URL", "").strip() or None
    if database_url:
        database_url = _normalise_database_url(database_url)

    redis_url = env.get(f"{ENV_PREFIX}REDIS_URL", "").strip() or None
    if redis_url and urlsplit(redis_url).scheme not in _REDIS_SCHEMES:
        raise ConfigurationError(
            f"{ENV_PREFIX}REDIS_URL must look like redis://127.0.0.1:6379/0 (or be unset to run tasks in-process)"
        )
    raw_timeout = env.get(f"{ENV_PREFIX}TASK_VISIBILITY_TIMEOUT", "").strip() or "3600"
    if not is_whole(raw_timeout) or int(raw_timeout) < 1:
        raise ConfigurationError(f"{ENV_PREFIX}TASK_VISIBILITY_TIMEOUT must be a whole number of seconds, "
                                 f"got {raw_timeout!r}")
    raw_follow_up = env.get(f"{ENV_PREFIX}FOLLOW_UP", "bisect,confirm").strip().lower()
    follow_up = tuple(x.strip() for x in raw_follow_up.split(",") if x.strip() and x.strip() != "none")
    if set(follow_up) - set(FOLLOW_UPS):
        raise ConfigurationError(f"{ENV_PREFIX}FOLLOW_UP is a comma-separated subset of {', '.join(FOLLOW_UPS)} "
                                 f"(or none), got {raw_follow_up!r}")
    try:
        tracked = parse_track(env.get(f"{ENV_PREFIX}TRACK", ""))
    except TrackError as exc:
        raise ConfigurationError(str(exc)) from None
    raw_period = env.get(f"{ENV_PREFIX}TRACK_PERIOD", "").strip() or "3600"
    if not is_whole(raw_period) or int(raw_period) < 1:
        raise ConfigurationError(f"{ENV_PREFIX}TRACK_PERIOD is how often tracked branches are run, in whole "
                                 f"seconds (e.g. 3600), got {raw_period!r}")
    service_url, service_token = _upload_target(env)
    slack_token, slack_channel, slack_api_url = _slack(env)
    return Settings(
        slack_token=slack_token,
        slack_channel=slack_channel,
        slack_api_url=slack_api_url,
        public_url=_http_url(env.get(f"{ENV_PREFIX}PUBLIC_URL", ""), "PUBLIC_URL"),
        tracked=tracked,
        track_period_s=int(raw_period),
        home=home,
        follow_up=follow_up,
        task_visibility_timeout_s=int(raw_timeout),
        web_statement_timeout_ms=_web_statement_timeout_ms(env),
        database_url=database_url,
        redis_url=redis_url,
        secret_key=env.get(f"{ENV_PREFIX}SECRET_KEY", ""),
        read_token_required=_flag(env.get(f"{ENV_PREFIX}READ_TOKEN_REQUIRED", ""), "READ_TOKEN_REQUIRED"),
        service_url=service_url,
        service_token=service_token,
        github=load_github_settings(env),
    )


def _upload_target(env: Mapping[str, str]) -> tuple[str | None, str]:
    url = env.get(f"{ENV_PREFIX}URL", "").strip() or None
    token = env.get(f"{ENV_PREFIX}TOKEN", "").strip()
    try:
        if url:
            check_url(url, f"{ENV_PREFIX}URL")
    except ValueError as exc:
        raise ConfigurationError(str(exc)) from None
    if bool(url) != bool(token):
        # Half a configuration would silently fall back to a local database: say what is missing instead.
        missing = "TOKEN (a token with scope submit)" if url else "URL (the service's address)"
        raise ConfigurationError(f"{ENV_PREFIX}URL and {ENV_PREFIX}TOKEN go together (runners upload over HTTP "
                                 f"when both are set): set {ENV_PREFIX}{missing} too, or unset the other")
    return url, token


def _slack(env: Mapping[str, str]) -> tuple[str, str, str]:
    token = env.get(f"{ENV_PREFIX}SLACK_TOKEN", "").strip()
    channel = env.get(f"{ENV_PREFIX}SLACK_CHANNEL", "").strip()
    if token and not channel:
        # A token alone would post nowhere: say so at start rather than fail on the first alert.
        raise ConfigurationError(f"{ENV_PREFIX}SLACK_TOKEN is set but {ENV_PREFIX}SLACK_CHANNEL is not: name the "
                                 "channel alerts go to (#perf-alerts, or its id C0123456789)")
    api_url = _http_url(env.get(f"{ENV_PREFIX}SLACK_API_URL", ""), "SLACK_API_URL") or "https://slack.com/api"
    # slack-sdk joins the method name straight onto the base URL.
    return token, channel, api_url + "/"


def _web_statement_timeout_ms(env: Mapping[str, str]) -> int:
    raw = env.get(f"{ENV_PREFIX}WEB_STATEMENT_TIMEOUT_MS", "").strip() or "5000"
    if not raw.isascii() or not raw.isdigit() or len(raw) > 9:
        raise ConfigurationError(f"{ENV_PREFIX}WEB_STATEMENT_TIMEOUT_MS is a whole number of milliseconds (e.g. 5000; "
                                 f"0 for no limit), got {raw[:40]!r}")
    return int(raw)


def _http_url(value: str, name: str) -> str | None:
    """An http(s) address without its trailing slash, or None when unset."""
    url = value.strip().rstrip("/") or None
    if url is not None and (urlsplit(url).scheme not in ("http", "https") or not urlsplit(url).netloc):
        raise ConfigurationError(f"{ENV_PREFIX}{name} is an http(s) address such as https://host.example.com, "
                                 f"got {redact_url(url)!r}")
    return url


def _flag(value: str, name: str) -> bool:
    raw = value.strip().lower()
    if raw in ("", "0", "false", "no"):
        return False
    if raw in ("1", "true", "yes"):
        return True
    raise ConfigurationError(f"{ENV_PREFIX}{name} is 1 or 0, got {raw!r}")
