"""The layers of ARCHITECTURE.md, enforced (issue 19): read from the source (every import statement, at module level,
in functions and under TYPE_CHECKING alike), so a new import that crosses a layer fails here, naming the file and
the import, before anyone has to find it in review.

- ``kernelwatch/`` (the error vocabulary, the hardware table) imports the standard library alone.
- The runners import nothing of ``service`` but its manifest contract, and what the benchmark process loads (the
  closure of ``runners.child`` over ``runners`` and ``kernelwatch``) needs nothing but the standard library and
  JAX: it runs under a project's own interpreter (runners/harness_copy.py).
- The pure cores (statistics, the model, formatters, parsers) import no framework, database or face.
- The faces do not import each other: the CLI, the pages, the HTTP API, the webhook and the integrations meet only
  in what they share below them (``service/app.py`` composes the web app for `kernelwatch serve`).
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FRAMEWORKS = ("flask", "werkzeug", "sqlalchemy", "alembic", "psycopg", "celery", "kombu", "redis", "plotly",
              "slack_sdk", "jinja2", "gunicorn", "urllib3", "requests")
HARNESS_THIRD_PARTY = ("jax", "jaxlib", "numpy", "ml_dtypes")


def imports(path: Path) -> Iterator[tuple[int, str]]:
    """(line, module) of every absolute import in ``path``; ``from a import b`` yields ``a.b`` and ``a``."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.lineno, node.module
            for alias in node.names:
                yield node.lineno, f"{node.module}.{alias.name}"


def sources(*packages: str) -> list[Path]:
    return sorted(p for package in packages for p in (ROOT / package).rglob("*.py"))


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def within(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def shown(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else path.name


def crossings(paths: list[Path], banned: tuple[str, ...], allowed: tuple[str, ...] = ()) -> list[str]:
    return [f"{shown(path)}:{line}: imports {module}" for path in paths for line, module in imports(path)
            if within(module, banned) and not within(module, allowed)]


def test_the_shared_package_is_standard_library_alone() -> None:
    found = [f"{p.relative_to(ROOT)}:{line}: imports {m}" for p in sources("kernelwatch") for line, m in imports(p)
             if m.split(".")[0] not in sys.stdlib_module_names and not within(m, ("kernelwatch", "__future__"))]
    assert found == []


def test_the_runners_import_nothing_of_the_service_but_its_contract() -> None:
    assert crossings(sources("runners"), ("service", "web"), allowed=("service.contract",)) == []


def test_the_benchmark_process_needs_only_the_standard_library_and_jax() -> None:
    """The closure of runners.child over KernelWatch's own modules: what a project's interpreter must import."""
    by_name = {module_name(p): p for p in sources("runners", "kernelwatch")}
    seen, todo, outside = set(), ["runners.child"], []
    while todo:
        name = todo.pop()
        if name in seen or name not in by_name:
            continue
        seen.add(name)
        for line, module in imports(by_name[name]):
            top = module.split(".")[0]
            if top in ("runners", "kernelwatch"):
                todo.append(module)
            elif top not in sys.stdlib_module_names and top not in HARNESS_THIRD_PARTY and top != "__future__":
                outside.append(f"{by_name[name].relative_to(ROOT)}:{line}: imports {module}")
    assert "runners.harness" in seen and "runners.suite" in seen  # the walk follows the child's imports
    assert outside == []


@pytest.mark.parametrize("package", ["service/detect", "service/model", "service/report", "runners/parsers"])
def test_the_pure_cores_import_no_framework_database_or_face(package: str) -> None:
    banned = (*FRAMEWORKS, "service.store", "service.pipeline", "service.api", "service.hooks",
              "service.integrations", "service.context", "service.tasks", "service.cli", "web")
    assert crossings(sources(package), banned) == []


FACES = {  # "service.cli" covers every module of the package (service/cli/)
    "web": ("service.api", "service.hooks", "service.cli"),
    "service/api": ("web", "service.hooks", "service.cli"),
    "service/hooks": ("web", "service.cli"),
    "service/integrations": ("web", "service.api", "service.hooks", "service.cli"),
}


@pytest.mark.parametrize("package", sorted(FACES))
def test_the_faces_do_not_import_each_other(package: str) -> None:
    assert crossings(sources(package), FACES[package]) == []


def test_the_command_line_reaches_the_web_only_through_the_app() -> None:
    cli = sources("service/cli")
    assert len(cli) >= 10  # the package's modules, one per verb group
    assert crossings(cli, ("web", "service.api", "service.hooks")) == []


def import_graph(*packages: str) -> dict[str, set[str]]:
    """Module → the modules of ``packages`` it imports (an imported name resolved to the module that holds it)."""
    by_name = {module_name(p): p for p in sources(*packages)}
    graph: dict[str, set[str]] = {}
    for name, path in by_name.items():
        edges = set()
        for _, module in imports(path):
            while module and module not in by_name:
                module = module.rpartition(".")[0]
            if module and module != name:
                edges.add(module)
        graph[name] = edges
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            step = next(edges, None)
            if step is not None:
                if step not in index:
                    index[step] = low[step] = len(index)
                    stack.append(step)
                    on_stack.add(step)
                    work.append((step, iter(sorted(graph[step]))))
                elif step in on_stack:
                    low[node] = min(low[node], index[step])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_loops_lazy_ones_included() -> None:
    """Issue 19: service/context.py and service/tasks.py, and pipeline/queue.py and pipeline/submit.py, imported each
    other (inside functions, which only hides a loop). The task and queue names now live in service/task_names.py,
    the Celery app without its tasks in service/celery_app.py, the queue's port in pipeline/ports.py."""
    assert cycles(import_graph("kernelwatch", "service", "runners", "web")) == []
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]  # the check can fail


def test_the_contract_is_checked_on_something(tmp_path: Path) -> None:
    """Not vacuous: the walk reads every package, and a crossing is found where one is planted (inside a function,
    where a lazy import hides)."""
    assert len(sources("service", "runners", "web", "kernelwatch")) > 150
    planted = tmp_path / "planted.py"
    planted.write_text("def f():\n    from service.store.models import Run\n    return Run\n")
    assert crossings([planted], ("service.store",)) == ["planted.py:2: imports service.store.models",
                                                         "planted.py:2: imports service.store.models.Run"]
