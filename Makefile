# make demo: install into .venv, index the bundled sample corpus with the fast method (no model, no key),
# show the index and ask a local and a global question.
# make test: install with the test extras into .venv (and Debian's chromium for the explorer page test) and
# run the whole suite on every core (a test file to a worker), then make lint (what CI runs).
# make lint: ruff, mypy, the import contracts (.importlinter) and the docs site (docs/) built with warnings as
# errors.
# make experiment: run experiments/example.yaml (fast-method variants over the sample, no model) and print
# the table; the report is in experiments/example-results/report.md.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
CORE_STAMP := $(VENV)/.installed-core
# pipefail: an install whose output is filtered still fails the target when pip fails
SHELL := /bin/bash
.SHELLFLAGS := -o pipefail -c

.PHONY: demo test experiment lint settings bench clean browser

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): $(BIN)/python pyproject.toml
	@echo "Installing graphrag-lite with what the tests need into $(VENV) (a few minutes the first time)..."
	$(BIN)/python -m pip install --quiet --upgrade pip
	PYTHONUNBUFFERED=1 $(BIN)/python -m pip install -e '.[test]' | grep --line-buffered -E '^(Collecting|Successfully installed)'
	touch $(STAMP) $(CORE_STAMP)

# the demo needs only the core install (about a third of the test extras' download), with its progress shown
$(CORE_STAMP): $(BIN)/python pyproject.toml
	@echo "Installing graphrag-lite into $(VENV) (a minute or two the first time)..."
	$(BIN)/python -m pip install --quiet --upgrade pip
	PYTHONUNBUFFERED=1 $(BIN)/python -m pip install -e . | grep --line-buffered -E '^(Collecting|Successfully installed)'
	touch $(CORE_STAMP)

demo: $(CORE_STAMP)
	$(BIN)/graphrag-lite index --root . --method fast
	@echo
	$(BIN)/graphrag-lite show --root .
	@echo
	@echo "== local search, no model (ranked evidence): Who went to Woolwich with Sir W. Pen?"
	$(BIN)/graphrag-lite query local "Who went to Woolwich with Sir W. Pen?" --root . --set local_search.chat_model_id=null
	@echo
	@echo "== global search, no model (ranked evidence): What happened at the theatre?"
	$(BIN)/graphrag-lite query global "What happened at the theatre?" --root . --set global_search.chat_model_id=null
	@echo
	@echo "With a chat model configured (see README), the same commands generate an answer from this evidence."
	@echo "The index is in ./output (Parquet tables, LanceDB in output/lancedb, stats.json);"
	@echo "the graph for Gephi: $(BIN)/graphrag-lite export graphml --root ."

experiment: $(STAMP)
	$(BIN)/graphrag-lite experiment run experiments/example.yaml

# the explorer page test drives Debian's chromium (Playwright cannot download its own browser here); without
# it, and without root to install it, that one test is skipped and says why
browser:
	@command -v chromium >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } || \
		echo "chromium is not installed: the browser test will be skipped (apt-get install chromium)"

test: $(STAMP) browser
	$(BIN)/python -m pytest -n auto --dist loadfile -rs
	$(MAKE) lint

# the docs site (mkdocs.yml, docs/) is built with warnings as errors, into .venv so that it stays out of the
# repository; not with --quiet, which hides the warnings from --strict too (a broken link would pass)
lint: $(STAMP)
	$(BIN)/ruff check graphrag_lite tests bench
	$(BIN)/mypy
	$(BIN)/lint-imports
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir $(VENV)/site

settings: $(STAMP)
	$(BIN)/python -m graphrag_lite.sample_settings > settings.yaml

clean:
	rm -rf output cache experiments/example-results $(VENV)
