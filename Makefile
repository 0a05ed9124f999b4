# Two commands set everything up on a fresh machine:
#   make demo   — create .venv, install, assemble the default local model, answer a question
#   make test   — create/update .venv with test extras, run the test suite
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
QUESTION ?= Who is Bob Dylan's maternal grandmother?

.PHONY: demo test install install-test model metaqa-value clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

install: $(BIN)/python
	$(BIN)/pip install --quiet -e '.[local,eval,serve]'

install-test: $(BIN)/python
	$(BIN)/pip install --quiet -e '.[local,eval,serve,test]'

model: $(BIN)/python
	$(BIN)/traversals model fetch

demo: install model
	$(BIN)/traversals ask "$(QUESTION)"

test: install-test model
	$(BIN)/python -m pytest -q -ra; rc=$$?; if [ $$rc -eq 5 ]; then echo "no tests collected"; rc=0; fi; exit $$rc

# The value trained without labels for MetaQA's KB (docs/rwt.md), rebuilt from the LLM's
# relation phrasings kept in bench/phrasings (about 5 minutes; the same weights every time)
METAQA ?= ../shared/data/metaqa
metaqa-value: install model
	mkdir -p models
	cp bench/phrasings/metaqa-kb.phrasings.json models/metaqa-syn.json.phrasings.json
	$(BIN)/traversals train-value --synthetic 1500 --kg $(METAQA)/kb.txt --out models/metaqa-syn.json

clean:
	rm -rf $(VENV) build *.egg-info
