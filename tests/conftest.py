"""Shared test set-up: hardware-gated markers, the torch fixture and thread hygiene between tests.

Plain helper functions (and ``WAIT_S``) shared by several modules are in ``helpers.py``.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import threading

import pytest
from helpers import WAIT_S

# On a GPU, JAX takes 75% of its memory at its first operation unless told not to
# (JAX's "GPU memory allocation" page); the cuda tests share the GPU with CuPy, in
# this process and in the recipes' subprocesses, which inherit this.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

# Note [The suite's compilation cache]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# Most of the JAX tests' time is XLA compiling small kernels, and the same kernels are
# compiled again in every worker and in every subprocess the suite starts (experiments,
# recipes, distributed runs). JAX's persistent compilation cache shares them: set here, before
# JAX is imported, so that the workers and their subprocesses inherit it, with no minimum
# compile time (each of these compiles takes tens of milliseconds, under JAX's default
# threshold). It lives with pytest's own cache, which git ignores; an entry is keyed by the
# program, the JAX and XLA versions and the devices, so a stale one is never used.
os.environ.setdefault(
    "JAX_COMPILATION_CACHE_DIR",
    os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), ".pytest_cache",
                 "jax-compilation-cache"),
)
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")


def _cuda_available() -> bool:
    if importlib.util.find_spec("cupy") is None:
        return False
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


def pytest_collection_modifyitems(config: pytest.Config, items: list) -> None:
    _run_each_heavy_run_once(config, items)
    has_cuda = _cuda_available()
    has_torch = importlib.util.find_spec("torch") is not None
    for item in items:
        if "cuda" in item.keywords and not has_cuda:
            item.add_marker(pytest.mark.skip(reason="needs a CUDA GPU with CuPy; none present"))
        if "oracle" in item.keywords and not has_torch:
            item.add_marker(pytest.mark.skip(reason="needs torch (the 'oracle' extra)"))


def _run_each_heavy_run_once(config: pytest.Config, items: list) -> None:
    """CI runs the suite twice, as the machine is (`make test`) and in the GPU twin (`make
    test-gpu-twin`, Note [The GPU twin] in jaxstream/devices/xla.py). The few whole-experiment
    runs that take a minute each run in one of the two: those on the sim stand-in for cuda in
    the twin, those on the cpu outside it. The other run deselects them (never skips: each
    does run in CI)."""
    from jaxstream.devices.xla import TWIN_ENV  # not at the top: see `jax_x64` below

    other_run = "outside_twin" if os.environ.get(TWIN_ENV) == "1" else "twin_only"
    elsewhere = [item for item in items if other_run in item.keywords]
    if elsewhere:
        config.hook.pytest_deselected(items=elsewhere)
        items[:] = [item for item in items if other_run not in item.keywords]


@pytest.fixture(scope="module")
def torch():
    """The ``torch`` module, or a skip where it is not installed (the 'oracle' extra).

    Module-scoped so that hypothesis tests can take it too.
    """
    return pytest.importorskip("torch")


@pytest.fixture(scope="module")
def jax_x64():
    """JAX's 64-bit mode for one module (differential tests compare in float64)."""
    import jax  # not at the top: as for jaxstream below

    previous = jax.config.read("jax_enable_x64")
    jax.config.update("jax_enable_x64", True)
    try:
        yield
    finally:
        jax.config.update("jax_enable_x64", previous)


@pytest.fixture
def fresh_compiled_caches():
    """The JAX backend's compiled kernels, backwards and numbers forgotten before and after
    a test, so that what it asserts of them is its own doing; modules opt in with
    ``usefixtures``."""
    from jaxstream.ops import compiled_backward, compiled_kernels  # not at the top: as jax

    compiled_kernels.clear_cache()
    compiled_backward.clear_cache()
    yield
    compiled_kernels.clear_cache()
    compiled_backward.clear_cache()


@pytest.fixture
def no_threads_left_behind():
    """Fails a test that leaves a thread running; modules opt in with ``usefixtures``."""
    before = set(threading.enumerate())
    yield
    left = [t for t in threading.enumerate() if t not in before and t.is_alive()]
    assert not left, f"threads left running: {left}"


@pytest.fixture
def no_leaked_threads():
    """Engine threads must not outlive a test; modules opt in with ``usefixtures``.

    Shuts the engine's threads down (each shutdown given ``WAIT_S``) before and
    after the test, and fails if any is left afterwards.
    """
    import jaxstream as js  # not at the top: modules that never import jaxstream need not

    assert js.autograd.shutdown_engine_threads(WAIT_S)
    yield
    assert js.autograd.shutdown_engine_threads(WAIT_S)
    assert js.autograd.engine_threads() == []
    leftovers = [t for t in threading.enumerate() if t.name.startswith("jaxstream autograd")]
    assert leftovers == []


@pytest.fixture(autouse=True)
def sim_devices_synchronized_after_each_test():
    """Each test is a program of its own: it ends as one would, with `js.synchronize()`.

    Without it, memory read on a side stream and freed unsynced in one test
    could be handed to a buffer of a later test, and the sanitizer would rightly
    report that reuse there (Note [Stream sanitizer]), in whichever test the
    allocator happened to pick.
    """
    yield
    js = sys.modules.get("jaxstream")
    if js is not None:
        for index in range(js.sim.device_count()):
            js.synchronize(js.device(f"sim:{index}"))
