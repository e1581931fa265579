# `make demo` and `make test` set everything up on a fresh clone, then run.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: setup demo test test-quick bench clean

setup: $(STAMP)

$(STAMP): requirements.txt setup.py pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet -r requirements.txt
	$(PY) -m pip install --quiet --no-build-isolation -e .
	touch $(STAMP)

demo: setup
	$(PY) -m dali_loaders demo

# the whole suite (CI runs it); test-quick leaves out the tests marked slow or subprocess
test: setup
	$(PY) -m pytest tests

test-quick: setup
	$(PY) -m pytest -m "not slow and not subprocess" tests

bench: setup
	$(PY) -m dali_loaders bench

clean:
	rm -rf $(VENV) build *.egg-info
