"""Small helpers shared by the test modules (a library for the tests, not a test file).

The tests folder is not a package: pytest puts it on ``sys.path``, so a test module
imports this one as ``from helpers import ...``. Fixtures shared by several
modules live in ``conftest.py`` instead.
"""

from __future__ import annotations

import contextlib
import threading
import warnings

import numpy as np
import pytest

BACKENDS = ["numpy", "jax"]

# How long any wait in the tests (a thread join, an event, a queue, a barrier, an
# engine shutdown) may block before the test fails instead of hanging.
WAIT_S = 30.0


# --------------------------------------------------------------------------
# Tensors
# --------------------------------------------------------------------------


def leaf(values, requires_grad=True, backend="numpy"):
    """A tensor of ``values``: float64 on the NumPy backend, float32 on the JAX one."""
    import jaxstream as js  # not at the top: conftest.py imports WAIT_S without jaxstream

    if backend == "jax":
        return js.tensor(np.asarray(values, dtype=np.float32), backend="jax",
                         requires_grad=requires_grad)
    return js.tensor(np.asarray(values, dtype=np.float64), requires_grad=requires_grad)


def arr(t):
    """The values of tensor ``t`` as a NumPy array."""
    return np.asarray(t.numpy())


def jax_tensor(values, requires_grad=False):
    """A float32 tensor on the JAX backend (what js.compile runs on)."""
    return leaf(values, requires_grad=requires_grad, backend="jax")


def host_values(t):
    """``t``'s array as a NumPy array, or None for None (for optional gradients)."""
    return None if t is None else np.asarray(t.array)


def assert_tensors_close(a, b, what=""):
    """Two tensors (or Nones) hold the same float32 values, up to rounding."""
    np.testing.assert_allclose(host_values(a), host_values(b), rtol=1e-5, atol=1e-6, err_msg=what)


def grad_of(t):
    """``t.grad`` without the warning a framework may emit for non-leaves."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return t.grad


def error_text(excinfo):
    """The message of a ``pytest.raises`` exception, with its notes."""
    exc = excinfo.value
    return " ".join([str(exc), *getattr(exc, "__notes__", [])])


def tt(torch, values, requires_grad=True):
    """The torch counterpart of ``leaf(values)``: a float64 tensor."""
    return torch.tensor(np.asarray(values, dtype=np.float64), requires_grad=requires_grad)


def float32_normals(seed):
    """A function ``(*shape) -> array`` of float32 standard-normal draws.

    Each returned function has its own generator, seeded ``seed``: the values a
    module draws do not depend on which other modules ran before it.
    """
    rng = np.random.default_rng(seed)

    def draw(*shape: int) -> np.ndarray:
        return rng.standard_normal(shape).astype(np.float32)

    return draw


@contextlib.contextmanager
def jax_kernels_uncompiled():
    """A block in which the JAX backend runs its kernels as they are, uncompiled: its flag
    turned off and every op venue made again inside the block and after it, since a venue
    reads the flag once (Note [Deciding once where an op runs] in jaxstream/ops/venues.py)."""
    from jaxstream.backends.jax import JaxBackend
    from jaxstream.devices import forget_venues

    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(JaxBackend, "compiles_kernels", False)
            forget_venues()
            yield
    finally:
        forget_venues()


# --------------------------------------------------------------------------
# Autograd graphs (``grad_fn`` nodes)
# --------------------------------------------------------------------------


def all_nodes(root):
    """Every node reachable from ``root`` through ``next_functions``."""
    seen, out, stack = set(), [], [root]
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        out.append(node)
        stack.extend(fn for fn, _ in node.next_functions)
    return out


def reaches(node, target):
    return any(n is target for n in all_nodes(node))


def accumulator_of(root, variable):
    for node in all_nodes(root):
        if node.name() == "AccumulateGrad" and node.variable is variable:
            return node
    raise AssertionError("no AccumulateGrad for this leaf in the graph")


def ops_passed_to(monkeypatch, name, *modules):
    """The names of the ops passed from now on to each module's own binding of the function
    ``name`` (``apply``, ``rules_of``), in order: which ops a piece of work dispatched."""
    seen = []
    real = getattr(modules[0], name)

    def counting(op, *args, **kwargs):
        seen.append(op.name)
        return real(op, *args, **kwargs)

    for module in modules:
        monkeypatch.setattr(module, name, counting)
    return seen


def returns_this(result):
    """A Function (node name ``ReturnsThisBackward``) that multiplies by one in the
    forward and whose backward returns ``result(g)``: whatever a test needs a node to give."""
    from jaxstream.autograd.function import Function

    class ReturnsThis(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 1.0

        @staticmethod
        def backward(ctx, g):
            return result(g)

    return ReturnsThis


# --------------------------------------------------------------------------
# Threads
# --------------------------------------------------------------------------


def run_threads(target, args_per_thread):
    """Runs ``target(*args)`` on a new thread for each ``args``, all at once.

    Returns the exceptions the threads raised; fails if a thread is still
    running ``WAIT_S`` after it was joined.
    """
    errors: list[BaseException] = []

    def body(*args):
        try:
            target(*args)
        except BaseException as exc:  # noqa: BLE001  (returned to the caller)
            errors.append(exc)

    threads = [threading.Thread(target=body, args=args) for args in args_per_thread]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=WAIT_S)
    assert not any(thread.is_alive() for thread in threads), "a worker thread did not finish"
    return errors
