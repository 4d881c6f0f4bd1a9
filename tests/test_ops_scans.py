"""cumprod, logcumsumexp, std_mean and var_mean against torch: values, dtypes, node names,
first and second gradients on both backends (cumprod's at zeros too), under to_jax, and
PyTorch's errors."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import BACKENDS, arr, error_text
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from ops_oracle import check_against_torch, close, pair, uniform_values

import jaxstream as js
from jaxstream.jax_interop import to_jax

# NumPy warns where torch does not (an exponent of -inf, the lowest value plus itself).
pytestmark = [pytest.mark.oracle, pytest.mark.filterwarnings("ignore::RuntimeWarning")]

HYPOTHESIS = settings(max_examples=12, deadline=None)

# Rows with no zero, one, two (one of them first), and three.
ZEROS = [[2.0, -0.5, 3.0, 0.5, 1.5], [1.0, 2.0, 0.0, -3.0, 1.0], [0.0, 2.0, 0.5, 0.0, 1.5],
         [0.5, 0.0, 0.0, 2.0, 0.0]]


# Every case on NumPy, fewer on JAX (each JAX case compiles its kernels).
@pytest.mark.parametrize("backend, dim", [("numpy", 1), ("numpy", 0), ("numpy", -1), ("jax", 1)])
def test_cumprod_matches_torch_at_zeros_to_the_second_order(torch, backend, dim):
    check_against_torch(torch, lambda x: x.cumprod(dim), lambda x: x.cumprod(dim), [ZEROS],
                        backend)
    check_against_torch(torch, lambda x: js.cumprod(x * x, dim=dim) * x,
                        lambda x: torch.cumprod(x * x, dim=dim) * x, [ZEROS], backend)


@settings(HYPOTHESIS)
@given(values=hnp.arrays(np.float64, hnp.array_shapes(min_dims=0, max_dims=3, max_side=4),
                         elements=st.sampled_from([0.0, 1.0, -2.0, 0.5, 3.0])), data=st.data())
def test_cumprod_of_any_shape_and_zeros_matches_torch(torch, values, data):
    dim = data.draw(st.integers(-max(values.ndim, 1), max(values.ndim, 1) - 1))
    check_against_torch(torch, lambda x: x.cumprod(dim), lambda x: x.cumprod(dim), [values],
                        "numpy")


@pytest.mark.parametrize("backend, scale, dim", [("numpy", 1.0, 1), ("numpy", 60.0, 0),
                                                 ("jax", 60.0, 1)])
def test_logcumsumexp_matches_torch_at_any_magnitude(torch, backend, scale, dim):
    values = uniform_values(1, (3, 5))[0] * scale
    check_against_torch(torch, lambda x: js.logcumsumexp(x, dim) * x.tanh(),
                        lambda x: torch.logcumsumexp(x, dim) * x.tanh(), [values], backend)


def test_logcumsumexp_at_minus_infinity_is_torchs(torch):
    values = np.array([[-np.inf, -np.inf, 0.0, 1.0], [2.0, -np.inf, -1.0, 3.0]])
    x, tx = pair(torch, values, "numpy")
    ours, theirs = x.logcumsumexp(1), tx.logcumsumexp(1)
    np.testing.assert_allclose(arr(ours), theirs.detach().numpy())
    ours.sum().backward()
    theirs.sum().backward()
    np.testing.assert_allclose(arr(x.grad), tx.grad.numpy(), atol=1e-12)


@settings(HYPOTHESIS)
@given(shape=hnp.array_shapes(min_dims=0, max_dims=3, max_side=4), data=st.data())
def test_logcumsumexp_of_any_shape_matches_torch(torch, shape, data):
    dim = data.draw(st.integers(-max(len(shape), 1), max(len(shape), 1) - 1))
    values = uniform_values(len(shape), shape, low=-5, high=5)
    check_against_torch(torch, lambda x: x.logcumsumexp(dim) ** 2,
                        lambda x: x.logcumsumexp(dim) ** 2, values, "numpy")


SPREADS = [
    ((), {}), ((1,), {}), ((0, False), {}), ((1, True, True), {}), ((), {"dim": (0, 1)}),
    ((), {"dim": 0, "correction": 0, "keepdim": True}), ((False,), {}),
]


@pytest.mark.parametrize("backend, name, args, kwargs", [
    *(("numpy", name, *spread) for name in ("std_mean", "var_mean") for spread in SPREADS),
    ("jax", "std_mean", *SPREADS[2]), ("jax", "var_mean", *SPREADS[5]),
], ids=str)
def test_std_mean_and_var_mean_match_torch(torch, backend, name, args, kwargs):
    def call(m, x):
        spread, mean = getattr(m, name)(x, *args, **kwargs)
        return spread * 2.0 + mean * mean

    values = uniform_values(3, (3, 4))
    check_against_torch(torch, lambda x: call(js, x), lambda x: call(torch, x), values, backend)
    x, tx = pair(torch, values[0], backend)
    ours, theirs = getattr(js, name)(x, *args, **kwargs), getattr(torch, name)(tx, *args, **kwargs)
    assert type(ours) is tuple and len(ours) == len(theirs) == 2
    for a, b in zip(ours, theirs, strict=True):
        assert a.shape == tuple(b.shape)


@pytest.mark.parametrize("backend", BACKENDS)
def test_node_names_are_torchs(torch, backend):
    x, tx = pair(torch, ZEROS, backend)
    for call in (lambda x: x.cumprod(1), lambda x: x.logcumsumexp(0)):
        assert call(x).grad_fn.name() == call(tx).grad_fn.name()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("call", [
    lambda m, x: m.cumprod(x, 0), lambda m, x: m.cumprod(x > 0, 1),
    lambda m, x: m.cumprod(x, 1, dtype=m.float64 if m is not js else "float32"),
    lambda m, x: m.cumprod(x.float(), 0),
], ids=["int", "bool", "dtype", "float"])
def test_cumprod_gives_torchs_dtypes(torch, backend, call):
    values = np.array([[1, -2, 3], [4, 0, 6]], np.int32)
    ours, theirs = call(js, js.tensor(values, backend=backend)), call(torch, torch.tensor(values))
    if backend == "numpy" or theirs.dtype.is_floating_point:
        assert str(ours.dtype) in (str(theirs.dtype).removeprefix("torch."), "float32")
    np.testing.assert_array_equal(arr(ours), theirs.numpy())


def test_a_0d_tensor_is_its_own_running_product_and_logsumexp(torch):
    for name in ("cumprod", "logcumsumexp"):
        x, tx = pair(torch, 1.5, "numpy")
        ours, theirs = getattr(x, name)(0), getattr(tx, name)(0)
        assert ours.shape == () and float(arr(ours)) == theirs.item()
        ours.backward()
        theirs.backward()
        close(x.grad, tx.grad.numpy(), "numpy", name)


def test_the_ops_trace_under_jit_and_grad(torch):
    """cumprod (with zeros), logcumsumexp, std_mean and var_mean inside one traced loss:
    jax.jit(jax.grad(to_jax(loss))) matches torch."""
    values = [np.array(ZEROS)]

    def loss(m, x):
        std, mean = m.std_mean(x, 1)
        var, mean0 = m.var_mean(x, dim=0, keepdim=True)
        return ((m.cumprod(x, 1) * x).sum() + (m.logcumsumexp(x, 0) ** 2).sum()
                + (std * mean).sum() + (var * mean0).sum())

    got = jax.jit(jax.grad(to_jax(lambda x: loss(js, x))))(jnp.asarray(values[0],
                                                                         dtype=jnp.float32))
    tx = torch.tensor(values[0], requires_grad=True)
    want, = torch.autograd.grad(loss(torch, tx), [tx])
    np.testing.assert_allclose(np.asarray(got), want.numpy(), rtol=2e-3, atol=2e-4)


@pytest.mark.parametrize("call, error, phrases", [
    (lambda: js.ones(2, 3).cumprod(), ValueError, ["cumprod: give an axis (dim=)", "(2, 3)"]),
    (lambda: js.cumprod(js.ones(2, 3), 2), IndexError,
     ["Dimension out of range (expected to be in range of [-2, 1], but got 2)"]),
    (lambda: js.logcumsumexp(js.tensor([1, 2]), 0), NotImplementedError,
     ["\"logcumsumexp_out_cpu\" not implemented for 'Long'", "t.float()"]),
    (lambda: js.logcumsumexp(js.ones(2), dim=1), IndexError, ["Dimension out of range"]),
    (lambda: js.std_mean(js.ones(2, 3), 0, unbiased=True, correction=1), TypeError,
     ["std_mean(): give correction= or unbiased=, not both"]),
    (lambda: js.var_mean(js.ones(2, 3), dim=(1, 1)), ValueError, ["appears multiple times"]),
], ids=["cumprod_no_dim", "cumprod_bad_dim", "logcumsumexp_int", "logcumsumexp_bad_dim",
        "std_mean_both_corrections", "var_mean_repeated_dims"])
def test_bad_arguments_raise_torchs_errors(call, error, phrases):
    with pytest.raises(error) as excinfo:
        call()
    for phrase in phrases:
        assert phrase in error_text(excinfo)


def test_std_mean_of_one_element_warns_as_torch():
    with pytest.warns(UserWarning, match="degrees of freedom is <= 0"):
        std, mean = js.std_mean(js.ones(1))
    assert np.isnan(float(arr(std))) and float(arr(mean)) == 1.0
