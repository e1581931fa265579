# `make demo` and `make test` set everything up on a fresh clone, then run.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

.PHONY: setup demo test bench check-gpu clean

setup: $(STAMP)

$(STAMP): requirements.txt setup.py pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet -r requirements.txt
	$(PY) -m pip install --quiet --no-build-isolation -e .
	touch $(STAMP)

demo: setup
	$(PY) -m dali_loaders demo

test: setup
	$(PY) -m pytest -q tests

bench: setup
	$(PY) -m dali_loaders bench

check-gpu: setup   # on a machine with a GPU: the GPU checks, then the GPU bench (docs/speed.md)
	$(PY) -m dali_loaders check-gpu --bench

clean:
	rm -rf $(VENV) build *.egg-info
