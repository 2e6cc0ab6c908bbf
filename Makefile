PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck clean sandbox

# Bash runs in bubblewrap's sandbox; its tests need `bwrap` (Debian: bubblewrap).
sandbox:
	@command -v bwrap >/dev/null || { test "$$(id -u)" = 0 && \
		(apt-get install -y -qq --no-install-recommends bubblewrap >/dev/null 2>&1 || \
		 (apt-get update -qq && apt-get install -y -qq --no-install-recommends bubblewrap)) ; } \
		|| echo "make: bubblewrap is not installed; the sandbox tests will skip" >&2

$(STAMP): pyproject.toml
	test -d $(VENV) || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev,bench]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m comal.demo

lint: $(STAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench

typecheck: $(STAMP)
	$(BIN)/mypy

test: lint typecheck sandbox
	$(BIN)/pytest

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
