# alphagate — two commands a new user needs: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip --disable-pip-version-check -q

.PHONY: demo test lint typecheck pytest bench clean

# Runtime install: the package and its light core dependencies.
$(VENV)/.runtime: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -e .
	touch $@

# Dev install: torch 2.13.0 first (the CPU wheel on disk; an unpinned torch would
# pull a multi-GB CUDA build), then the package with its dev and offline extras.
$(VENV)/.dev: pyproject.toml $(VENV)/.runtime
	$(PIP) install "torch==2.13.0"
	$(PIP) install -e ".[dev,offline]"
	touch $@

demo: $(VENV)/.runtime
	$(VENV)/bin/alphagate demo

lint: $(VENV)/.dev
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/ruff format --check src tests benchmarks

typecheck: $(VENV)/.dev
	$(VENV)/bin/mypy

pytest: $(VENV)/.dev
	$(PY) -m pytest -q

test: lint typecheck pytest

bench: $(VENV)/.runtime
	$(PY) benchmarks/run_all.py

clean:
	rm -rf $(VENV) build dist .pytest_cache .mypy_cache .ruff_cache
