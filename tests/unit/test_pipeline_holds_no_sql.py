"""Issue 19: ``service/pipeline/`` orchestrates; its queries and read views live in ``service/store/<noun>.py``.
Read from the source, as tests/unit/test_import_contracts.py reads the layers: a pipeline module imports nothing of
SQLAlchemy but the ``Session``/``sessionmaker`` types, and runs no statement on a session itself (loading a row by
key, adding, deleting and flushing rows, committing: the unit of work, stays here)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PIPELINE = sorted((ROOT / "service" / "pipeline").rglob("*.py"))
ALLOWED = {("sqlalchemy.orm", "Session"), ("sqlalchemy.orm", "sessionmaker")}
STATEMENTS = {"execute", "scalars", "scalar", "query", "connection", "begin_nested"}


def sqlalchemy_imports(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found += [f"{path.name}:{node.lineno}: import {a.name}" for a in node.names
                      if a.name == "sqlalchemy" or a.name.startswith("sqlalchemy.")]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and (
                node.module == "sqlalchemy" or node.module.startswith("sqlalchemy.")):
            found += [f"{path.name}:{node.lineno}: from {node.module} import {a.name}" for a in node.names
                      if (node.module, a.name) not in ALLOWED]
    return found


def session_statements(path: Path) -> list[str]:
    """Calls of ``session.<statement>(...)`` (or ``self.session...``): a query run here rather than in the store."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in STATEMENTS:
            owner = node.func.value
            name = owner.id if isinstance(owner, ast.Name) else owner.attr if isinstance(owner, ast.Attribute) else ""
            if name == "session":
                found.append(f"{path.name}:{node.lineno}: session.{node.func.attr}(...)")
    return found


def test_pipeline_modules_import_no_sqlalchemy_but_the_session_types() -> None:
    assert len(PIPELINE) > 15
    assert [problem for path in PIPELINE for problem in sqlalchemy_imports(path)] == []


def test_pipeline_modules_run_no_statement_of_their_own() -> None:
    assert [problem for path in PIPELINE for problem in session_statements(path)] == []


def test_the_checks_find_what_they_look_for(tmp_path: Path) -> None:
    planted = tmp_path / "planted.py"
    planted.write_text("from sqlalchemy import select\nfrom sqlalchemy.orm import Session, sessionmaker\n"
                       "def f(session):\n    import sqlalchemy.exc\n    return session.scalars(select(1))\n")
    assert sqlalchemy_imports(planted) == ["planted.py:1: from sqlalchemy import select",
                                           "planted.py:4: import sqlalchemy.exc"]
    assert session_statements(planted) == ["planted.py:5: session.scalars(...)"]
