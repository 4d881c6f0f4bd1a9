"""`nonzero`, `argwhere` and one-argument `where` as PyTorch's (indices, shapes, dtypes, the
refusal inside a trace), and `vector_norm` / `Tensor.norm` with every order PyTorch takes:
0, fractions, negatives and -inf, their values and gradients (at zeros too) against torch."""

from __future__ import annotations

import math
import warnings

import jax
import numpy as np
import pytest
from helpers import BACKENDS, arr, error_text
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from ops_oracle import check_against_torch, close, numpy_of, pair, tensor_of, uniform_values

import jaxstream as js

pytestmark = pytest.mark.oracle

HYPOTHESIS = settings(max_examples=25, deadline=None, derandomize=True, database=None)
DTYPES = ["bool", "int32", "int64", "float32", "float64"]


def _on(values, backend, dtype):
    """`values` as a tensor of `dtype` (float64 is float32 on JAX, whose x64 is off)."""
    if backend == "jax" and dtype == "float64":
        dtype = "float32"
    return js.tensor(np.asarray(values).astype(dtype), backend=backend)


def _index_dtype(backend):
    """The backend's integers, as argmax gives them (int32 on JAX without x64)."""
    return np.dtype("int64") if backend == "numpy" else js.argmax(_on([1], backend, "int32")).dtype


def _same_indices(ours, theirs, x):
    """`ours` holds torch's indices, as the backend's integers, on `x`'s backend and device,
    not differentiable."""
    assert ours.shape == tuple(theirs.shape)
    np.testing.assert_array_equal(arr(ours), theirs.numpy())
    assert ours.dtype == _index_dtype(x.backend)
    assert (ours.backend, ours.device) == (x.backend, x.device)
    assert not ours.requires_grad and ours.grad_fn is None


# ------------------------------------------------------------------ nonzero
@settings(HYPOTHESIS)
@given(values=hnp.arrays(np.int64, hnp.array_shapes(min_dims=0, max_dims=3, min_side=0,
                                                     max_side=4),
                         elements=st.sampled_from([0, 0, 1, -2])),
       dtype=st.sampled_from(DTYPES), backend=st.sampled_from(BACKENDS))
def test_nonzero_argwhere_and_where_match_torch_on_any_shape(torch, values, dtype, backend):
    x = _on(values, backend, dtype)
    tx = torch.from_numpy(values.astype(dtype))
    for ours, theirs in ((js.nonzero(x), torch.nonzero(tx)), (x.nonzero(), tx.nonzero()),
                         (js.argwhere(x), torch.argwhere(tx)), (x.argwhere(), tx.argwhere())):
        _same_indices(ours, theirs, x)
    np.testing.assert_array_equal(arr(js.nonzero(x)), np.argwhere(values))
    for ours, theirs in ((js.nonzero(x, as_tuple=True), torch.nonzero(tx, as_tuple=True)),
                         (x.nonzero(as_tuple=True), tx.nonzero(as_tuple=True)),
                         (js.where(x), torch.where(tx))):
        assert type(ours) is tuple and len(ours) == len(theirs) == max(values.ndim, 1)
        for a, b in zip(ours, theirs, strict=True):
            _same_indices(a, b, x)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("value", [5.0, 0.0, True, float("nan")], ids=str)
def test_a_0d_input_gives_torch_shapes(torch, backend, value):
    """(1, 0) or (0, 0) indices, and a tuple of one 1-d tensor, as torch's."""
    x, tx = js.tensor(value, backend=backend), torch.tensor(value)
    assert js.nonzero(x).shape == tuple(torch.nonzero(tx).shape) == ((0, 0) if not value
                                                                      else (1, 0))
    _same_indices(js.argwhere(x), torch.argwhere(tx), x)
    (ours,), (theirs,) = js.nonzero(x, as_tuple=True), torch.nonzero(tx, as_tuple=True)
    _same_indices(ours, theirs, x)
    _same_indices(js.where(x)[0], torch.where(tx)[0], x)


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_indices_index_the_nonzero_elements_and_carry_no_gradient(backend):
    x = tensor_of([[0.0, 1.5, 0.0], [-2.0, 0.0, 3.0]], backend)
    assert arr(x[x.nonzero(as_tuple=True)]).tolist() == [1.5, -2.0, 3.0]
    assert arr(x[js.where(x > 0)]).tolist() == [1.5, 3.0]
    rows = js.nonzero(x)
    assert arr(rows).tolist() == [[0, 1], [1, 0], [1, 2]]
    assert not rows.requires_grad and rows.grad_fn is None
    assert js.where(x > 0, x, 0.0).grad_fn is not None  # the three-argument form is as before


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_result_stays_on_the_input_device(backend):
    x = js.tensor(np.array([0.0, 2.0, 3.0], np.float32), backend=backend, device="sim:0")
    for result in (js.nonzero(x), js.argwhere(x), *js.where(x)):
        assert (result.backend, result.device) == (backend, x.device)
    assert arr(js.nonzero(x)).tolist() == [[1], [2]]


def test_the_jax_indices_follow_x64_as_argmax_does():
    values = np.array([[0.0, 2.0], [3.0, 0.0]])
    with jax.enable_x64(True):
        x = js.tensor(values, backend="jax")
        assert js.nonzero(x).dtype == js.where(x)[0].dtype == js.argmax(x).dtype == np.int64
    x = js.tensor(values.astype(np.float32), backend="jax")
    assert js.nonzero(x).dtype == js.argwhere(x).dtype == js.argmax(x).dtype == np.int32


@pytest.mark.parametrize("name, call", [
    ("nonzero", js.nonzero), ("argwhere", js.argwhere), ("nonzero", lambda t: js.where(t > 1)[0]),
    ("nonzero", lambda t: t.nonzero(as_tuple=True)[0]),
], ids=["nonzero", "argwhere", "where", "method"])
def test_a_trace_refuses_them_by_name(name, call):
    step = js.compile(lambda t: call(t))
    x = js.tensor(np.array([0.0, 2.0, 3.0], np.float32), backend="jax")
    with pytest.raises(RuntimeError) as excinfo:
        step(x)
    text = error_text(excinfo)
    assert text.startswith(f"{name}: the shape of the result")
    assert "(3,)" in text and ("float32" in text or "bool" in text) and "js.where" in text
    with pytest.raises(RuntimeError, match=f"^{name}: .*not known inside a trace"):
        jax.jit(js.to_jax(lambda t: call(t).sum()))(x.jax())
    assert arr(call(x)).size  # eager, the same call runs


def test_bad_arguments_are_refused_as_torch_refuses_them(torch):
    x, tx = js.tensor([1.0, 0.0]), torch.tensor([1.0, 0.0])
    for ours, theirs in ((lambda: js.where(x, x), lambda: torch.where(tx, tx)),
                         (lambda: js.nonzero(x, True), lambda: torch.nonzero(tx, True)),
                         (lambda: js.argwhere(x, as_tuple=True),
                          lambda: torch.argwhere(tx, as_tuple=True))):
        with pytest.raises(TypeError):
            theirs()
        with pytest.raises(TypeError):
            ours()
    with pytest.raises(TypeError, match=r"where\(\): give the condition alone .* other alone"):
        js.where(x, b=x)


# ------------------------------------------------------------------ vector_norm orders
ORDERS = [0.5, -0.5, -1.0, -2.0, 1.5, 2.5, 4.0, -math.inf]
NONZERO_VALUES = [[0.7, -1.3, 2.1, -0.4], [1.1, 0.6, -1.8, 0.9], [-0.5, 1.4, 0.8, -2.2]]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("order", ORDERS, ids=str)
def test_every_order_matches_torch_to_the_second_gradient(torch, backend, order):
    check_against_torch(torch, lambda x: js.vector_norm(x, order, dim=1),
                        lambda x: torch.linalg.vector_norm(x, order, 1), [NONZERO_VALUES],
                        backend)
    check_against_torch(torch, lambda x: js.linalg.vector_norm(x, ord=order),
                        lambda x: torch.linalg.vector_norm(x, ord=order), [NONZERO_VALUES],
                        backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("order", [0.5, -1.0, 3.0, -math.inf], ids=str)
def test_tensor_norm_and_linalg_follow_with_dim_and_keepdim(torch, backend, order):
    x, tx = pair(torch, NONZERO_VALUES, backend)
    for ours, theirs in ((x.norm(order, dim=0, keepdim=True), tx.norm(order, 0, True)),
                         (x.norm(order), tx.norm(order)),
                         (js.linalg.vector_norm(x, order, (0, 1)),
                          torch.linalg.vector_norm(tx, order, (0, 1)))):
        assert ours.shape == tuple(theirs.shape)
        assert ours.grad_fn.name() == theirs.grad_fn.name() == "LinalgVectorNormBackward0"
        close(ours, theirs.detach().numpy(), backend, f"norm of order {order}")


@pytest.mark.parametrize("backend", BACKENDS)
def test_order_zero_counts_the_nonzero_elements_with_no_gradient(torch, backend):
    values = [[0.0, -1.5, 2.0], [0.0, 0.0, 0.0]]
    x, tx = pair(torch, values, backend)
    y, ty = js.vector_norm(x, 0, dim=1), torch.linalg.vector_norm(tx, 0, 1)
    assert arr(y).tolist() == ty.tolist() == [2.0, 0.0]
    assert y.grad_fn.name() == ty.grad_fn.name()
    assert js.grad(y.sum(), x, allow_unused=True) == (None,)
    assert torch.autograd.grad(ty.sum(), tx, allow_unused=True) == (None,)
    (x.norm(0) + x.sum()).backward()
    (tx.norm(0) + tx.sum()).backward()
    close(x.grad, tx.grad.numpy(), backend, "the other path's gradient alone")


ZEROS = [[0.0, -2.0, 3.0, 0.5], [0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 2.0, 0.0], [2.0, -2.0, 1.0, 0.0]]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("order", [*ORDERS, 1.0, 2.0, 3.0, math.inf], ids=str)
def test_gradients_at_zeros_are_torch_with_no_floating_point_warnings(torch, backend, order):
    """First gradients are torch's at zeros (0 at a zero below order 2, 0 where the norm is
    0); second ones are torch's where torch's are finite and 0 for its NaNs, never NaN."""
    x, tx = pair(torch, ZEROS, backend)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        y = js.vector_norm(x, order, dim=1)
        (g,) = js.grad(y.sum(), x, create_graph=True)
        (h,) = js.grad(g.sum(), x, allow_unused=True)
    ty = torch.linalg.vector_norm(tx, order, 1)
    (tg,) = torch.autograd.grad(ty.sum(), tx, create_graph=True)
    (th,) = torch.autograd.grad(tg.sum(), tx, allow_unused=True, materialize_grads=True)
    close(y, ty.detach().numpy(), backend, "value")
    close(g, tg.detach().numpy(), backend, "gradient")
    h = np.zeros(x.shape) if h is None else arr(h)
    th = numpy_of(th)
    finite = np.isfinite(th)
    assert np.isfinite(h).all()
    close(h[finite], th[finite], backend, "second gradient where torch's is finite")


@settings(HYPOTHESIS)
@given(values=hnp.arrays(np.float64, hnp.array_shapes(min_dims=0, max_dims=3, max_side=4),
                         elements=st.sampled_from([0.0, 0.0, 1.0, -2.0, 0.5, 3.0])),
       order=st.sampled_from([0, 0.25, 0.5, -0.5, -1, -3, 1, 1.5, 2, 3, math.inf, -math.inf]),
       data=st.data())
def test_any_order_shape_and_dim_matches_torch(torch, values, order, data):
    dim = data.draw(st.sampled_from([None, *range(-values.ndim, values.ndim)]))
    keepdim = data.draw(st.booleans())
    x, tx = pair(torch, values, "numpy")
    y, ty = js.vector_norm(x, order, dim, keepdim), torch.linalg.vector_norm(tx, order, dim,
                                                                               keepdim)
    assert y.shape == tuple(ty.shape)
    close(y, ty.detach().numpy(), "numpy", "value")
    (g,) = js.grad(y.sum(), x, allow_unused=True)
    (tg,) = torch.autograd.grad(ty.sum(), tx, allow_unused=True, materialize_grads=True)
    close(np.zeros(values.shape) if g is None else g, tg.numpy(), "numpy", "gradient")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("order", [-1.0, -math.inf, math.inf], ids=str)
@pytest.mark.parametrize("shape, dim", [((0,), None), ((3, 0), 1), ((0, 3), 0)], ids=str)
def test_an_order_without_identity_refuses_an_empty_dim_as_torch(torch, backend, order, shape,
                                                                  dim):
    with pytest.raises(RuntimeError, match="does not have an identity"):
        torch.linalg.vector_norm(torch.zeros(shape), order, dim)
    x = js.tensor(np.zeros(shape, np.float32), backend=backend)
    with pytest.raises(RuntimeError) as excinfo:
        js.vector_norm(x, order, dim)
    text = error_text(excinfo)
    assert text.startswith(f"vector_norm: cannot compute the {order} norm")
    assert str(shape) in text and "no identity" in text
    # An empty result, or an order with an identity, is fine in both.
    assert js.vector_norm(js.tensor(np.zeros((0, 3))), order, 1).shape == (0,)
    assert arr(js.vector_norm(x, 0.5, dim)).tolist() == torch.linalg.vector_norm(
        torch.zeros(shape), 0.5, dim).tolist()


@pytest.mark.parametrize("order", ["fro", 1j, None])
def test_an_order_that_is_no_real_number_is_refused(order):
    with pytest.raises(TypeError, match=r"vector_norm: ord must be a real number .*\(3,\)"):
        js.vector_norm(js.tensor(uniform_values(0, (3,))[0]), order)


@pytest.mark.parametrize("backend", BACKENDS)
def test_tensor_norm_takes_torchs_fro_and_none_and_refuses_the_nuclear_norm(backend):
    torch = pytest.importorskip("torch")
    values = np.arange(12.0, dtype=np.float32).reshape(3, 4)
    ours, theirs = js.tensor(values, backend=backend), torch.tensor(values)
    for args in [(), (None,), ("fro",), ("fro", 1), (1, 0), (3,)]:
        np.testing.assert_allclose(arr(ours.norm(*args)), theirs.norm(*args).numpy(), rtol=1e-6)
    with pytest.raises(NotImplementedError, match="nuclear norm"):
        ours.norm("nuc")
