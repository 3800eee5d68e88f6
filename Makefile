# The two entry points. Each sets itself up on a fresh machine (creates .venv, installs the
# project with its pinned extras) and is fast when already set up.
PYTHON ?= python3
VENV := .venv
BIN := $(abspath $(VENV))/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: repro test

repro: $(STAMP)
	PATH="$(BIN):$$PATH" python -m workbench.repro

test: $(STAMP)
	PATH="$(BIN):$$PATH" python -m pytest $(PYTEST_ARGS)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip setuptools wheel
	$(BIN)/python -m pip install --quiet -e '.[all]'
	touch $(STAMP)
