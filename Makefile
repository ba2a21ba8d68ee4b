# Perdura: the two commands a new user runs are `make dev` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: dev test lint format services clean

$(BIN)/python:
	@bash infra/scripts/check-python.sh $(PYTHON)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# Runtime install (make dev); re-run when the dependencies change.
$(VENV)/.installed-runtime: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e .
	@touch $@

# Runtime plus test dependencies (make test).
$(VENV)/.installed-test: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[test]'
	@touch $@ $(VENV)/.installed-runtime

dev: $(VENV)/.installed-runtime
	$(BIN)/perdura dev

services:
	@bash infra/scripts/ensure-services.sh

# mypy checks the packages listed in pyproject.toml's [tool.mypy] files.
lint: $(VENV)/.installed-test
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/lint-imports

test: $(VENV)/.installed-test services lint
	$(BIN)/pytest

format: $(VENV)/.installed-test
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

clean:
	rm -rf $(VENV) .perdura
