# Two commands: `make demo` and `make test`. Each creates .venv when it is missing and installs what it needs.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin

.PHONY: demo test lint browser clean

# uv (a dependency already: it builds measured commits' environments) installs what pyproject.toml declares, the
# same versions as pip, in 26 s where pip takes 50 (bench/install_time.py); CI starts from a clean clone. Without uv,
# pip does it. Compiled to bytecode at install, as pip does and uv does only when asked: where PYTHONDONTWRITEBYTECODE
# is set (this project's CI host sets it) no process ever writes it, and every one that imports jax compiles it from
# source first, 2.8 s to jax's first operation where the bytecode takes 1.0 (bench/bytecode.py); the suite starts
# hundreds.
INSTALL := $(BIN)/python -m uv pip install -q --compile-bytecode --python $(BIN)/python

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q uv || true

# Stamps make a changed pyproject.toml reinstall, and an unchanged one cost nothing.
$(VENV)/.runtime-installed: pyproject.toml | $(BIN)/python
	$(INSTALL) -e . || $(BIN)/python -m pip install -q -e .
	touch $@

$(VENV)/.dev-installed: pyproject.toml | $(BIN)/python
	$(INSTALL) -e '.[dev]' || $(BIN)/python -m pip install -q -e '.[dev]'
	touch $@ $(VENV)/.runtime-installed

# The browser tests drive Debian's chromium (never a downloaded browser); install it when it is missing.
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; \
	  else echo "install Debian's chromium (sudo apt-get install chromium) for the browser tests"; exit 1; fi; }

demo: $(VENV)/.runtime-installed
	$(BIN)/kernelwatch demo

# Parallel: most of the suite waits on processes it started (benchmark children, Celery workers, Chromium), so
# more workers than this machine's two cores still shorten it. A file's tests stay on one worker (loadfile): each
# file owns its Redis database number and its module fixtures. The tests whose verdicts come from real timings
# (marked timing) run after, alone: beside other tests the host's noise would be theirs. Both parts always run.
# The parallel part is never a quiet host, so its calibrations measure at once rather than wait 20 s each for a
# quiet spell that does not come (KERNELWATCH_CALIBRATION_QUIET_S), and walk their ladder once rather than three
# times (KERNELWATCH_CALIBRATION_PASSES): nothing there reads a roof as a bound, only its keeping; the timing part's
# calibrate as a runner's would.
TEST_WORKERS ?= 3
# pytest keeps the test modules it rewrites (its assertion messages) as bytecode only where bytecode may be written;
# with PYTHONDONTWRITEBYTECODE set (the note at INSTALL) each of the four processes that collect the suite rewrites
# all of it again. Unset for pytest; benchmark processes set it again themselves (runners/session.py).
PYTEST := PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest

test: $(VENV)/.dev-installed browser
	$(BIN)/python -m compileall -q kernelwatch service runners web tests >/dev/null  # the bytecode note at INSTALL
	status=0; \
	KERNELWATCH_CALIBRATION_QUIET_S=0 KERNELWATCH_CALIBRATION_PASSES=1 $(PYTEST) -q -n $(TEST_WORKERS) \
		--dist loadfile -m "not timing" \
		--durations=15 || status=1; \
	$(PYTEST) -q -m timing --durations=10 || status=1; \
	exit $$status

lint: $(VENV)/.dev-installed
	$(BIN)/ruff check .
	$(BIN)/mypy kernelwatch service runners web
	$(BIN)/python -m service.contract.export --check

clean:
	rm -rf $(VENV) test-output .pytest_cache
