"""index_add, index_copy, index_fill, scatter (and its deprecated reduce=), scatter_reduce,
index_put and masked_scatter against torch: values, dtypes, node names, first and second
gradients on both backends, the in-place forms (through views too) and PyTorch's errors.
Indices repeat only where the op adds them up (elsewhere PyTorch's result is undefined)."""

from __future__ import annotations

import contextlib
import warnings

import numpy as np
import pytest
from helpers import BACKENDS, arr, error_text
from hypothesis import given, settings
from hypothesis import strategies as st
from ops_oracle import check_against_torch, pair, same_structure, uniform_values

import jaxstream as js

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.oracle

HYPOTHESIS = settings(max_examples=15, deadline=None, derandomize=True, database=None)

SCATTER = np.array([[0, 1, 2, 0], [1, 2, 0, 1]])  # repeats along 0 of a (3, 4)
UNIQUE = np.array([[0, 3], [2, 1]])  # no repeats along 1 of a (2, 4)


def _index(m, values, like):
    return js.tensor(values, backend=like.backend) if m is js else m.tensor(values)


# name -> (call(m, *inputs) for m in (js, torch), input shapes)
CASES = {
    "index_add": (lambda m, x, s: m.index_add(x, 0, _index(m, [2, 0, 2], x), s, alpha=2) ** 2,
                  [(3, 4), (3, 4)]),
    "index_add_neg_dim": (lambda m, x, s: x.index_add(-1, _index(m, [1, 1], x), s) * x,
                          [(3, 2), (3, 2)]),
    "index_copy": (lambda m, x, s: m.index_copy(x, 1, _index(m, [3, 0], x), s) ** 2,
                   [(2, 4), (2, 2)]),
    "index_fill": (lambda m, x: x.index_fill(-1, _index(m, [1, 1, 3], x), 2.5) * x,
                   [(2, 4)]),
    "index_fill_tensor": (lambda m, x, v: m.index_fill(x, 0, _index(m, [0, 0], x), v[0]) ** 2,
                          [(2, 3), (1,)]),
    "scatter": (lambda m, x, s: m.scatter(x, 1, _index(m, UNIQUE, x), s) ** 2,
                [(2, 4), (2, 2)]),
    "scatter_value": (lambda m, x: x.scatter(-1, _index(m, UNIQUE, x), 1.5) * x, [(2, 4)]),
    "index_put": (lambda m, x, v: m.index_put(x, (_index(m, [2, -3], x),), v) ** 2,
                  [(3, 4), (4,)]),
    "index_put_accumulate": (lambda m, x, v: x.index_put(
        (_index(m, [1, 1, -1], x), _index(m, [0, 0, 2], x)), v, accumulate=True) ** 2,
        [(3, 4), (3,)]),
    "masked_scatter": (lambda m, x, s: m.masked_scatter(x, _index(m, MASK, x), s) ** 2,
                       [(2, 3), (2, 4)]),
}
MASK = np.array([[True, False, True], [False, True, True]])
REDUCES = ["sum", "prod", "mean", "amax", "amin"]
for _reduce in REDUCES:
    for _include in (True, False):
        CASES[f"scatter_reduce_{_reduce}_{_include}"] = (
            lambda m, x, s, r=_reduce, i=_include: m.scatter_reduce(
                x, 0, _index(m, SCATTER, x), s, r, include_self=i) * x, [(3, 4), (2, 4)])

# Every case on NumPy, a few on JAX (each compiles its kernels; the other tests run every
# op on JAX again).
JAX_NAMES = ["index_add", "scatter_reduce_amax_False"]


@pytest.mark.parametrize("backend, name", [("numpy", n) for n in CASES]
                         + [("jax", n) for n in JAX_NAMES])
def test_values_and_gradients_match_torch(backend, name):
    call, shapes = CASES[name]
    check_against_torch(torch, lambda *xs: call(js, *xs), lambda *xs: call(torch, *xs),
                        uniform_values(7, *shapes, low=0.5, high=2.0), backend)


def _nodes(m, x, s):
    i = _index(m, [1, 0], x)
    return [m.index_add(x, 0, i, s), x.index_copy(0, i, s), x.index_fill(0, i, 1.0),
            x.index_fill(0, i, s[0, 0]), x.scatter(0, _index(m, [[1, 0]], x), s[:1, :2]),
            x.scatter(0, _index(m, [[1, 0]], x), 2.0), x.index_put((i,), s),
            x.index_put((i,), s, accumulate=True), x.masked_scatter(x > 0, s),
            x.scatter_reduce(0, _index(m, [[1, 1]], x), s[:1, :2], "amax"),
            x.scatter(0, _index(m, [[1, 0]], x), s[:1, :2], reduce="add"),
            x.scatter(0, _index(m, [[1, 0]], x), 2.0, reduce="multiply")]


def test_node_names_are_torchs():
    """On NumPy; the in-place test compares the nodes on JAX too."""
    x, tx = pair(torch, uniform_values(1, (2, 2))[0], "numpy")
    s, ts = pair(torch, uniform_values(2, (2, 2))[0], "numpy")
    with _quiet():
        theirs = [y.grad_fn.name() for y in _nodes(torch, tx, ts)]
    assert [y.grad_fn.name() for y in _nodes(js, x, s)] == theirs


@contextlib.contextmanager
def _quiet():
    """torch's deprecation warning of scatter's `reduce=`, once per process."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "The reduce argument of torch.scatter")
        yield


def test_scatter_with_reduce_has_no_gradient_as_torch():
    x, tx = pair(torch, uniform_values(3, (3, 4))[0], "numpy")
    s, ts = pair(torch, uniform_values(4, (2, 4))[0], "numpy")
    for reduce in ("add", "multiply"):
        with _quiet():
            theirs = tx.scatter(0, torch.tensor(SCATTER), ts, reduce=reduce)
        ours = x.scatter(0, js.tensor(SCATTER), s, reduce=reduce)
        same_structure(ours, theirs, "numpy")
        with pytest.raises(RuntimeError, match="derivative for aten::scatter is not implemented"):
            ours.sum().backward()
    same_structure(x.scatter(1, js.tensor(UNIQUE[:1]), 3.0, reduce="multiply"),
                   tx.scatter(1, torch.tensor(UNIQUE[:1]), 3.0, reduce="multiply"), "numpy")


@pytest.mark.parametrize("include", [True, False])
def test_prod_gradients_with_zero_factors_match_torch(include):
    """A place with one zero factor to any order; with two (whose second gradients differ
    from torch's), values and first gradients."""
    def call(m, x, s):
        return m.scatter_reduce(x, 0, _index(m, SCATTER, x), s, "prod", include_self=include)

    x = np.array([[0.0, 2.0, 3.0, 1.0], [1.5, 1.0, 2.0, 1.0], [2.0, 1.0, 0.5, 3.0]])
    s = np.array([[1.0, 0.0, 2.0, 0.0], [0.0, 3.0, 1.0, 2.0]])
    check_against_torch(torch, lambda *xs: call(js, *xs), lambda *xs: call(torch, *xs),
                        [x, s], "numpy")
    x[1, 1] = x[0, 3] = 0.0
    (jx, tx), (js_, ts) = pair(torch, x, "numpy"), pair(torch, s, "numpy")
    y, ty = call(js, jx, js_), call(torch, tx, ts)
    (y * js.tensor(x)).sum().backward()
    (ty * torch.tensor(x)).sum().backward()
    for a, b in ((y, ty.detach()), (jx.grad, tx.grad), (js_.grad, ts.grad)):
        np.testing.assert_allclose(arr(a), b.numpy())


def test_amax_and_amin_share_the_gradient_among_ties():
    values = np.array([[1.0, 2.0, 3.0], [2.0, 2.0, 0.0]])
    src = np.array([[2.0, 5.0, 3.0], [1.0, 5.0, 3.0], [2.0, 2.0, 0.0]])
    index = np.array([[0, 0, 0], [0, 0, 0], [1, 1, 1]])
    for reduce in ("amax", "amin"):
        for include in (True, False):
            (x, tx), (s, ts) = pair(torch, values, "numpy"), pair(torch, src, "numpy")
            y = x.scatter_reduce(0, js.tensor(index), s, reduce, include_self=include)
            ty = tx.scatter_reduce(0, torch.tensor(index), ts, reduce, include_self=include)
            (y * js.tensor(values)).sum().backward()
            (ty * torch.tensor(values)).sum().backward()
            for ours, theirs in ((y, ty.detach()), (x.grad, tx.grad), (s.grad, ts.grad)):
                np.testing.assert_allclose(arr(ours), theirs.numpy())


@pytest.mark.parametrize("backend", BACKENDS)
def test_integer_tensors_keep_torchs_dtypes(backend):
    x, s = np.array([[7, 8, 9], [1, 2, 3]], np.int32), np.array([[2, 3, 4, 5]], np.int32)
    index = np.array([[0, 0, 1, 1]])
    ours, theirs = js.tensor(x, backend=backend), torch.tensor(x)
    src, tsrc = js.tensor(s, backend=backend), torch.tensor(s)
    i, ti = js.tensor(index, backend=backend), torch.tensor(index)
    for reduce in REDUCES:
        same_structure(ours.scatter_reduce(1, i, src, reduce, include_self=False),
                       theirs.scatter_reduce(1, ti, tsrc, reduce, include_self=False), backend)
    same_structure(ours.index_add(0, i[0, :1], src[:, :3], alpha=3),
                   theirs.index_add(0, ti[0, :1], tsrc[:, :3], alpha=3), backend)
    same_structure(ours.index_fill(1, i[0], 5), theirs.index_fill(1, ti[0], 5), backend)
    same_structure(ours.masked_scatter(ours > 2, src), theirs.masked_scatter(theirs > 2, tsrc),
                   backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_in_place_forms_match_torch(backend):
    x, tx = pair(torch, uniform_values(5, (3, 4))[0], backend)
    s, ts = pair(torch, uniform_values(6, (2, 4))[0], backend)
    calls = [lambda m, y, s: y.index_add_(0, _index(m, [2, 2], x), s, alpha=0.5),
             lambda m, y, s: y.index_copy_(0, _index(m, [2, 0], x), s),
             lambda m, y, s: y.index_fill_(1, _index(m, [3], x), -1.0),
             lambda m, y, s: y.scatter_(0, _index(m, SCATTER[:1], x), s[:1]),
             lambda m, y, s: y.scatter_reduce_(0, _index(m, SCATTER, x), s, "mean"),
             lambda m, y, s: y.index_put_((_index(m, [0, 0], x),), s, accumulate=True),
             lambda m, y, s: y.masked_scatter_(y > 0, s)]
    for call in calls:
        y, ty = x * 2.0, tx * 2.0
        assert call(js, y, s) is y
        call(torch, ty, ts)
        assert y.grad_fn.name() == ty.grad_fn.name()
        same_structure(y, ty, backend)


def test_in_place_through_a_view_writes_the_base_and_refuses_a_leaf():
    x, tx = pair(torch, uniform_values(8, (3, 4))[0], "numpy")
    s, ts = pair(torch, uniform_values(9, (3, 2))[0], "numpy")
    y, ty = x * 1.0, tx * 1.0
    y[:, 1:3].index_add_(0, js.tensor([0, 2, 0]), s)
    ty[:, 1:3].index_add_(0, torch.tensor([0, 2, 0]), ts)
    (y * y).sum().backward()
    (ty * ty).sum().backward()
    for ours, theirs in ((y, ty.detach()), (x.grad, tx.grad), (s.grad, ts.grad)):
        np.testing.assert_allclose(arr(ours), theirs.numpy())
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
        x.index_fill_(0, js.tensor([0]), 1.0)
    with pytest.raises(RuntimeError, match="a view of a leaf Variable"):
        x[0].scatter_(0, js.tensor([1]), 2.0)


@HYPOTHESIS
@given(st.data())
def test_index_add_and_scatter_reduce_of_any_shape_match_torch(data):
    shape = data.draw(st.lists(st.integers(1, 3), min_size=1, max_size=3), label="shape")
    dim = data.draw(st.integers(-len(shape), len(shape) - 1), label="dim")
    count = data.draw(st.integers(0, 4), label="count")
    rng = np.random.default_rng(count + 10 * len(shape))
    x = rng.standard_normal(shape)
    picks = rng.integers(0, shape[dim], size=count)
    src = rng.standard_normal([count if d == dim % len(shape) else n for d, n in enumerate(shape)])
    reduce = data.draw(st.sampled_from(REDUCES), label="reduce")
    index = np.broadcast_to(picks.reshape([-1 if d == dim % len(shape) else 1 for d in
                                           range(len(shape))]), src.shape)
    ours, theirs = ((m.index_add(wrap(x), dim, wrap(picks), wrap(src), alpha=2),
                     m.scatter_reduce(wrap(x), dim, wrap(index.copy()), wrap(src), reduce))
                    for m, wrap in ((js, js.tensor), (torch, torch.tensor)))
    for a, b in zip(ours, theirs, strict=True):
        same_structure(a, b, "numpy")


X = np.ones((3, 4))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("call, error, phrases", [
    (lambda x, i: x.index_add(0, i([5, 0]), x[:2]), RuntimeError,
     ["index 5 is out of bounds for dimension 0 with size 3"]),
    (lambda x, i: x.index_add(0, i([[1, 0]]), x[:2]), IndexError,
     ["Index is supposed to be a vector"]),
    (lambda x, i: x.index_add(0, i([1, 0]), x[:1]), RuntimeError,
     ["Number of indices (2) should be equal to source.size(dim)"]),
    (lambda x, i: x.index_add(0, i([1, 0]), x[:2].int()), RuntimeError,
     ["must have the same scalar type"]),
    (lambda x, i: x.index_add(0, i([0.0]), x[:1]), RuntimeError, ["Expected dtype int64"]),
    (lambda x, i: x.index_copy(0, i([-1, 0]), x[:2]), IndexError,
     ["index -1 is out of bounds for dimension 0 with size 3"]),
    (lambda x, i: x.index_fill(0, i([3]), 1.0), IndexError, ["index 3 is out of bounds"]),
    (lambda x, i: x.index_fill(0, i([1]), x[0]), RuntimeError,
     ["only supports a 0-dimensional value tensor"]),
    (lambda x, i: x.scatter(0, i([[3, 0]]), x[:1]), RuntimeError,
     ["index 3 is out of bounds for dimension 0 with size 3"]),
    (lambda x, i: x.scatter(0, i([0, 1]), x[:1]), RuntimeError,
     ["Index tensor must have the same number of dimensions as self"]),
    (lambda x, i: x.scatter(0, i([[0, 1]]), x[:1].int()), RuntimeError,
     ["Expected self.dtype to be equal to src.dtype"]),
    (lambda x, i: x.scatter(0, i([[0, 1]]), x[:1], reduce="sum"), RuntimeError,
     ["reduce argument must be either add or multiply"]),
    (lambda x, i: x.scatter_reduce(0, i([[0, 1]]), x[:1], "maximum"), RuntimeError,
     ["reduce argument must be either sum, prod, mean, amax or amin, got maximum"]),
    (lambda x, i: x.index_put((i([5, 0]),), x[0]), IndexError,
     ["index 5 is out of bounds"]),
    (lambda x, i: x.index_put((i([1, 0]),), x[0].int()), RuntimeError,
     ["Index put requires the source and destination dtypes match"]),
    (lambda x, i: x.index_put((i([1, 0]),), x[:, :2]), RuntimeError,
     ["The expanded size of the tensor must match"]),
    (lambda x, i: x.masked_scatter(x > 0, x[:1]), RuntimeError,
     ["Number of elements of source < number of ones in mask"]),
    (lambda x, i: x.masked_scatter(x, x), RuntimeError, ["only supports boolean masks"]),
], ids=["add_bounds", "add_ndim", "add_count", "add_dtype", "add_float_index", "copy_bounds",
        "fill_bounds", "fill_value_ndim", "scatter_bounds", "scatter_ndim", "scatter_dtype",
        "scatter_reduce_name", "scatter_reduce_bad", "put_bounds", "put_dtype", "put_shape",
        "masked_small_source", "masked_float_mask"])
def test_bad_arguments_raise_torchs_errors(backend, call, error, phrases):
    with pytest.raises(error):
        call(torch.ones(3, 4), torch.tensor)
    with pytest.raises(error) as excinfo:
        call(js.tensor(X, dtype="float32", backend=backend),
             lambda v: js.tensor(v, backend=backend))
    for phrase in phrases:
        assert phrase in error_text(excinfo)
