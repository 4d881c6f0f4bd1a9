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
from jaxstream.ops import rules as R

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


_IN_PLACE_CASES = {
    "same shape": (_G, _Y),
    "0-d": (np.float32(1.5), np.float32(0.5)),
    "g broadcasts": (_G.reshape(41, 1) * np.ones((41, 3), np.float32), _Y.reshape(41, 1)),
    "y broadcasts": (_G.reshape(41, 1), _Y.reshape(41, 1) * np.ones((41, 3), np.float32)),
    "g promotes": (_G.astype(np.float64), _Y),
}


@pytest.mark.parametrize("case", sorted(_IN_PLACE_CASES))
def test_the_host_form_writes_only_its_own_array(case):
    """On NumPy the kernel computes `g * (1 - y * y)` in the one array it makes (Note [The
    form of tanh's backward]); its inputs are left as they were, and where g would broadcast
    or promote the result it gives the steps' shape and dtype."""
    g, y = (np.array(a) for a in _IN_PLACE_CASES[case])
    g_before, y_before = g.copy(), y.copy()
    got = R._tanh_bw(np, g, y)
    steps = R._tanh_bw_steps(np, g, y)
    np.testing.assert_array_equal(g, g_before)
    np.testing.assert_array_equal(y, y_before)
    assert np.shape(got) == np.shape(steps) and np.result_type(got) == np.result_type(steps)
    np.testing.assert_allclose(got, steps, rtol=0, atol=4 * _EPS * 3.0)


def test_the_host_second_order_y_rule_writes_only_its_own_array():
    g, dy, y = _G * 0.5, _G, _Y
    before = [a.copy() for a in (g, dy, y)]
    got = R._dtanh_bw_y_in_place(np, g, dy, y)
    for a, was in zip((g, dy, y), before, strict=True):
        np.testing.assert_array_equal(a, was)
    np.testing.assert_array_equal(got, g * dy * y * -2.0)
    assert R._dtanh_bw_y_in_place(np, np.float32(2.0), np.float32(1.0), np.float32(0.5)) == -2.0
