"""The op surface a researcher types: values, first and second gradients against torch,
on both backends; the PyTorch spellings; the error paths; the result dtypes."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import BACKENDS, arr, error_text
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from ops_oracle import check_against_torch, tensor_of, uniform_values

import jaxstream as js

pytestmark = pytest.mark.oracle

HYPOTHESIS = settings(max_examples=15, deadline=None)


# ------------------------------------------------------------------ elementwise
def _unary_cases(torch):
    F = torch.nn.functional
    return {
        "square": (js.square, torch.square),
        "log1p": (js.log1p, torch.log1p),
        "expm1": (js.expm1, torch.expm1),
        "erf": (js.erf, torch.erf),
        "gelu": (js.gelu, F.gelu),
        "gelu_tanh": (lambda x: js.gelu(x, approximate="tanh"),
                      lambda x: F.gelu(x, approximate="tanh")),
        "silu": (js.silu, F.silu),
        "leaky_relu": (lambda x: js.leaky_relu(x, 0.2), lambda x: F.leaky_relu(x, 0.2)),
        "clip": (lambda x: js.clip(x, -0.5, 0.7), lambda x: torch.clamp(x, -0.5, 0.7)),
        "clamp_min": (lambda x: x.clamp(min=0.3), lambda x: x.clamp(min=0.3)),
        "clip_max": (lambda x: js.clamp(x, max=-0.2), lambda x: x.clamp(max=-0.2)),
        "remainder_scalar": (lambda x: x % 0.7, lambda x: x % 0.7),
        "rremainder": (lambda x: 1.3 % (x + 3.0),
                       lambda x: torch.remainder(torch.full_like(x, 1.3), x + 3.0)),
    }


UNARY = ["square", "log1p", "expm1", "erf", "gelu", "gelu_tanh", "silu", "leaky_relu", "clip",
         "clamp_min", "clip_max", "remainder_scalar", "rremainder"]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", UNARY)
def test_elementwise_matches_torch(torch, backend, name):
    js_fn, torch_fn = _unary_cases(torch)[name]
    low = -0.9 if name == "log1p" else -3.0
    values = uniform_values(1, (3, 4), low=low, high=3.0)
    check_against_torch(torch, js_fn, torch_fn, values, backend)


@settings(HYPOTHESIS)
@given(shape=hnp.array_shapes(min_dims=0, max_dims=3, max_side=4),
       name=st.sampled_from(UNARY), seed=st.integers(0, 2**16))
def test_elementwise_any_shape_matches_torch(torch, shape, name, seed):
    js_fn, torch_fn = _unary_cases(torch)[name]
    low = -0.9 if name == "log1p" else -3.0
    values = uniform_values(seed, shape, low=low, high=3.0)
    check_against_torch(torch, js_fn, torch_fn, values, "numpy")


def _binary_cases(torch):
    return {
        "maximum": (js.maximum, torch.maximum),
        "minimum": (js.minimum, torch.minimum),
        "remainder": (lambda a, b: a % (b.abs() + 0.5), lambda a, b: a % (b.abs() + 0.5)),
        "remainder_fn": (lambda a, b: js.remainder(a, b.abs() + 0.5),
                         lambda a, b: torch.remainder(a, b.abs() + 0.5)),
    }


BROADCASTING = [((3, 4), (3, 4)), ((2, 3), (3,)), ((4, 1), (1, 5)), ((), (2, 2))]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("shapes", BROADCASTING, ids=str)
@pytest.mark.parametrize("name", ["maximum", "minimum", "remainder", "remainder_fn"])
def test_binary_matches_torch_with_broadcasting(torch, backend, shapes, name):
    js_fn, torch_fn = _binary_cases(torch)[name]
    check_against_torch(torch, js_fn, torch_fn, uniform_values(2, *shapes), backend)


@settings(HYPOTHESIS)
@given(shapes=hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=3, max_side=3),
       name=st.sampled_from(["maximum", "minimum", "remainder"]), seed=st.integers(0, 2**16))
def test_binary_any_broadcast_matches_torch(torch, shapes, name, seed):
    js_fn, torch_fn = _binary_cases(torch)[name]
    check_against_torch(torch, js_fn, torch_fn, uniform_values(seed, *shapes.input_shapes), "numpy")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", ["maximum", "minimum"])
def test_ties_share_the_gradient_of_maximum_and_minimum(torch, backend, name):
    a, b = [1.0, 2.0, 3.0], [1.0, 0.0, 3.0]
    js_fn, torch_fn = _binary_cases(torch)[name]
    check_against_torch(torch, js_fn, torch_fn, [a, b], backend)
    x, y = tensor_of(a, backend), tensor_of(b, backend)
    gx, gy = js.grad(js_fn(x, y).sum(), [x, y])
    assert arr(gx)[0] == arr(gy)[0] == 0.5


@pytest.mark.parametrize("backend", BACKENDS)
def test_clip_passes_the_gradient_at_its_bounds(torch, backend):
    values = [-1.0, -0.5, 0.0, 0.7, 2.0]
    check_against_torch(torch, lambda x: x.clip(-0.5, 0.7), lambda x: x.clamp(-0.5, 0.7),
                        [values], backend)
    x = tensor_of(values, backend)
    (g,) = js.grad(js.clip(x, -0.5, 0.7).sum(), x)
    assert arr(g).tolist() == [0.0, 1.0, 1.0, 1.0, 0.0]


@pytest.mark.parametrize("backend", BACKENDS)
def test_clip_with_tensor_bounds_matches_torch(torch, backend):
    check_against_torch(torch, lambda x, lo: js.clip(x, lo), lambda x, lo: x.clamp(min=lo),
                        uniform_values(3, (3, 4), (4,)), backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_floor_divide_matches_python_and_is_not_differentiable(torch, backend):
    a, b = np.array([7.0, -7.0, 7.5, -0.5]), np.array([2.0, 2.0, -2.0, 0.3])
    x = tensor_of(a, backend)
    for y in (x // tensor_of(b, backend, False), js.floor_divide(x, tensor_of(b, backend, False))):
        assert arr(y).tolist() == (torch.tensor(a) // torch.tensor(b)).tolist()
        assert y.grad_fn is None and not y.requires_grad
    assert arr(7.0 // tensor_of([2.0], backend)).tolist() == [3.0]


def test_gelu_exact_matches_torch_to_float64_precision(torch):
    x = np.linspace(-9.0, 9.0, 2001)
    expected = torch.nn.functional.gelu(torch.tensor(x)).numpy()
    np.testing.assert_allclose(arr(js.gelu(js.tensor(x))), expected, rtol=1e-13, atol=1e-15)
    x32 = np.linspace(-9.0, 9.0, 2001, dtype=np.float32)
    expected32 = torch.nn.functional.gelu(torch.tensor(x32)).numpy()
    for backend in BACKENDS:
        got = js.gelu(js.tensor(x32, backend=backend))
        assert got.dtype == np.float32
        np.testing.assert_allclose(arr(got), expected32, rtol=1e-5, atol=1e-6)


def test_gelu_rejects_an_unknown_approximation():
    with pytest.raises(ValueError, match="approximate argument must be either none or tanh"):
        js.gelu(js.tensor([1.0]), approximate="fast")


# ------------------------------------------------------------------ shapes
def _shape_cases(torch):
    index = np.array([[0, 2, 1, 1], [3, 0, 0, 2], [1, 1, 3, 0]])
    return {
        "squeeze": (lambda x: x.reshape(3, 1, 4).squeeze(1),
                    lambda x: x.reshape(3, 1, 4).squeeze(1)),
        "squeeze_all": (lambda x: js.squeeze(x.reshape(1, 3, 1, 4)),
                        lambda x: x.reshape(1, 3, 1, 4).squeeze()),
        "unsqueeze": (lambda x: x.unsqueeze(-1) * x.unsqueeze(1),
                      lambda x: x.unsqueeze(-1) * x.unsqueeze(1)),
        "expand_dims": (lambda x: js.expand_dims(x, 0), lambda x: x.unsqueeze(0)),
        "flatten": (lambda x: js.flatten(x.reshape(3, 2, 2), 1),
                    lambda x: x.reshape(3, 2, 2).flatten(1)),
        "flatten_all": (lambda x: x.flatten() * x.flatten(), lambda x: x.flatten() * x.flatten()),
        "permute": (lambda x: x.reshape(3, 2, 2).permute(2, 0, 1) ** 2,
                    lambda x: x.reshape(3, 2, 2).permute(2, 0, 1) ** 2),
        "permute_dims": (lambda x: js.permute_dims(x, (1, 0)), lambda x: x.permute(1, 0)),
        "flip": (lambda x: js.flip(x, 0) * x, lambda x: x.flip(0) * x),
        "flip_all": (lambda x: x.flip() * x, lambda x: x.flip((0, 1)) * x),
        "view": (lambda x: x.view(2, 6) * x.view((2, 6)), lambda x: x.view(2, 6) * x.view(2, 6)),
        "take_along_axis": (lambda x: js.take_along_axis(x, index, 1) ** 2,
                            lambda x: torch.take_along_dim(x, torch.tensor(index), 1) ** 2),
        "take_along_axis_0": (lambda x: js.take_along_axis(x, index[:2, :3] % 3, axis=0) ** 2,
                              lambda x: torch.gather(x, 0, torch.tensor(index[:2, :3] % 3)) ** 2),
        "split_sections": (lambda x: js.split(x, 2, dim=1)[1] ** 2,
                           lambda x: x.split(2, 1)[1] ** 2),
        "split_sizes": (lambda x: js.cat(x.split([1, 2], 0)[::-1], dim=0) ** 2,
                        lambda x: torch.cat(x.split([1, 2], 0)[::-1], 0) ** 2),
        "concat": (lambda x: js.concat([x, x * x], axis=1), lambda x: torch.cat([x, x * x], 1)),
    }


SHAPE_OPS = ["squeeze", "squeeze_all", "unsqueeze", "expand_dims", "flatten", "flatten_all",
             "permute", "permute_dims", "flip", "flip_all", "view", "take_along_axis",
             "take_along_axis_0", "split_sections", "split_sizes", "concat"]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", SHAPE_OPS)
def test_shape_op_matches_torch(torch, backend, name):
    js_fn, torch_fn = _shape_cases(torch)[name]
    check_against_torch(torch, js_fn, torch_fn, uniform_values(9, (3, 4)), backend)


EINSUMS = [
    ("ij,jk->ik", [(2, 3), (3, 4)]),
    ("ij,kj", [(2, 3), (4, 3)]),
    ("bij,bjk->bik", [(2, 2, 3), (2, 3, 2)]),
    ("ij->j", [(3, 4)]),
    ("ii->i", [(3, 3)]),
    ("ii", [(3, 3)]),
    ("i,j->ij", [(3,), (2,)]),
    ("ij,ij,j->i", [(2, 3), (2, 3), (3,)]),
    ("ij,jk,kl->il", [(2, 3), (3, 2), (2, 2)]),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("subscripts,shapes", EINSUMS, ids=[e[0] for e in EINSUMS])
def test_einsum_matches_torch_to_second_order(torch, backend, subscripts, shapes):
    check_against_torch(
        torch,
        lambda *xs: js.einsum(subscripts, *xs) ** 2,
        lambda *xs: torch.einsum(subscripts, *xs) ** 2,
        uniform_values(10, *shapes),
        backend,
    )


@pytest.mark.parametrize("subscripts,shapes,phrase", [
    ("ij,jk->ik", [(2, 3), (4, 5)], "subscript j has size 4"),
    ("ij->ik", [(2, 3)], "output subscript k does not appear"),
    ("ij->ii", [(2, 2)], "appears more than once"),
    ("ijk->i", [(2, 3)], "does not match the number of dimensions"),
    ("ij,jk->ik", [(2, 3)], "names 2 operands but 1 were given"),
    ("...i->i", [(2, 3)], "'...' is not supported"),
    ("i1->i", [(2, 3)], "must be letters"),
])
def test_bad_einsum_subscripts_raise(subscripts, shapes, phrase):
    operands = [js.tensor(np.ones(s)) for s in shapes]
    with pytest.raises(ValueError, match="einsum") as excinfo:
        js.einsum(subscripts, *operands)
    assert phrase in error_text(excinfo) and str(shapes[0]) in error_text(excinfo)


def test_split_returns_views_of_the_input_in_a_tuple():
    x = js.tensor(np.arange(12.0).reshape(3, 4), requires_grad=True)
    pieces = js.split(x, [1, 3], dim=1)
    assert isinstance(pieces, tuple) and [p.shape for p in pieces] == [(3, 1), (3, 3)]
    assert arr(pieces[1]).tolist() == np.arange(12.0).reshape(3, 4)[:, 1:].tolist()
    assert all(p.grad_fn.op.view for p in pieces)


@pytest.mark.parametrize("sizes,phrase", [
    ([1, 2], "split_sizes to sum exactly to 4"),
    ([3, 3], "split_sizes to sum exactly to 4"),
    (0, "split_size can only be 0 if dimension size is 0"),
])
def test_split_sizes_that_do_not_fit_raise(sizes, phrase):
    with pytest.raises(ValueError, match=phrase):
        js.split(js.tensor(np.ones((2, 4))), sizes, dim=1)


def test_shape_errors_name_the_shape():
    x = js.tensor(np.ones((2, 3)))
    with pytest.raises(ValueError, match=r"axis 1 of a tensor of shape \(2, 3\) has length 3"):
        js.squeeze(x, axis=1)  # the array API's squeeze; PyTorch's squeeze(x, 1) leaves it
    with pytest.raises(IndexError, match="take_along_axis: indices must be an integer tensor"):
        js.take_along_axis(x, np.zeros((2, 1)), 1)
    with pytest.raises(RuntimeError, match="start_dim cannot come after end_dim"):
        js.flatten(x, 1, 0)
    with pytest.raises(RuntimeError, match="not a permutation"):
        x.permute(0, 0)
    with pytest.raises(ValueError, match="At least one of 'min' or 'max' must not be None"):
        js.clip(x)


def test_view_flags_of_the_shape_ops():
    x = js.tensor(np.ones((2, 1, 3)), requires_grad=True)
    views = [x.squeeze(1), x.unsqueeze(0), x.flatten(), x.permute(2, 0, 1), x.view(6)]
    assert all(v.grad_fn.op.view for v in views)
    assert not js.flip(x, 0).grad_fn.op.view


# ------------------------------------------------------------------ node names
def test_node_names_are_pytorchs(torch):
    x, w, b = (js.tensor(np.ones(s), requires_grad=True) for s in ((2, 3), (4, 3), (4,)))
    tx, tw, tb = (torch.ones(s, requires_grad=True) for s in ((2, 3), (4, 3), (4,)))
    x3, tx3 = js.tensor(np.ones((5, 2, 3)), requires_grad=True), torch.ones(5, 2, 3,
                                                                          requires_grad=True)
    F = torch.nn.functional
    pairs = [
        (js.linear(x, w, b), F.linear(tx, tw, tb)),
        (js.linear(x, w), F.linear(tx, tw)),
        (js.linear(x3, w, b), F.linear(tx3, tw, tb)),
        (js.linear(x3, w), F.linear(tx3, tw)),
        (js.linear(x[0], w, b), F.linear(tx[0], tw, tb)),
        (js.linear(x[0], w), F.linear(tx[0], tw)),
        (js.square(x), tx.square()),
        (js.clip(x, 0.0), tx.clamp(0.0)),
        (js.prod(x, 1), tx.prod(1)),
        (js.prod(x), tx.prod()),
        (js.min(x), tx.min()),
        (js.min(x, axis=1), tx.amin(1)),
        (x.max(1).values, tx.max(1).values),
        (x % 2.0, tx % 2.0),
        (x % x, tx % tx),
        (js.vector_norm(x), torch.linalg.vector_norm(tx)),
        (x.unsqueeze(0).squeeze(0), tx.unsqueeze(0).squeeze(0)),
        (x.unsqueeze(0).squeeze(), tx.unsqueeze(0).squeeze()),
        (js.take_along_axis(x, np.zeros((2, 1), dtype=np.int64), 1),
         torch.take_along_dim(tx, torch.zeros(2, 1, dtype=torch.long), 1)),
    ]
    for ours, theirs in pairs:
        assert ours.grad_fn.name() == theirs.grad_fn.name()


