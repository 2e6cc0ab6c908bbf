PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck clean sandbox node litellm screenshots

# Bash runs in bubblewrap's sandbox; its tests need `bwrap` (Debian: bubblewrap).
sandbox:
	@command -v bwrap >/dev/null || { test "$$(id -u)" = 0 && \
		(apt-get install -y -qq --no-install-recommends bubblewrap >/dev/null 2>&1 || \
		 (apt-get update -qq && apt-get install -y -qq --no-install-recommends bubblewrap)) ; } \
		|| echo "make: bubblewrap is not installed; the sandbox tests will skip" >&2

$(STAMP): pyproject.toml
	test -d $(VENV) || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev,bench,chrome,langchain,pydantic-ai,openai-agents]'
	touch $(STAMP)

# The real agent CLIs the proxy tests drive (tests skip, saying so, when they are missing).
NODE_DIR := build/node
NODE_STAMP := $(NODE_DIR)/.installed
NODE_PACKAGES := @anthropic-ai/claude-code@2.1.197 @openai/codex@0.171.0

node: $(NODE_STAMP)

$(NODE_STAMP): Makefile
	mkdir -p $(NODE_DIR)
	cd $(NODE_DIR) && npm install --no-audit --no-fund --no-save --prefix . $(NODE_PACKAGES)
	# npm skips install scripts it was not told to trust; Claude Code's puts its binary in place.
	cd $(NODE_DIR)/node_modules/@anthropic-ai/claude-code && node install.cjs
	touch $(NODE_STAMP)

# LiteLLM's proxy, the row `comal bench proxy --concurrency 1,8,32,64` compares comal with. A
# venv of its own: litellm[proxy] pins rich<14 and comal's textual needs rich>=14.2. The bench
# skips the row, saying so, where it is missing; it downloads nothing when it runs.
LITELLM_DIR := build/litellm
LITELLM_STAMP := $(LITELLM_DIR)/.installed
LITELLM_SPEC := litellm[proxy]>=1.50

litellm: $(LITELLM_STAMP)

$(LITELLM_STAMP): Makefile
	test -d $(LITELLM_DIR) || $(PY) -m venv $(LITELLM_DIR)
	$(LITELLM_DIR)/bin/pip install -q --upgrade pip
	$(LITELLM_DIR)/bin/pip install -q '$(LITELLM_SPEC)'
	touch $(LITELLM_STAMP)

# Screenshots for the README: the dashboard in Debian's chromium, the TUI's approval dialog
# (textual's own SVG).
screenshots: $(STAMP)
	COMAL_SCREENSHOTS=docs/serve $(BIN)/pytest tests/serve/test_dashboard_browser.py
	COMAL_SCREENSHOTS=docs $(BIN)/pytest tests/test_tui_contact.py -k approvals_show

demo: $(STAMP)
	$(BIN)/python -m comal.demo

lint: $(STAMP)
	$(BIN)/ruff check src tests bench examples
	$(BIN)/ruff format --check src tests bench examples

typecheck: $(STAMP)
	$(BIN)/mypy

test: lint typecheck sandbox
	$(BIN)/pytest

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
