"""The measured repository's project file: where its benchmarks are, refused clearly when it is wrong."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from runners.project_file import ProjectFileError, ProjectSettings, read_project_settings


def test_no_project_file_keeps_today_s_behaviour(tmp_path: Path) -> None:
    assert read_project_settings(tmp_path) == ProjectSettings(None)
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n[tool.ruff]\nline-length = 100\n')
    assert read_project_settings(tmp_path) == ProjectSettings(None)


def test_benchmarks_from_kernelwatch_toml_or_pyproject(tmp_path: Path) -> None:
    (tmp_path / "bench").mkdir()
    (tmp_path / "pyproject.toml").write_text('[tool.kernelwatch]\nbenchmarks = "bench"\n')
    found = read_project_settings(tmp_path)
    assert found.benchmarks == (tmp_path / "bench").resolve() and found.source == tmp_path / "pyproject.toml"
    # kernelwatch.toml first; paths relative to the file, beside the repository too
    (tmp_path.parent / "outside-bench").mkdir(exist_ok=True)
    (tmp_path / "kernelwatch.toml").write_text('benchmarks = "../outside-bench"\n')
    assert read_project_settings(tmp_path).benchmarks == (tmp_path.parent / "outside-bench").resolve()


@pytest.mark.parametrize(("text", "message"), [
    ('benchmarks = "missing"\n', "is not a directory"),
    ("benchmarks = 3\n", "must be a directory path"),
    ('benchmark = "bench"\n', "unknown setting"),
    ('benchmarks = "bench\n', "not readable TOML"),
    ('install = "pip install -e ."\n', "unknown setting"),  # not read yet: refused, never ignored
    ('environment = "conda"\n', "environment must be one of runner, commit"),
    ('python = "no/such/python"\n', "is not an executable file"),
    ('python = 3\n', "must be an interpreter's path"),
    ('environment = "commit"\npython = "/usr/bin/python3"\n', "give one"),
    ('name = "acme/kernels"\n', "name 'acme/kernels' is not 1 to 200"),
    ("name = 7\n", "name '7' is not"),
    ('name = ""\n', "name '' is not"),
])
def test_a_wrong_project_file_is_refused_naming_the_file(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / "bench").mkdir()
    (tmp_path / "kernelwatch.toml").write_text(text)
    with pytest.raises(ProjectFileError, match=message) as caught:
        read_project_settings(tmp_path)
    assert "kernelwatch.toml" in str(caught.value)


def test_tool_kernelwatch_must_be_a_table(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool]\nkernelwatch = "bench"\n')
    with pytest.raises(ProjectFileError, match="must be a table"):
        read_project_settings(tmp_path)


def test_which_interpreter_runs_the_benchmarks(tmp_path: Path) -> None:
    (tmp_path / "kernelwatch.toml").write_text('environment = "commit"\n')
    assert read_project_settings(tmp_path).environment == "commit"
    venv = tmp_path / "venv" / "bin"
    venv.mkdir(parents=True)
    (venv / "python").symlink_to(Path(sys.executable).resolve())
    (tmp_path / "kernelwatch.toml").write_text('python = "venv/bin/python"\n')
    found = read_project_settings(tmp_path)
    # relative to the file, and not resolved: the symlink's own place says which environment it is
    assert found.python == venv / "python" and found.environment is None
