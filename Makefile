# pattern-memory — two commands from a fresh clone:  make run  |  make test
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test install lint bench clean screenshots

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	# torch first, pinned to the CPU wheel (an unpinned torch pulls a multi-GB CUDA build)
	$(BIN)/python -m pip install -q torch==2.13.0
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(BIN)/pattern-memory demo

test: $(STAMP)
	$(BIN)/python -m pytest -q

# the dashboard screenshots in docs/screenshots/ (needs /usr/bin/chromium)
screenshots: $(STAMP)
	PATTERN_UPDATE_SCREENSHOTS=1 $(BIN)/python -m pytest -q tests/test_ui_browser.py -k screenshots

lint: $(STAMP)
	$(BIN)/ruff check . && $(BIN)/ruff format --check .

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .bench-cache
