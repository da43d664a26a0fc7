# Quick start targets (README): `make demo` and `make test` work on a fresh clone.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# setuptools warns at length about the demo library's data folders; they are package data.
PIP    := PYTHONWARNINGS=ignore $(BIN)/pip

.PHONY: demo test lint venv clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(VENV)/.installed: $(BIN)/python pyproject.toml
	$(PIP) install -q -e .
	touch $@

$(VENV)/.installed-test: $(VENV)/.installed
	$(PIP) install -q -e '.[test]'
	bash .ci/desktop-deps.sh $(VENV)
	bash .ci/rclone-deps.sh
	touch $@

venv: $(VENV)/.installed

demo: $(VENV)/.installed
	$(BIN)/ohsync demo

# Two workers (pytest-xdist): the suite mostly waits on daemons, polls and quiet periods, and
# every test has its own ports, folders, socket and keyring; on 2 cores it takes about half the time.
test: $(VENV)/.installed-test
	$(BIN)/python -m pytest -n 2

# ruff over the tree, mypy (strict on engine/ daemon/ tray/, looser on devserver/): .ci/lint.sh
lint: $(VENV)/.installed-test
	bash .ci/lint.sh $(VENV)

clean:
	rm -rf $(VENV) .pytest_cache artifacts

# Benchmarks (bench/README.md): ohsync vs rclone vs plain httpx against devserver on 127.0.0.1.
.PHONY: bench
bench: $(VENV)/.installed
	bash .ci/rclone-deps.sh || echo "bench: no rclone; its columns stay empty"
	$(BIN)/python bench/run.py $(BENCH_ARGS)

# Only the 30,000-file scenario (about 5 minutes), which make bench also runs: its section of bench/RESULTS.md.
.PHONY: bench-scale
bench-scale: $(VENV)/.installed
	$(BIN)/python bench/run.py --only scale $(BENCH_ARGS)
