from pathlib import Path

import pytest

from kernelwatch.errors import ConfigurationError
from service.settings import load_settings, redact_url


def test_defaults_are_the_embedded_mode(tmp_path: Path) -> None:
    s = load_settings({"KERNELWATCH_HOME": str(tmp_path)})
    assert s.database_url is None and s.redis_url is None and s.embedded
    assert s.effective_database_url == f"sqlite:///{tmp_path / 'kernelwatch.db'}"


def test_home_defaults_under_the_user_directory() -> None:
    assert load_settings({}).home == Path.home() / ".kernelwatch"


def test_postgres_url_gets_the_psycopg3_driver(tmp_path: Path) -> None:
    s = load_settings({"KERNELWATCH_HOME": str(tmp_path), "KERNELWATCH_DATABASE_URL": "postgresql://u@h:5432/db",
                       "KERNELWATCH_REDIS_URL": "redis://127.0.0.1:6379/0"})
    assert s.effective_database_url == "postgresql+psycopg://u@h:5432/db"
    assert not s.embedded


@pytest.mark.parametrize(("var", "value", "hint"), [
    ("KERNELWATCH_DATABASE_URL", "mysql://x/y", "KERNELWATCH_DATABASE_URL"),
    ("KERNELWATCH_REDIS_URL", "http://x", "KERNELWATCH_REDIS_URL"),
    # a digit to str.isdigit(), not to int(): a ValueError traceback at start-up
    ("KERNELWATCH_TASK_VISIBILITY_TIMEOUT", "²", "KERNELWATCH_TASK_VISIBILITY_TIMEOUT"),
    ("KERNELWATCH_TRACK_PERIOD", "٣٦", "KERNELWATCH_TRACK_PERIOD"),
])
def test_bad_urls_name_the_variable(var: str, value: str, hint: str) -> None:
    with pytest.raises(ConfigurationError, match=hint):
        load_settings({var: value})


def test_home_that_is_a_file_is_refused(tmp_path: Path) -> None:
    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(ConfigurationError, match="not a directory"):
        load_settings({"KERNELWATCH_HOME": str(f)})


def test_secret_never_in_repr() -> None:
    s = load_settings({"KERNELWATCH_SECRET_KEY": "hunter2-secret"})
    assert "hunter2-secret" not in repr(s)


def test_no_secret_of_any_kind_in_repr_or_str(tmp_path: Path) -> None:
    key = tmp_path / "app.pem"
    key.write_text("-----BEGIN RSA PRIVATE KEY-----\nPEM-SECRET-BODY\n-----END RSA PRIVATE KEY-----")
    secrets = {"KERNELWATCH_SECRET_KEY": "sk-SECRET-1", "KERNELWATCH_TOKEN": "kw_SECRET_2",
               "KERNELWATCH_URL": "http://web:8000", "KERNELWATCH_SLACK_TOKEN": "xoxb-SECRET-3",
               "KERNELWATCH_SLACK_CHANNEL": "#perf", "KERNELWATCH_GITHUB_WEBHOOK_SECRET": "whsec-SECRET-4",
               "KERNELWATCH_GITHUB_TOKEN": "ghp_SECRET_5", "KERNELWATCH_GITHUB_APP_ID": "12345",
               "KERNELWATCH_GITHUB_APP_PRIVATE_KEY_FILE": str(key),
               "KERNELWATCH_DATABASE_URL": "postgresql://kw:db-SECRET-6@db:5432/kw",
               "KERNELWATCH_REDIS_URL": "redis://:redis-SECRET-7@redis:6379/0",
               "KERNELWATCH_HOME": str(tmp_path)}
    s = load_settings(secrets)
    shown = repr(s) + str(s) + repr(s.github)
    for needle in ("SECRET", "PEM-SECRET-BODY"):
        assert needle not in shown, shown
    # Still usable: the URLs keep their passwords, the repr only masks them.
    assert "db-SECRET-6" in s.effective_database_url and "redis-SECRET-7" in (s.redis_url or "")
    assert "postgresql+psycopg://kw:***@db:5432/kw" in repr(s) and "redis://:***@redis:6379/0" in repr(s)


@pytest.mark.parametrize(("url", "shown"), [
    ("postgresql://kw:pw@db/kw", "postgresql://kw:***@db/kw"),
    ("redis://:pw@r:6379/1", "redis://:***@r:6379/1"),
    ("postgresql://kw@db/kw", "postgresql://kw@db/kw"),  # no password: nothing to hide
    ("http://user:p%40ss@h:1/x?y=1", "http://user:***@h:1/x?y=1"),
    (None, None),
])
def test_redact_url(url: str | None, shown: str | None) -> None:
    assert redact_url(url) == shown
