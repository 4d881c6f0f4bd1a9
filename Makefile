# Two entry points for a fresh clone: `make test` and `make reproduce`.
# Each creates .venv and installs what it needs; nothing else is required.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
EXTRAS ?= test

.PHONY: test reproduce lint clean

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed-%: pyproject.toml | $(VENV)/bin/python
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[$*]'
	touch $@

# The tests spread over the cores (at most four workers); each module's tests stay in one
# worker, so a module's fixtures run once.
test: $(VENV)/.installed-$(EXTRAS)
	$(PY) -m pytest -q -n auto --maxprocesses 4 --dist loadscope

reproduce: $(VENV)/.installed-experiments,oracle,examples
	$(PY) -m experiments reproduce

lint: $(VENV)/.installed-test
	$(VENV)/bin/ruff check jaxstream experiments paper tests interop

clean:
	rm -rf $(VENV) experiments/results/.cache
