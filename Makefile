# Two entry points for a fresh clone: `make test` and `make reproduce`.
# Each creates .venv and installs what it needs; nothing else is required.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# Every extra a test needs: the test tools, PyTorch (the oracle), the experiments', the
# recipes' and the graph pictures' packages. Only a missing GPU may skip a test.
TEST_EXTRAS := test,oracle,experiments,examples,viz
# Bytecode is written even where the environment asks Python not to: otherwise every worker
# and every subprocess the suite starts compiles the package and rewrites the tests' asserts
# again (a third of a worker's start-up).
PYTEST := PYTHONDONTWRITEBYTECODE= $(PY) -m pytest -q -n auto --maxprocesses 4 --dist loadscope
# Where `make reproduce` runs the experiments: cpu, or cuda on a GPU machine.
DEVICE ?= cpu

.PHONY: test test-gpu-twin reproduce gpu-check lint clean

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed-%: pyproject.toml | $(VENV)/bin/python
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[$*]'
	touch $@

# The tests spread over the cores (at most four workers); each module's tests stay in one
# worker, so a module's fixtures run once. CI runs `make test`, the suite on this machine as
# it is, then `make test-gpu-twin`, the suite on the CPU twin of a GPU machine, where each
# sim device's JAX arrays live on a JAX device of their own and JAX's default device is
# sim:0's, as a GPU is on a GPU machine (Note [The GPU twin] in jaxstream/devices/xla.py).
test: $(VENV)/.installed-$(TEST_EXTRAS)
	$(PYTEST)

test-gpu-twin: $(VENV)/.installed-$(TEST_EXTRAS)
	JAXSTREAM_GPU_TWIN=1 $(PYTEST)

# On the CPU, `make reproduce` installs the versions the committed results were measured
# with (requirements-lock.txt); a GPU machine keeps the JAX and CUDA packages it ships.
REPRODUCE_PINS := $(if $(filter cpu,$(DEVICE)),-c requirements-lock.txt)

$(VENV)/.reproduce-installed-$(DEVICE): pyproject.toml requirements-lock.txt | $(VENV)/bin/python
	$(PY) -m pip install --quiet --disable-pip-version-check $(REPRODUCE_PINS) \
		-e '.[experiments,oracle,examples]'
	touch $@

# Every experiment at the size and threads its paper rows declare, then the paper.
reproduce: $(VENV)/.reproduce-installed-$(DEVICE)
	$(PY) -m experiments reproduce --device $(DEVICE)

# On a machine with an NVIDIA GPU (install the cuda13 or cuda12 extra first): environment,
# pytest -m cuda, the whole suite, the README's GPU section and the experiments on cuda, in
# at most 8 minutes, reported in experiments/results/gpu/.
gpu-check: $(VENV)/.installed-$(TEST_EXTRAS)
	$(PY) -m experiments.gpu_check

lint: $(VENV)/.installed-$(TEST_EXTRAS)
	$(VENV)/bin/ruff check jaxstream experiments paper tests interop

clean:
	rm -rf $(VENV) experiments/results/.cache
