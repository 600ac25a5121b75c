from pathlib import Path

import pytest

from service.errors import ConfigurationError
from service.settings import load_settings


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
