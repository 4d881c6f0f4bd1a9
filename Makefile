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

test: $(VENV)/.installed-$(EXTRAS)
	$(PY) -m pytest -q

reproduce: $(VENV)/.installed-experiments,oracle,examples
	$(PY) -m experiments reproduce

lint: $(VENV)/.installed-test
	$(VENV)/bin/ruff check jaxstream experiments paper tests interop

clean:
	rm -rf $(VENV) experiments/results/.cache
