# One command to run the app, one to run the tests; both create .venv on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test bench clean

# constraints.txt pins every version (refresh: bash packaging/make_constraints.sh); pyproject.toml keeps ranges.
$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --upgrade pip
	$(BIN)/python -m pip install -c constraints.txt -e '.[test]'
	touch $(STAMP)

run: $(STAMP)
	$(BIN)/mpsstudio

# PYTHONDONTWRITEBYTECODE= : each pytest worker and each run process it starts imports the package; with a shell
# that sets the variable, all of them compiled it again (collection alone 15.6 s -> 6.5 s with bytecode kept).
test: $(STAMP)
	$(BIN)/lint-imports
	$(BIN)/mypy
	$(BIN)/ruff check .
	PYTHONDONTWRITEBYTECODE= QT_QPA_PLATFORM=offscreen $(BIN)/python -m pytest -q -n auto --maxprocesses 4 --dist worksteal -m "not long"

# The system tests (torchrun ranks, a second environment, the demo app, a loaded machine): ~1 minute more; CI runs them.
.PHONY: test-long
test-long: $(STAMP)
	PYTHONDONTWRITEBYTECODE= QT_QPA_PLATFORM=offscreen $(BIN)/python -m pytest -q -n auto --maxprocesses 4 --dist worksteal -m long

# A second Python environment with another torch (2.13; this machine's pip finds a CPU-only wheel in its
# find-links), for comparing torch versions (bench --python) and its test (tests/engine/process/test_interpreter.py).
OTHER := .venv-other
.PHONY: other-torch
other-torch: $(OTHER)/.installed
$(OTHER)/.installed:
	$(PYTHON) -m venv $(OTHER)
	$(OTHER)/bin/python -m pip install -q "torch==2.13.*" numpy psutil platformdirs
	touch $(OTHER)/.installed

# A real MLflow tracking server for the team tests (tests/engine/team: `mlflow server` on 127.0.0.1, long tests),
# in its own environment: its dependency tree is large and its pins are its own; psycopg for a PostgreSQL store,
# the auth extra (Flask-WTF) for MLflow's basic-auth app
MLFLOW_ENV := .venv-mlflow
.PHONY: mlflow-server
mlflow-server: $(MLFLOW_ENV)/.installed
$(MLFLOW_ENV)/.installed:
	$(PYTHON) -m venv $(MLFLOW_ENV)
	$(MLFLOW_ENV)/bin/python -m pip install -q "mlflow[auth]==3.17.2" "psycopg[binary]==3.3.9"
	touch $(MLFLOW_ENV)/.installed

bench: $(STAMP)
	$(BIN)/python benchmarks/overhead.py

# The Apple API ledger (docs/architecture.md) checked against the macOS arm64 wheels of the pins (downloads ~130 MB
# once, into build/apple-ledger). ARGS="--torch 2.15.0" or ARGS=--torch-table for the other checks.
.PHONY: apple-check
apple-check: $(STAMP)
	$(BIN)/python benchmarks/apple_ledger.py $(ARGS)

clean:
	rm -rf $(VENV) $(OTHER) build *.egg-info

# The desktop app bundle (PyInstaller): macOS dist/MPS Studio.app + .dmg, Linux dist/MPS Studio/.
.PHONY: app smoke
app: $(STAMP)
	PYTHON=$(BIN)/python bash packaging/build.sh

# Runs the frozen app offscreen (window screenshot, DataLoader workers); builds first if needed.
smoke: $(STAMP)
	PYTHON=$(BIN)/python bash packaging/smoke.sh
