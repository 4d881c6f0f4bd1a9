"""Small helpers shared by the test modules (a library for the tests, not a test file).

Import it as ``graphs.py`` is imported: ``from .helpers import ...`` where the
tests folder is a package, ``from helpers import ...`` where it is not.
Fixtures shared by several modules live in ``conftest.py`` instead.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import jaxstream as js

BACKENDS = ["numpy", "jax"]


def leaf(values, requires_grad=True, backend="numpy"):
    """A tensor of ``values``: float64 on the NumPy backend, float32 on the JAX one."""
    if backend == "jax":
        jnp = pytest.importorskip("jax.numpy")
        return js.tensor(jnp.asarray(np.asarray(values, dtype=np.float32)),
                         requires_grad=requires_grad)
    return js.tensor(np.asarray(values, dtype=np.float64), requires_grad=requires_grad)


def arr(t):
    """The values of tensor ``t`` as a NumPy array."""
    return np.asarray(t.numpy())


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
