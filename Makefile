# make demo: install into .venv, index the bundled sample corpus with the fast method (no model, no key),
# show the index and ask a local and a global question.
# make test: install with the test extras into .venv and run the whole suite (what CI runs).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint settings bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/graphrag-lite index --root . --method fast
	@echo
	$(BIN)/graphrag-lite show --root .
	@echo
	@echo "== local search: Who did Pepys go to Woolwich with?"
	$(BIN)/graphrag-lite query local "Who did Pepys go to Woolwich with?" --root .
	@echo
	@echo "== global search: What are the main themes of the diary?"
	$(BIN)/graphrag-lite query global "What are the main themes of the diary?" --root .
	@echo
	@echo "The index is in ./output (Parquet tables, LanceDB in output/lancedb, stats.json);"
	@echo "the graph for Gephi: $(BIN)/graphrag-lite export graphml --root ."

test: $(STAMP)
	$(BIN)/python -m pytest
	$(BIN)/ruff check graphrag_lite tests bench
	$(BIN)/mypy

lint: $(STAMP)
	$(BIN)/ruff check graphrag_lite tests bench
	$(BIN)/mypy

settings: $(STAMP)
	$(BIN)/python -m graphrag_lite.sample_settings > settings.yaml

clean:
	rm -rf output cache $(VENV)
