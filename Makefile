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

# The suite (on $(TEST_WORKERS) pytest-xdist workers, a file per worker at a time so a module's servers
# start once; 0: in this process), then the tests that measure time or stop processes (the `serial`
# marker, tests/conftest.py), $(SERIAL_WORKERS) files at a time: a core each on the 2-core machine, where
# their measures kept wide margins (6 to 3.6 minutes). Arguments for both: make test PYTEST_ARGS=-x.
# Most tests wait on the servers they start, so three workers pay even on 2 cores (48 to 28 minutes there).
TEST_WORKERS ?= 3
SERIAL_WORKERS ?= 2
test: $(VENV)/.installed-test services lint
	$(BIN)/pytest -n $(TEST_WORKERS) --dist loadfile -m "not serial" $(PYTEST_ARGS)
	$(BIN)/pytest -n $(SERIAL_WORKERS) --dist loadfile -m serial $(PYTEST_ARGS)

format: $(VENV)/.installed-test
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

clean:
	rm -rf $(VENV) .perdura
