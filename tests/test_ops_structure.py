"""tril, triu, roll, tile, diag, trace, outer and kron against torch: values, dtypes, node
names, first and second gradients on both backends, under to_jax, and PyTorch's errors."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import BACKENDS, arr, error_text
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from ops_oracle import check_against_torch, close, pair, tensor_of, uniform_values

import jaxstream as js
from jaxstream.jax_interop import to_jax

pytestmark = pytest.mark.oracle

HYPOTHESIS = settings(max_examples=10, deadline=None)


def _cases(torch):
    """name -> (jaxstream call, torch call, input shapes); each squared so that the second
    gradient is not zero."""
    return {
        "tril": (lambda x: x.tril() ** 2, lambda x: x.tril() ** 2, [(3, 4)]),
        "tril_above": (lambda x: js.tril(x, 1) ** 2, lambda x: torch.tril(x, 1) ** 2, [(2, 3, 3)]),
        "triu_below": (lambda x: js.triu(x, diagonal=-1) ** 2,
                       lambda x: torch.triu(x, diagonal=-1) ** 2, [(4, 3)]),
        "roll_flat": (lambda x: x.roll(2) * x, lambda x: x.roll(2) * x, [(3, 4)]),
        "roll_dims": (lambda x: js.roll(x, (1, -2), (0, -1)) * x,
                      lambda x: torch.roll(x, (1, -2), (0, -1)) * x, [(3, 4)]),
        "tile": (lambda x: js.tile(x, (2,)) ** 2, lambda x: torch.tile(x, (2,)) ** 2, [(2, 3)]),
        "tile_more": (lambda x: x.tile(2, 1, 2) ** 2, lambda x: x.tile(2, 1, 2) ** 2, [(2, 3)]),
        "diag_of_matrix": (lambda x: x.diag() ** 2, lambda x: x.diag() ** 2, [(3, 4)]),
        "diag_above": (lambda x: js.diag(x, 1) ** 2, lambda x: torch.diag(x, 1) ** 2, [(4, 3)]),
        "diag_below": (lambda x: js.diag(x, -2) ** 2, lambda x: torch.diag(x, -2) ** 2, [(4, 3)]),
        "diag_of_vector": (lambda x: js.diag(x) ** 2, lambda x: torch.diag(x) ** 2, [(3,)]),
        "diag_of_vector_above": (lambda x: x.diag(2) * x.sum(), lambda x: x.diag(2) * x.sum(),
                                 [(3,)]),
        "diag_of_vector_below": (lambda x: js.diag(x, -1) ** 2, lambda x: torch.diag(x, -1) ** 2,
                                 [(2,)]),
        "trace": (lambda x: x.trace() ** 2, lambda x: x.trace() ** 2, [(3, 4)]),
        # Not torch.trace: before the fix of pytorch/pytorch#171704 (torch 2.11 among them) its
        # backward also sends the gradient to [3, 0] of a tall 4x2 matrix. The sum of torch's
        # diagonal is trace's definition, with the right gradient in every torch; torch.trace's
        # value is checked in test_the_trace_of_any_matrix_is_torchs_and_its_gradient_jaxs.
        "trace_tall": (lambda x: js.trace(x) ** 2, lambda x: torch.diagonal(x).sum() ** 2,
                       [(4, 2)]),
        "outer": (js.outer, torch.outer, [(3,), (4,)]),
        "ger": (lambda a, b: a.ger(b) ** 2, lambda a, b: torch.outer(a, b) ** 2, [(2,), (3,)]),
        "kron": (js.kron, torch.kron, [(2, 3), (3, 2)]),
        "kron_ranks": (lambda a, b: a.kron(b) ** 2, lambda a, b: a.kron(b) ** 2, [(2,), (2, 3)]),
        "kron_scalar": (js.kron, torch.kron, [(2, 2), ()]),
    }


NAMES = ["tril", "tril_above", "triu_below", "roll_flat", "roll_dims", "tile", "tile_more",
         "diag_of_matrix", "diag_above", "diag_below", "diag_of_vector", "diag_of_vector_above",
         "diag_of_vector_below", "trace", "trace_tall", "outer", "ger", "kron", "kron_ranks",
         "kron_scalar"]


# Every case on NumPy, one or two per op on JAX (each JAX case compiles its kernels);
# test_the_ops_trace_under_jit_and_grad runs every op on JAX again.
JAX_NAMES = ["tril_above", "triu_below", "roll_dims", "tile", "diag_above",
             "diag_of_vector_below", "trace", "outer", "kron_ranks"]


@pytest.mark.parametrize("backend, name", [("numpy", n) for n in NAMES]
                         + [("jax", n) for n in JAX_NAMES])
def test_structure_ops_match_torch(torch, backend, name):
    js_fn, torch_fn, shapes = _cases(torch)[name]
    check_against_torch(torch, js_fn, torch_fn, uniform_values(1, *shapes), backend)


@settings(HYPOTHESIS)
@given(shape=hnp.array_shapes(min_dims=2, max_dims=3, max_side=4), data=st.data(),
       name=st.sampled_from(["tril", "triu", "roll", "diag"]))
def test_any_shape_and_diagonal_matches_torch(torch, shape, data, name):
    k = data.draw(st.integers(-4, 4))
    if name == "diag":
        shape = shape[:data.draw(st.integers(1, 2))]
    dims = tuple(range(len(shape)))[:data.draw(st.integers(0, len(shape)))]
    shifts = tuple(k + d for d in dims) or k

    def call(m, x):
        if name == "roll":
            return m.roll(x, shifts, dims or None) * x
        return getattr(m, name)(x, k) ** 2

    check_against_torch(torch, lambda x: call(js, x), lambda x: call(torch, x),
                        uniform_values(k + 5, shape), "numpy")


@pytest.mark.parametrize("backend", BACKENDS)
def test_node_names_are_torchs(torch, backend):
    x, tx = pair(torch, uniform_values(2, (3, 3))[0], backend)
    calls = [lambda x: x.tril(), lambda x: x.triu(1), lambda x: x.roll(1, 0),
             lambda x: x.tile((2,)), lambda x: x.diag(), lambda x: x[0].diag(1),
             lambda x: x.trace(), lambda x: x[0].outer(x[1])]
    for call in calls:
        assert call(x).grad_fn.name() == call(tx).grad_fn.name()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("call", [
    lambda m, x: m.tril(x, -1), lambda m, x: m.triu(x), lambda m, x: m.roll(x, 1),
    lambda m, x: m.tile(x, (2, 1)), lambda m, x: m.diag(x), lambda m, x: m.diag(x[0], 1),
    lambda m, x: m.trace(x), lambda m, x: m.outer(x[0], x[1]), lambda m, x: m.kron(x, x),
    lambda m, x: m.outer(x[0], x[1].float()), lambda m, x: m.kron(x.float(), x),
], ids=["tril", "triu", "roll", "tile", "diag", "diag_vector", "trace", "outer", "kron",
        "outer_promotes", "kron_promotes"])
def test_integer_tensors_keep_torchs_dtypes(torch, backend, call):
    values = np.array([[1, -2, 3], [4, 0, 6]], np.int32)
    ours, theirs = call(js, js.tensor(values, backend=backend)), call(torch, torch.tensor(values))
    if backend == "numpy" or theirs.dtype.is_floating_point:
        assert str(ours.dtype) == str(theirs.dtype).removeprefix("torch.")
    np.testing.assert_array_equal(arr(ours), theirs.numpy())


@pytest.mark.parametrize("shape", [(4, 2), (5, 1), (2, 4), (3, 3)])
def test_the_trace_of_any_matrix_is_torchs_and_its_gradient_jaxs(torch, shape):
    """The value is torch.trace's; the gradient, d trace / dA = eye(n, m), is checked against
    jax.grad, as torch 2.11's is wrong for tall matrices (pytorch/pytorch#171704)."""
    values = uniform_values(5, shape)[0]
    x = tensor_of(values, "numpy")
    y = js.trace(x)
    close(y, torch.trace(torch.tensor(values)).numpy(), "numpy", "value")
    (g,) = js.grad(y * y, [x])
    expected = jax.grad(lambda a: jnp.trace(a) ** 2)(jnp.asarray(values, jnp.float32))
    np.testing.assert_allclose(arr(g), np.asarray(expected), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(arr(g) != 0, np.eye(*shape, dtype=bool))


def test_an_empty_diagonal_is_empty_and_its_gradient_zero(torch):
    x, tx = pair(torch, uniform_values(3, (2, 3))[0], "numpy")
    ours, theirs = js.diag(x, 5), torch.diag(tx, 5)
    assert ours.shape == tuple(theirs.shape) == (0,)
    (ours.sum() + x.sum() * 0).backward()
    np.testing.assert_array_equal(arr(x.grad), np.zeros((2, 3)))


def test_the_ops_trace_under_jit_and_grad(torch):
    """Every op of this module inside one traced loss: jax.jit(jax.grad(to_jax(loss)))
    matches torch."""
    values = uniform_values(4, (3, 3), (3,))

    def loss(m, x, v):
        y = (m.tril(x, -1) + m.triu(x, 1) * 2 + m.roll(x, (1, 2), (0, 1)) + m.diag(v, 0)
             + m.outer(v, m.diag(x)) + m.tile(v, (3, 1)))
        return (y * y).sum() + m.trace(x) ** 2 + (m.kron(x, v) ** 2).sum()

    got = jax.jit(jax.grad(to_jax(lambda x, v: loss(js, x, v)), argnums=(0, 1)))(
        *map(jnp.asarray, values))
    txs = [torch.tensor(v, requires_grad=True) for v in values]
    want = torch.autograd.grad(loss(torch, *txs), txs)
    for g, tg in zip(got, want, strict=True):
        np.testing.assert_allclose(np.asarray(g), tg.numpy(), rtol=2e-3, atol=2e-4)


@pytest.mark.parametrize("call, error, phrases", [
    (lambda: js.tril(js.ones(3)), RuntimeError,
     ["tril: input tensor must have at least 2 dimensions", "(3,)"]),
    (lambda: js.ones(3).triu(), RuntimeError, ["triu: input tensor must have at least 2"]),
    (lambda: js.roll(js.ones(2, 3), (1, 2)), RuntimeError,
     ["shifts and dimensions must align. shifts: 2, dims:0"]),
    (lambda: js.roll(js.ones(2, 3), (1,), (0, 1)), RuntimeError,
     ["shifts and dimensions must align. shifts: 1, dims:2"]),
    (lambda: js.roll(js.ones(2, 3), 1, 5), IndexError,
     ["Dimension out of range (expected to be in range of [-2, 1], but got 5)"]),
    (lambda: js.diag(js.tensor(1.0)), RuntimeError, ["diag(): Supports 1D or 2D tensors. Got 0D"]),
    (lambda: js.ones(2, 2, 2).diag(), RuntimeError, ["Supports 1D or 2D tensors. Got 3D"]),
    (lambda: js.trace(js.ones(3)), RuntimeError,
     ["trace: expected a matrix, but got tensor with dim 1"]),
    (lambda: js.outer(js.ones(2, 2), js.ones(2)), RuntimeError,
     ["outer: Expected 1-D argument self, but got 2-D"]),
    (lambda: js.outer(js.ones(2), js.tensor(1.0)), RuntimeError,
     ["outer: Expected 1-D argument vec2, but got 0-D"]),
], ids=["tril_vector", "triu_vector", "roll_no_dims", "roll_misaligned", "roll_bad_dim",
        "diag_0d", "diag_3d", "trace_vector", "outer_matrix", "outer_scalar"])
def test_bad_arguments_raise_torchs_errors(call, error, phrases):
    with pytest.raises(error) as excinfo:
        call()
    for phrase in phrases:
        assert phrase in error_text(excinfo)
