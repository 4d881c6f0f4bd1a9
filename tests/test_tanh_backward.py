"""tanh's backward kernel (Note [The form of tanh's backward] in ops/rules.py): the same
product as `g * (1 - y**2)`, on both backends, and through a second-order grad."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import arr

import jaxstream as js
from jaxstream.ops import functional as F

_EPS = np.finfo(np.float32).eps
_Y = np.concatenate([[-1.0], np.tanh(np.linspace(-9.0, 9.0, 39)), [1.0]]).astype(np.float32)
"""Through the saturated range, ending at exactly -1 and 1."""
_G = np.linspace(-2.0, 3.0, 41).astype(np.float32)


@pytest.mark.parametrize("backend", ["numpy", "jax"])
def test_kernel_is_g_times_one_minus_y_squared(backend):
    got = arr(F.tanh_backward(js.tensor(_G, backend=backend), js.tensor(_Y, backend=backend)))
    g, y = _G.astype(np.float64), _Y.astype(np.float64)
    expected = g * (1 - y * y)
    assert got.dtype == np.float32
    # a few roundings of values no larger than 2|g|
    np.testing.assert_allclose(got, expected, rtol=0, atol=float(8 * _EPS * np.abs(g).max()))
    assert got[0] == 0.0 and got[-1] == 0.0


def test_backends_agree_within_rounding():
    found = [arr(F.tanh_backward(js.tensor(_G, backend=b), js.tensor(_Y, backend=b)))
             for b in ("numpy", "jax")]
    np.testing.assert_allclose(found[0], found[1], rtol=0, atol=4 * _EPS * 3.0)


@pytest.mark.parametrize("backend", ["numpy", "jax"])
def test_second_order_grad_matches_jax(backend):
    x0 = np.linspace(-2.0, 2.0, 7).astype(np.float32)
    x = js.tensor(x0, backend=backend, requires_grad=True)
    (g,) = js.grad(js.tanh(x).sum(), x, create_graph=True)
    (h,) = js.grad((g * g).sum(), x)
    expected = jax.grad(lambda v: (jax.grad(lambda u: jnp.tanh(u).sum())(v) ** 2).sum())(x0)
    np.testing.assert_allclose(arr(h), np.asarray(expected), rtol=1e-5, atol=1e-6)


def test_mismatched_shapes_raise():
    with pytest.raises(ValueError, match=r"\(3,\).*\(4,\)"):
        F.tanh_backward(js.tensor(np.ones(3, np.float32)), js.tensor(np.ones(4, np.float32)))
