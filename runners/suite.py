"""The benchmark registration API and the discovery of a suite in a checked-out repository.

A suite is a package named ``kernels_under_test``; each module declares benchmarks with ``@benchmark``:

    @benchmark(suite="softmax", params=grid(rows=[256], cols=[4096, 32768]))
    def softmax(rows: int, cols: int) -> Case:
        x = ...
        return Case(fn=my_softmax, args=(x,), reference=lambda: numpy_softmax(x), flops=..., bytes_accessed=...)

The decorator only attaches a spec to the function (no global registry), so loading the same suite from two
checkouts in one process cannot mix them up.
"""

from __future__ import annotations

import ast
import fnmatch
import hashlib
import importlib.util
import inspect
import itertools
import pkgutil
import sys
import textwrap
import traceback
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

SUITE_PACKAGE = "kernels_under_test"
ParamValue = str | int | float | bool
Params = dict[str, ParamValue]
CostModel = Callable[..., tuple[float, float]]


@dataclass(frozen=True)
class QualityMetric:
    """A number about the answer rather than the speed (error against an f32 reference, recall of an
    approximate top-k...), stored as a series of its own so that it can regress too."""

    name: str
    value: float
    unit: str = "1"
    direction: str = "lower_is_better"


@dataclass(frozen=True)
class Case:
    """One instantiated benchmark: the function to time, its inputs, and how to check its answer.

    ``reference`` returns the expected output as numpy arrays (computed independently of the kernel); the
    harness compares with ``rtol``/``atol`` before it times anything, so a fast wrong kernel never gets a number.
    ``check`` is for answers a tolerance cannot judge (a sampled token must lie in the nucleus): it receives the
    output and raises AssertionError when it is wrong. ``quality`` turns the output into quality metrics.
    ``bytes_moved`` (collectives) makes the harness report algorithm bandwidth, bytes_moved / time, in GB/s.
    """

    fn: Callable[..., Any]
    args: tuple[Any, ...]
    reference: Callable[[], Any] | None = None
    rtol: float = 1e-5
    atol: float = 1e-5
    check: Callable[[Any], None] | None = None
    quality: Callable[[Any], list[QualityMetric]] | None = None
    flops: float | None = None
    bytes_accessed: float | None = None
    bytes_moved: float | None = None


@dataclass(frozen=True)
class BenchmarkSpec:
    suite: str
    name: str
    grid: tuple[Params, ...]
    factory: Callable[..., Case]
    unit: str = "s"
    direction: str = "lower_is_better"
    # The points `--quick` runs; None means the whole grid is quick enough.
    quick: tuple[Params, ...] | None = None
    # Devices the benchmark needs; on a CPU host, that many are simulated in a child process of their own.
    devices: int = 1
    # Past this, the benchmark is stopped and recorded as failed; the rest of the suite goes on.
    timeout_s: float = 300.0
    # The analytic (FLOPs, bytes) of a point without building its Case (no inputs allocated): what
    # `kernelwatch predict` evaluates at shapes far larger than the grid's. None: build the Case to read them.
    cost: CostModel | None = None
    # Numeric parameters that pick a variant rather than a size (top-k's k: a selection's cost grows with k, which
    # no FLOP or byte count of it shows). String and bool parameters always do (``variant_of``).
    variants: tuple[str, ...] = ()


@dataclass(frozen=True)
class BenchmarkInstance:
    """A spec bound to one point of its parameter grid."""

    spec: BenchmarkSpec
    params: Params = field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.spec.suite}/{self.spec.name}[{format_params(self.params)}]"

    def make_case(self) -> Case:
        return self.spec.factory(**self.params)


def on_backend(cpu: float, accelerator: float) -> float:
    """A figure that depends on the backend a case runs on, ``cpu`` on JAX's CPU backend and ``accelerator``
    elsewhere: a tolerance, since accelerators multiply float32 at reduced input precision by default (TF32 on
    NVIDIA GPUs, bf16 passes on TPU) and accumulate fp8 products in fewer bits (an H200: float32 matmul error 0.033
    at k = 512, fp8 1.7e-3 at m = 256, both past the CPU's bounds). Asked while a factory builds its case, in the
    benchmark process: importing a suite initialises no backend."""
    import jax

    return cpu if jax.default_backend() == "cpu" else accelerator


def benchmark_version(factory: Callable[..., Case]) -> str | None:
    """What identifies a benchmark's own code: a hash of its function's syntax tree, its decorators (the grid,
    the quick points) and docstring left out, and so its comments and formatting. An edited benchmark measures
    something else, and gets a series of its own rather than a step in the old one; a grid grown by a point, or
    a comment, leaves every existing series as it is. None where the source cannot be read (a builtin, a
    lambda made at run time)."""
    try:
        source = textwrap.dedent(inspect.getsource(factory))
        tree = ast.parse(source)
    except (OSError, TypeError, SyntaxError):
        return None
    node = tree.body[0] if tree.body else None
    if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        return None
    node.decorator_list = []
    first = node.body[0] if node.body else None
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        node.body = node.body[1:] or [ast.Pass()]
    return hashlib.sha256(ast.dump(node, include_attributes=False).encode()).hexdigest()[:16]


def variant_of(spec: BenchmarkSpec, params: Mapping[str, ParamValue]) -> dict[str, ParamValue]:
    """The parameters of a point that pick a variant of the kernel rather than a size: its string and bool ones
    (a dtype, fused or not, an algorithm) and those the benchmark names in ``variants``. Points that share them
    form one family, whose efficiency `kernelwatch predict` interpolates across sizes."""
    return {k: v for k, v in params.items() if isinstance(v, bool | str) or k in spec.variants}


def analytic_cost(spec: BenchmarkSpec, params: Mapping[str, ParamValue]) -> tuple[float, float] | None:
    """A point's (FLOPs, bytes accessed) from the benchmark's own model: its ``cost`` function where it declares
    one (cheap at any shape), else the Case built at that point (which allocates its inputs: keep such shapes
    small). None where the benchmark counts neither."""
    if spec.cost is not None:
        flops, nbytes = spec.cost(**params)
        return float(flops), float(nbytes)
    case = spec.factory(**params)
    if case.flops is None or case.bytes_accessed is None:
        return None
    return float(case.flops), float(case.bytes_accessed)


def format_params(params: Mapping[str, ParamValue]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(params.items()))


def grid(**axes: Sequence[ParamValue]) -> tuple[Params, ...]:
    """The cartesian product of the named axes, in a stable order."""
    for name, values in axes.items():
        if isinstance(values, str | bytes) or not isinstance(values, Sequence) or not values:
            raise ValueError(f"grid axis {name!r} needs a non-empty list of values")
    names = list(axes)
    return tuple(dict(zip(names, combo, strict=True)) for combo in itertools.product(*(axes[n] for n in names)))


_SPEC_ATTR = "__kernelwatch_benchmark__"


def benchmark(
    *,
    suite: str,
    name: str | None = None,
    params: Iterable[Params] | None = None,
    quick: Iterable[Params] | None = None,
    devices: int = 1,
    timeout_s: float = 300.0,
    unit: str = "s",
    direction: str = "lower_is_better",
    cost: CostModel | None = None,
    variants: Iterable[str] = (),
) -> Callable[[Callable[..., Case]], Callable[..., Case]]:
    """Declare a benchmark: the decorated function builds a Case for one point of ``params``.

    ``quick`` names the points that `--quick` runs (each must be a point of ``params``). ``cost``, called with
    a point's params, returns its (FLOPs, bytes accessed) as the Case would carry them, without allocating
    anything; the factory should compute its Case's counts with the same function so the two cannot drift.
    ``variants`` names numeric parameters whose values are variants of the kernel, not sizes (``variant_of``).
    """

    def decorate(factory: Callable[..., Case]) -> Callable[..., Case]:
        points = tuple(dict(p) for p in (params if params is not None else ({},)))
        quick_points = tuple(dict(p) for p in quick) if quick is not None else None
        for point in quick_points or ():
            if point not in points:
                raise ValueError(f"{suite}/{name or factory.__name__}: quick point {point} is not in its grid")
        if devices < 1:
            raise ValueError(f"{suite}/{name or factory.__name__}: devices must be at least 1")
        named = tuple(variants)
        for param in named:
            if any(param not in point for point in points):
                raise ValueError(f"{suite}/{name or factory.__name__}: variant parameter {param!r} is not in its grid")
        spec = BenchmarkSpec(
            suite=suite,
            name=name or factory.__name__,
            grid=points,
            factory=factory,
            unit=unit,
            direction=direction,
            quick=quick_points,
            devices=devices,
            timeout_s=timeout_s,
            cost=cost,
            variants=named,
        )
        setattr(factory, _SPEC_ATTR, spec)
        return factory

    return decorate


def specs_in_module(module: ModuleType) -> list[BenchmarkSpec]:
    found = []
    for value in vars(module).values():
        spec = getattr(value, _SPEC_ATTR, None)
        if isinstance(spec, BenchmarkSpec) and getattr(value, "__module__", None) == module.__name__:
            found.append(spec)
    return found


class SuiteNotFound(Exception):
    pass


def load_suite_package(root: Path) -> ModuleType:
    """Import ``kernels_under_test`` from exactly ``root`` (a checkout), never from wherever else it is installed."""
    package_dir = root / SUITE_PACKAGE
    init = package_dir / "__init__.py"
    if not init.is_file():
        raise SuiteNotFound(f"no {SUITE_PACKAGE}/__init__.py under {root}")
    for loaded in [m for m in sys.modules if m == SUITE_PACKAGE or m.startswith(SUITE_PACKAGE + ".")]:
        del sys.modules[loaded]
    spec = importlib.util.spec_from_file_location(SUITE_PACKAGE, init, submodule_search_locations=[str(package_dir)])
    assert spec is not None and spec.loader is not None
    package = importlib.util.module_from_spec(spec)
    sys.modules[SUITE_PACKAGE] = package
    spec.loader.exec_module(package)
    return package


# The name a suite kept apart from the measured code is imported under: one no project defines, so that the
# suite's directory name (``benchmarks``, ``bench``) can never collide with a package of the project's.
DETACHED_SUITE = "kernelwatch_suite"


def load_suite_dir(directory: Path) -> ModuleType:
    """Import the benchmark modules of ``directory`` (any directory, with or without ``__init__.py``) as one
    package named ``DETACHED_SUITE``: the suite kept apart from the code it measures (``run --benchmarks``)."""
    if not directory.is_dir():
        raise SuiteNotFound(f"no benchmark directory {directory}")
    for loaded in [m for m in sys.modules if m == DETACHED_SUITE or m.startswith(DETACHED_SUITE + ".")]:
        del sys.modules[loaded]
    init = directory / "__init__.py"
    if init.is_file():
        spec = importlib.util.spec_from_file_location(DETACHED_SUITE, init,
                                                      submodule_search_locations=[str(directory)])
        assert spec is not None and spec.loader is not None
        package = importlib.util.module_from_spec(spec)
        sys.modules[DETACHED_SUITE] = package
        spec.loader.exec_module(package)
    else:
        package = ModuleType(DETACHED_SUITE)
        package.__path__ = [str(directory)]
        sys.modules[DETACHED_SUITE] = package
    return package


def discover(root: Path, suite_dir: Path | None = None,
             unimportable: dict[str, str] | None = None) -> list[BenchmarkSpec]:
    """Every benchmark declared in the suite, in module then declaration order: the one in ``suite_dir`` when
    given (kept apart from the checkout ``root``), else ``kernels_under_test`` at ``root``.

    ``unimportable``: where given, a module whose import raises is recorded there (its name: the error's last
    line) and the others are still discovered. A benchmark module commonly imports the kernel it measures, and a
    pull request that adds both cannot import the new module at its merge-base; that must cost the new benchmarks
    at that commit, not the whole suite (runners/local.py says what becomes of them)."""
    package = load_suite_dir(suite_dir) if suite_dir is not None else load_suite_package(root)
    specs: list[BenchmarkSpec] = []
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda i: i.name):
        if info.name.startswith("_"):
            continue
        try:
            module = importlib.import_module(f"{package.__name__}.{info.name}")
        except Exception as exc:  # the repository's own import-time code: whatever it raises is its answer
            if unimportable is None:
                raise
            unimportable[info.name] = _import_error(exc)
            continue
        specs.extend(specs_in_module(module))
    return specs


MAX_IMPORT_ERROR_CHARS = 2000


def _import_error(exc: BaseException) -> str:
    """The error a module's import ended in, as one line: its type and message (a traceback would carry the
    runner's paths into a stored message)."""
    return " ".join(exception_text(exc).split())[:MAX_IMPORT_ERROR_CHARS]


# JAX adds a note to every exception that passes through its API, about the traceback frames it hid: no traceback is
# kept here, and the note buried the error it follows in every failure message and FAILED line.
_JAX_FRAMES_NOTE = "JAX has removed its internal frames"


def exception_text(exc: BaseException) -> str:
    """An exception as its type, message and notes (``traceback.format_exception_only``), without JAX's note."""
    text = "".join(traceback.format_exception_only(type(exc), exc))
    for note in getattr(exc, "__notes__", None) or ():
        if isinstance(note, str) and _JAX_FRAMES_NOTE in note:
            text = text.replace(note + "\n", "").replace(note, "")
    return text.strip()


def module_of(spec: BenchmarkSpec) -> str:
    """The suite module a benchmark is declared in, by the name ``discover`` records an import failure under."""
    return str(getattr(spec.factory, "__module__", "")).rpartition(".")[2]


def parse_param_filter(text: str | None) -> dict[str, str]:
    """``'seq=2048,dtype=bf16'`` → {"seq": "2048", "dtype": "bf16"}; values compare as text."""
    if not text:
        return {}
    out = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"parameter filter {part!r} is not NAME=VALUE")
        out[key.strip()] = value.strip()
    return out


def _selects(pattern: str, spec: BenchmarkSpec) -> bool:
    if "/" in pattern:
        return fnmatch.fnmatchcase(f"{spec.suite}/{spec.name}", pattern)
    return fnmatch.fnmatchcase(spec.suite, pattern) or fnmatch.fnmatchcase(spec.name, pattern)


def select(
    specs: Iterable[BenchmarkSpec],
    pattern: str = "*",
    param_filter: Mapping[str, str] | None = None,
    quick: bool = False,
) -> Iterator[BenchmarkInstance]:
    """Instances whose ``suite/name`` matches the glob (several globs: comma-separated) and whose params match
    every NAME=VALUE given; with ``quick``, only each benchmark's quick points. A glob without ``/`` matches a
    suite or a benchmark's name (``--suite softmax`` selected nothing: it had to be ``softmax/*``)."""
    wanted = dict(param_filter or {})
    patterns = [p.strip() for p in pattern.split(",") if p.strip()] or ["*"]
    for spec in specs:
        if not any(_selects(p, spec) for p in patterns):
            continue
        points = spec.quick if quick and spec.quick is not None else spec.grid
        for point in points:
            if all(str(point.get(k)) == v for k, v in wanted.items()):
                yield BenchmarkInstance(spec=spec, params=dict(point))

