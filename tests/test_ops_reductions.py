"""Reductions against torch: values, first and second gradients on both backends, the
PyTorch spellings `dim=`/`keepdim=`, subgradients at ties and zeros, bad axes."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from helpers import BACKENDS, arr, error_text
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from ops_oracle import check_against_torch, close, tensor_of, uniform_values

import jaxstream as js

pytestmark = pytest.mark.oracle

HYPOTHESIS = settings(max_examples=15, deadline=None)


# ------------------------------------------------------------------ reductions
def _torch_prod(x, dim, keepdim):
    """torch.prod over several dims (torch takes one at a time)."""
    if dim is None:
        return x.prod()
    for d in sorted((dim,) if isinstance(dim, int) else (a % x.ndim for a in dim), reverse=True):
        x = x.prod(d, keepdim=keepdim)
    return x


def _reduction_cases(torch):
    return {
        "min": (lambda x, **k: js.min(x, **k), lambda x, dim, keepdim: torch.amin(
            x, dim=() if dim is None else dim, keepdim=keepdim)),
        "prod": (lambda x, **k: x.prod(**k), _torch_prod),
        "var": (lambda x, **k: x.var(correction=0, **k), lambda x, dim, keepdim: x.var(
            dim, correction=0, keepdim=keepdim)),
        "var_unbiased": (lambda x, **k: js.var(x, **k),
                         lambda x, dim, keepdim: x.var(dim, keepdim=keepdim)),
        "std": (lambda x, **k: js.std(x, correction=0, **k), lambda x, dim, keepdim: x.std(
            dim, correction=0, keepdim=keepdim)),
        "std_unbiased": (lambda x, **k: x.std(correction=1, **k),
                         lambda x, dim, keepdim: x.std(dim, keepdim=keepdim)),
        "norm2": (lambda x, **k: js.vector_norm(x, **k),
                  lambda x, dim, keepdim: torch.linalg.vector_norm(x, 2, dim, keepdim)),
        "norm1": (lambda x, **k: js.vector_norm(x, 1, **k),
                  lambda x, dim, keepdim: torch.linalg.vector_norm(x, 1, dim, keepdim)),
        "norm3": (lambda x, **k: x.norm(3, **k),
                  lambda x, dim, keepdim: torch.linalg.vector_norm(x, 3, dim, keepdim)),
        "norm_inf": (lambda x, **k: js.vector_norm(x, np.inf, **k),
                     lambda x, dim, keepdim: torch.linalg.vector_norm(x, np.inf, dim, keepdim)),
        "sum": (lambda x, **k: x.sum(**k), lambda x, dim, keepdim: x.sum() if dim is None
                else x.sum(dim, keepdim=keepdim)),
        "mean": (lambda x, **k: js.mean(x, **k), lambda x, dim, keepdim: x.mean() if dim is None
                 else x.mean(dim, keepdim=keepdim)),
        "max": (lambda x, **k: x.max(**k), lambda x, dim, keepdim: torch.amax(
            x, dim=() if dim is None else dim, keepdim=keepdim)),
    }


REDUCTIONS = ["min", "prod", "var", "var_unbiased", "std", "std_unbiased", "norm2", "norm1",
              "norm3", "norm_inf", "sum", "mean", "max"]
AXES = [(None, False), (0, False), (-1, True), ((0, 2), False), ((1,), True)]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("axis", AXES, ids=str)
@pytest.mark.parametrize("name", REDUCTIONS)
def test_reduction_matches_torch(torch, backend, axis, name):
    js_fn, torch_fn = _reduction_cases(torch)[name]
    dim, keepdim = axis
    check_against_torch(torch, lambda x: js_fn(x, axis=dim, keepdims=keepdim),
                        lambda x: torch_fn(x, dim, keepdim), uniform_values(4, (2, 3, 4)), backend)


# An unbiased std over one element warns in both frameworks, as it should; values are compared.
@pytest.mark.filterwarnings("ignore:std\\(\\). degrees of freedom is <= 0:UserWarning")
@settings(HYPOTHESIS)
@given(shape=hnp.array_shapes(min_dims=1, max_dims=3, max_side=4), data=st.data(),
       # spelled dim=, max and min are PyTorch's (values, indices): test_torch_names.py
       name=st.sampled_from([r for r in REDUCTIONS if r not in ("max", "min")]))
def test_reduction_any_shape_and_axis_matches_torch(torch, shape, data, name):
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    keepdim = data.draw(st.booleans())
    js_fn, torch_fn = _reduction_cases(torch)[name]
    check_against_torch(torch, lambda x: js_fn(x, dim=axis, keepdim=keepdim),
                        lambda x: torch_fn(x, axis, keepdim), uniform_values(0, shape), "numpy")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("zeros", [[(0, 1)], [(0, 1), (1, 2)], [(0, 1), (0, 3)],
                                   [(0, 0), (0, 1), (0, 3)]], ids=str)
def test_prod_gradient_with_zeros_matches_torch(torch, backend, zeros):
    values = uniform_values(5, (2, 4))[0]
    for index in zeros:
        values[index] = 0.0
    check_against_torch(torch, lambda x: x.prod(axis=1), lambda x: x.prod(1), [values], backend)
    check_against_torch(torch, js.prod, torch.prod, [values], backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_min_and_inf_norm_ties_share_the_gradient(torch, backend):
    values = [[1.0, -3.0, 3.0], [2.0, 2.0, 5.0]]
    check_against_torch(torch, lambda x: x.min(axis=1), lambda x: x.amin(1), [values], backend)
    check_against_torch(torch, lambda x: js.vector_norm(x, np.inf, axis=1),
                        lambda x: torch.linalg.vector_norm(x, np.inf, 1), [values], backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_norm_at_zero_has_zero_subgradient(torch, backend):
    x = tensor_of([[0.0, 0.0], [3.0, 4.0]], backend)
    (g,) = js.grad(js.vector_norm(x, axis=1).sum(), x)
    tx = torch.zeros(2, 2, dtype=torch.float64)
    tx[1] = torch.tensor([3.0, 4.0])
    tx.requires_grad_()
    (tg,) = torch.autograd.grad(torch.linalg.vector_norm(tx, dim=1).sum(), tx)
    close(g, tg.numpy(), backend, "subgradient at 0")
    assert arr(g)[0].tolist() == [0.0, 0.0]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_cumsum_matches_torch(torch, backend, axis):
    check_against_torch(torch, lambda x: js.cumsum(x, axis) * x, lambda x: x.cumsum(axis) * x,
                        uniform_values(6, (3, 4)), backend)
    check_against_torch(torch, lambda x: x.cumsum(dim=axis), lambda x: x.cumsum(axis),
                        uniform_values(6, (3, 4)), backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("axis", [None, 0, 1])
@pytest.mark.parametrize("keepdims", [False, True])
def test_argmax_and_argmin_match_torch(torch, backend, axis, keepdims):
    values = uniform_values(7, (3, 4))[0]
    x = tensor_of(values, backend)
    for ours, theirs in ((js.argmax, torch.argmax), (js.argmin, torch.argmin)):
        y = ours(x, axis=axis, keepdims=keepdims)
        expected = theirs(torch.tensor(values), dim=axis, keepdim=keepdims)
        assert y.shape == tuple(expected.shape)
        assert arr(y).tolist() == expected.tolist()
        assert y.dtype.kind == "i" and not y.requires_grad
    assert arr(x.argmax(dim=1)).tolist() == np.argmax(values, axis=1).tolist()


@pytest.mark.parametrize("backend", BACKENDS)
def test_dim_and_keepdim_spell_axis_and_keepdims(backend):
    x = tensor_of(uniform_values(8, (2, 3))[0], backend)
    for method in ("sum", "mean", "max", "min", "prod", "var", "std", "norm"):
        ours = getattr(x, method)(dim=1, keepdim=True)
        if method in ("max", "min"):  # PyTorch's (values, indices)
            ours = ours.values
        assert arr(ours).tolist() == arr(getattr(x, method)(axis=1, keepdims=True)).tolist()
        assert ours.shape == (2, 1)
    with pytest.raises(TypeError, match="both axis= and its alias dim="):
        js.sum(x, axis=0, dim=1)


BAD_AXIS_CALLS = {
    **{name: (lambda op: lambda x: op(x, axis=5))(getattr(js, name))
       for name in ("sum", "mean", "max", "min", "prod", "var", "std", "vector_norm", "cumsum",
                    "argmax", "argmin", "flip", "squeeze", "expand_dims")},
    "split": lambda x: js.split(x, 1, dim=5),
    "take_along_axis": lambda x: js.take_along_axis(x, np.zeros((2, 1), np.int32), axis=5),
    "flatten": lambda x: js.flatten(x, 5),
    "concat": lambda x: js.concat([x, x], axis=5),
    "stack": lambda x: js.stack([x, x], axis=5),
    "method": lambda x: x.sum(dim=-3),
}


@pytest.mark.parametrize("name", sorted(BAD_AXIS_CALLS))
def test_bad_axis_names_the_op_the_axis_and_the_shape(name):
    x = js.tensor(np.ones((2, 3)))
    with pytest.raises(IndexError) as excinfo:
        BAD_AXIS_CALLS[name](x)
    text = error_text(excinfo)
    assert "Dimension out of range" in text and "(2, 3)" in text
    assert "got 5" in text or "got -3" in text
    assert text.startswith(name) or name == "method"


def test_repeated_reduction_axes_are_an_error():
    with pytest.raises(ValueError, match="appears multiple times"):
        js.sum(js.tensor(np.ones((2, 3))), axis=(0, -2))


def test_vector_norm_takes_an_order_below_one_as_torch():
    """Any real ord, as PyTorch's (each diff-tested in test_nonzero_and_norm_orders.py)."""
    assert js.vector_norm(js.tensor([1.0, 4.0]), ord=0.5).item() == pytest.approx(9.0)




@pytest.mark.oracle
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", ["var", "std"])
def test_no_degrees_of_freedom_warns_once_as_torch(torch, backend, name):
    """A correction that leaves no degrees of freedom gives torch's NaN and inf with torch's
    one warning, and no floating-point warnings from the kernels, forward or backward."""
    values = [[1.0, 2.0, 4.0], [3.0, 3.0, 3.0]]
    x = tensor_of(values, backend)
    x_t = torch.tensor(values, requires_grad=True)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        y = getattr(js, name)(x, axis=1, correction=3)
        (g,) = js.grad(y.sum(), x, create_graph=True)
        js.grad(g.sum(), x)
    assert [type(w.message) for w in caught] == [UserWarning]
    assert f"{name}(): degrees of freedom is <= 0" in str(caught[0].message)
    assert "(2, 3)" in str(caught[0].message)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = getattr(torch, name)(x_t, 1, correction=3)
    np.testing.assert_array_equal(arr(y), expected.detach().numpy())
    assert np.isnan(arr(g)).any()


@pytest.mark.parametrize("backend", BACKENDS)
def test_prod_and_norms_at_zero_raise_no_floating_point_warnings(backend):
    x = tensor_of([[0.0, 2.0, 0.0], [0.0, 0.0, 0.0]], backend)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for reduce in (lambda t: t.prod(axis=1), lambda t: js.vector_norm(t, 3, axis=1),
                       lambda t: js.vector_norm(t, axis=1), lambda t: js.std(t, axis=1)):
            (g,) = js.grad(reduce(x).sum(), x, create_graph=True)
            js.grad(g.sum(), x)
