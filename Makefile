# Every target creates .venv when missing, so a fresh clone needs nothing installed first.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint bench schemas clean compiled

$(STAMP): pyproject.toml
	test -d $(VENV) || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $(STAMP)

# Byte-code for the project's modules, written once here (up-to-date files are skipped): every
# `jobtree` process then starts without compiling them, also where PYTHONDONTWRITEBYTECODE is set.
compiled: $(STAMP)
	$(BIN)/python -m compileall -q reconciler planner schemas bench

demo: compiled
	$(BIN)/python -m reconciler.cli.demo

lint: $(STAMP)
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/lint-imports

test: lint compiled
	$(BIN)/pytest -n 2

bench: compiled
	$(BIN)/python -m bench.run

schemas: $(STAMP)
	$(BIN)/python -m schemas.publish

clean:
	rm -rf $(VENV)
