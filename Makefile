# `make demo` and `make test` set everything up on a fresh clone, then run.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

# The smoke set on the lowest DALI the extras accept, in a venv of its own (same pins but DALI).
LOWEST      := .venv-lowest
PY_LOWEST   := $(LOWEST)/bin/python
LOWEST_DALI := nvidia-dali-cuda120==2.3.0

.PHONY: setup demo test test-quick bench check-gpu clean smoke-lowest

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

smoke-lowest: $(LOWEST)/.installed
	$(PY_LOWEST) -m dali_loaders build-plugins
	$(PY_LOWEST) -m pytest -m smoke tests

$(LOWEST)/.installed: requirements.txt setup.py pyproject.toml
	test -x $(PY_LOWEST) || $(PYTHON) -m venv $(LOWEST)
	grep -v '^nvidia-dali-' requirements.txt > $(LOWEST)/requirements.txt
	echo '$(LOWEST_DALI)' >> $(LOWEST)/requirements.txt
	$(PY_LOWEST) -m pip install --quiet -r $(LOWEST)/requirements.txt
	$(PY_LOWEST) -m pip install --quiet --no-build-isolation --no-deps -e .
	touch $@

bench: setup
	$(PY) -m dali_loaders bench

check-gpu: setup   # on a machine with a GPU: the GPU checks, then the GPU bench (docs/speed.md)
	$(PY) -m dali_loaders check-gpu --bench

clean:
	rm -rf $(VENV) $(LOWEST) build *.egg-info
