# pattern-memory — two commands from a fresh clone:  make run  |  make test
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
RUN_STAMP := $(VENV)/.installed-runtime

.PHONY: run test install lint bench clean screenshots docs

# the development install: the runtime, the test tools and the [torch] extra (the parity test
# compares the packaged model with sentence-transformers on torch)
$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	# torch first, pinned to the CPU wheel (an unpinned torch pulls a multi-GB CUDA build)
	$(BIN)/python -m pip install -q torch==2.13.0
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

# the runtime alone, no torch (a development install, when current, has it already)
$(RUN_STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	if [ ! $(STAMP) -nt pyproject.toml ]; then \
	  $(BIN)/python -m pip install -q --upgrade pip && $(BIN)/python -m pip install -q -e .; fi
	touch $(RUN_STAMP)

install: $(STAMP)

run: $(RUN_STAMP)
	$(BIN)/pattern-memory demo

# three workers (pytest-xdist), a test file each at a time: the suite waits on daemons, browsers
# and PostgreSQL as much as on the CPU, so a third worker fills two cores (a fourth only adds
# contention: 6:19 against 5:42). The files of slow tests are handed out first and the browser
# tests' file last (tests/conftest.py), so the slow ones run beside each other, the short ones
# fill the time left, and no file follows the browser tests in their worker.
# Bytecode is written even where the shell says not to (PYTHONDONTWRITEBYTECODE): the suite
# starts hundreds of Python processes (daemons, hooks, commands), and without cached bytecode
# each compiles the package again, as each worker's collection does.
test: $(STAMP) docs
	env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -m pytest -q -n 3 --dist loadfile --durations=10

# the documentation site (mkdocs.yml, docs/) into site/; --strict: a broken link, a missing
# anchor or a page left out of the nav fails the build, and so `make test`
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

# the dashboard screenshots in docs/screenshots/: a demo store built with the real model,
# photographed page by page in /usr/bin/chromium (scripts/screenshots.py)
screenshots: $(STAMP)
	$(BIN)/python scripts/screenshots.py

lint: $(STAMP)
	$(BIN)/ruff check . && $(BIN)/ruff format --check .

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .bench-cache site
