"""Statistics and counting reductions against torch: median, nanmedian, kthvalue, mode,
quantile, nanquantile, nansum, nanmean, count_nonzero, cummax/cummin, aminmax, diff,
bincount, unique and unique_consecutive: values, dtypes, named tuples, indices, gradients
and node names on both backends, with NaNs and ties, and torch's errors."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import arr
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from ops_oracle import check_against_torch, close, pair, same_structure, tensor_of

import jaxstream as js

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.oracle

HYPOTHESIS = settings(max_examples=15, deadline=None, derandomize=True, database=None)
NAN = float("nan")
HOST = ["numpy"]
"""Most cases run on NumPy; `test_jax_backend` runs a sample on JAX, where each new op and
shape compiles (and most of a case's time would go to that)."""
# ties in each row (median picks index 2 of row 0, as torch does), a NaN in row 1
TIED = [[1.0, 2.0, 2.0, 3.0, 2.0], [5.0, NAN, 0.0, 1.0, 1.0], [4.0, 0.0, 4.0, 0.0, 7.0]]

DISTINCT = [[0.3, -1.2, 2.5, 0.7], [1.1, 0.4, -0.6, 2.2], [-2.0, 0.9, 1.8, -0.1]]


def _backward_both(ours, theirs, x, t, w):
    """Gradients of `sum(values * w)` of our and torch's results."""
    (ours * tensor_of(w, x.backend, False)).sum().backward()
    (theirs * torch.tensor(np.asarray(w, dtype=np.float64))).sum().backward()
    close(x.grad, t.grad.numpy(), x.backend, "gradient")


SELECTIONS = {
    "median": (lambda x: x.median(1), lambda t: t.median(1), "MedianBackward1"),
    "median_keepdim": (lambda x: js.median(x, 0, keepdim=True),
                       lambda t: torch.median(t, 0, keepdim=True), "MedianBackward1"),
    "nanmedian": (lambda x: x.nanmedian(1), lambda t: t.nanmedian(1), "NanmedianBackward1"),
    "mode": (lambda x: x.mode(), lambda t: t.mode(), "ModeBackward0"),
    "mode_keepdim": (lambda x: js.mode(x, 0, True), lambda t: torch.mode(t, 0, True),
                     "ModeBackward0"),
    "cummax": (lambda x: x.cummax(1), lambda t: t.cummax(1), "CummaxBackward0"),
    "cummin": (lambda x: js.cummin(x, 0), lambda t: torch.cummin(t, 0), "CumminBackward0"),
    "kthvalue": (lambda x: x.kthvalue(3, 0), lambda t: t.kthvalue(3, 0), "KthvalueBackward0"),
}


@pytest.mark.parametrize("backend", HOST)
@pytest.mark.parametrize("name", sorted(SELECTIONS))
def test_selections_match_torch_with_ties_and_nans(name, backend):
    ours_fn, theirs_fn, node = SELECTIONS[name]
    values = TIED if name != "mode" else [[1.0, 2.0, 2.0, 1.0, 3.0], [0.0, 4.0, 4.0, 0.0, 4.0]]
    x, t = pair(torch, values, backend)
    ours, theirs = ours_fn(x), theirs_fn(t)
    same_structure(ours, theirs, backend)
    assert str(ours.indices.dtype) == ("int64" if backend == "numpy" else "int32")
    assert ours.values.grad_fn.name() == node == theirs.values.grad_fn.name()
    w = np.random.default_rng(0).standard_normal(theirs.values.shape)
    _backward_both(ours.values, theirs.values, x, t, w)


@pytest.mark.parametrize("backend", HOST)
def test_kthvalue_at_ties_gives_the_gradient_to_the_index_it_returns(backend):
    """torch's pick among equal values is unspecified; ours is the stable sort's."""
    x = tensor_of([2.0, 1.0, 2.0, 2.0, 0.0], backend)
    values, indices = x.kthvalue(3)
    assert float(values) == 2.0 and float(arr(x)[int(indices)]) == 2.0
    values.backward()
    np.testing.assert_array_equal(arr(x.grad), np.eye(5)[int(indices)])


@pytest.mark.parametrize("backend", HOST)
def test_median_of_all_shares_the_gradient_among_ties(backend):
    for values, op in [(TIED[0], "median"), ([1.0, NAN, 2.0, NAN], "median"),
                       ([1.0, NAN, 2.0, 3.0], "nanmedian")]:
        x, t = pair(torch, values, backend)
        ours, theirs = getattr(x, op)(), getattr(t, op)()
        same_structure(ours, theirs, backend)
        assert ours.grad_fn.name() == theirs.grad_fn.name()
        _backward_both(ours, theirs, x, t, 1.5)


@pytest.mark.parametrize("backend", HOST)
def test_integer_medians_and_selections_keep_the_dtype(backend):
    x = js.tensor(np.array([[3, 1, 2, 2], [0, 5, 5, 1]], dtype=np.int32), backend=backend)
    t = torch.tensor([[3, 1, 2, 2], [0, 5, 5, 1]], dtype=torch.int32)
    for fn in (lambda a: a.median(), lambda a: a.median(1), lambda a: a.cummax(1),
               lambda a: a.mode(1)):
        same_structure(fn(x), fn(t), "numpy" if backend == "numpy" else "jax")


def test_selections_of_a_0d_tensor():
    x, t = js.tensor(3.0, requires_grad=True), torch.tensor(3.0, requires_grad=True)
    for fn in (lambda a: a.median(0), lambda a: a.nanmedian(-1, keepdim=True),
               lambda a: a.kthvalue(1), lambda a: a.mode(), lambda a: a.cummax(0),
               lambda a: a.cummin(-1)):
        ours, theirs = fn(x), fn(t)
        assert ours.values.shape == () and ours.indices.shape == ()
        assert ours.values.grad_fn.name() == theirs.values.grad_fn.name()
        assert float(ours.values) == 3.0 and int(ours.indices) == 0


@HYPOTHESIS
@given(hnp.arrays(np.float64, (3, 5), elements=st.floats(-5, 5, width=32)),
       st.integers(0, 1), st.booleans())
def test_distinct_value_selections_match_torch(values, dim, keepdim):
    values = values + np.arange(15).reshape(3, 5) * 1e-3  # distinct: the indices are unique
    for backend in HOST:
        x, t = pair(torch, values, backend)
        for name in ("median", "nanmedian", "kthvalue"):
            args = (2,) if name == "kthvalue" else ()
            ours = getattr(x, name)(*args, dim, keepdim)
            theirs = getattr(t, name)(*args, dim, keepdim)
            same_structure(ours, theirs, backend)
        same_structure(x.cummax(dim), t.cummax(dim), backend)
        same_structure(js.aminmax(x, dim=dim, keepdim=keepdim),
                       torch.aminmax(t, dim=dim, keepdim=keepdim), backend)


QUANTILES = [
    (0.3, None, False, "linear"), (0.5, 1, True, "lower"), (0.7, 0, False, "higher"),
    (0.25, 1, False, "midpoint"), (0.5, 1, False, "nearest"), ((0.1, 0.6, 1.0), 1, True,
                                                                "linear"),
    ((0.0, 0.45), None, True, "midpoint"),
]


@pytest.mark.parametrize("backend", HOST)
@pytest.mark.parametrize("case", range(len(QUANTILES)))
def test_quantile_values_and_gradients(case, backend):
    q, dim, keepdim, interpolation = QUANTILES[case]

    def ours(x):
        qs = q if isinstance(q, float) else tensor_of(q, backend, False)
        return js.quantile(x, qs, dim, keepdim, interpolation=interpolation)

    def theirs(t):
        qs = q if isinstance(q, float) else torch.tensor(q, dtype=torch.float64)
        return torch.quantile(t, qs, dim, keepdim, interpolation=interpolation)

    check_against_torch(torch, ours, theirs, [DISTINCT], backend)


@pytest.mark.parametrize("backend", HOST)
def test_quantile_with_nans(backend):
    values = [[1.0, NAN, 3.0, 0.5], [NAN, NAN, NAN, NAN], [2.0, 1.0, 4.0, 3.0]]
    x, t = pair(torch, values, backend)
    qs = (tensor_of([0.2, 0.9], backend, False), torch.tensor([0.2, 0.9], dtype=torch.float64))
    for ours, theirs in [
        (js.quantile(x, 0.4, 1), torch.quantile(t, 0.4, 1)),
        (x.nanquantile(0.4, 1), t.nanquantile(0.4, 1)),
        (js.nanquantile(x, qs[0], 1, True), torch.nanquantile(t, qs[1], 1, True)),
    ]:
        same_structure(ours, theirs, backend)
    _backward_both(x.nanquantile(0.4, 1)[[0, 2]], t.nanquantile(0.4, 1)[[0, 2]], x, t,
                   [1.0, -2.0])


@pytest.mark.parametrize("backend", HOST)
def test_nan_skipping_sums_and_means(backend):
    values = [[1.0, NAN, 3.0], [NAN, NAN, NAN], [2.0, -1.0, 4.0]]
    for ours_fn, theirs_fn, node in [
        (lambda a: a.nansum(), lambda a: a.nansum(), "NansumBackward0"),
        (lambda a: js.nansum(a, 1, keepdim=True), lambda a: torch.nansum(a, 1, keepdim=True),
         "NansumBackward0"),
        (lambda a: a.nanmean(0), lambda a: a.nanmean(0), "DivBackward0"),
        (lambda a: js.nanmean(a), lambda a: torch.nanmean(a), "DivBackward0"),
    ]:
        x, t = pair(torch, values, backend)
        ours, theirs = ours_fn(x), theirs_fn(t)
        same_structure(ours, theirs, backend)
        assert ours.grad_fn.name() == node == theirs.grad_fn.name()
        keep = ~np.isnan(theirs.detach().numpy())
        _backward_both(ours[keep] if ours.ndim else ours, theirs[keep] if theirs.ndim else
                       theirs, x, t, 1.0)


def test_nansum_second_order_and_integers():
    check_against_torch(torch, lambda a: (a * a).nansum(1), lambda a: (a * a).nansum(1),
                        [DISTINCT], "numpy")
    ints = np.array([[1, 2], [3, 4]], dtype=np.int32)
    same_structure(js.nansum(js.tensor(ints)), torch.nansum(torch.tensor(ints)), "numpy")


@pytest.mark.parametrize("backend", HOST)
def test_aminmax_shares_ties_and_count_nonzero(backend):
    x, t = pair(torch, TIED[2], backend)
    ours, theirs = js.aminmax(x), torch.aminmax(t)
    same_structure(ours, theirs, backend)
    assert ours._fields == ("min", "max") and ours.min.grad_fn.name() == "AminmaxBackward0"
    (ours.min + 2 * ours.max).backward()
    (theirs.min + 2 * theirs.max).backward()
    close(x.grad, t.grad.numpy(), backend, "gradient")
    values = np.array([[0.0, 1.0, 0.0], [2.0, 0.0, 3.0]])
    y, u = tensor_of(values, backend, False), torch.tensor(values)
    for dim in (None, 0, 1, (0, 1)):
        ours_count = js.count_nonzero(y, dim) if dim is not None else y.count_nonzero()
        theirs_count = torch.count_nonzero(u, dim)
        np.testing.assert_array_equal(arr(ours_count), theirs_count.numpy())
        assert str(ours_count.dtype) == ("int64" if backend == "numpy" else "int32")


@pytest.mark.parametrize("backend", HOST)
def test_diff(backend):
    check_against_torch(torch, lambda a: js.diff(a, 2, 1), lambda a: torch.diff(a, 2, 1),
                        [DISTINCT], backend)
    check_against_torch(torch, lambda a, p: a.diff(dim=0, prepend=p),
                        lambda a, p: a.diff(dim=0, prepend=p), [DISTINCT, [[1.0] * 4]], backend)
    assert js.diff(tensor_of(DISTINCT, backend)).grad_fn.name() == "SubBackward0"
    flags = js.tensor(np.array([True, False, False]), backend=backend)
    np.testing.assert_array_equal(arr(flags.diff()), [True, False])


@pytest.mark.parametrize("backend", HOST)
def test_bincount(backend):
    ints = np.array([1, 3, 1, 0], dtype=np.int32)
    x, t = js.tensor(ints, backend=backend), torch.tensor(ints)
    same_structure(js.bincount(x), torch.bincount(t), backend)
    same_structure(x.bincount(minlength=6), t.bincount(minlength=6), backend)
    for dtype in (np.float32, np.int32):
        w = np.array([0.5, 1.0, 1.5, 2.0]).astype(dtype)
        ours = js.bincount(x, js.tensor(w, backend=backend))
        same_structure(ours, torch.bincount(t, torch.tensor(w)), backend)
        assert ours.backend == backend


@pytest.mark.parametrize("backend", HOST)
def test_unique_and_unique_consecutive(backend):
    ints = np.array([[3, 1, 3], [2, 1, 3]], dtype=np.int32)
    x, t = js.tensor(ints, backend=backend), torch.tensor(ints)
    for kwargs in ({}, {"return_inverse": True}, {"return_counts": True},
                   {"return_inverse": True, "return_counts": True, "dim": 1}):
        same_structure(js.unique(x, **kwargs), torch.unique(t, **kwargs), backend)
        same_structure(x.unique_consecutive(**kwargs), t.unique_consecutive(**kwargs), backend)
    runs = np.array([1, 1, 2, 2, 3, 1, 1], dtype=np.int32)
    same_structure(js.unique_consecutive(js.tensor(runs, backend=backend), True, True),
                   torch.unique_consecutive(torch.tensor(runs), True, True), backend)
    assert js.unique(x).backend == backend


def test_host_ops_are_refused_inside_a_trace():
    x = js.tensor(np.array([1, 2, 2], dtype=np.int32), backend="jax")
    for op in (js.unique, js.bincount):
        with pytest.raises(RuntimeError, match="not known inside a trace"):
            js.compile(op)(x)


@pytest.mark.parametrize("call", [
    lambda x, i: x.kthvalue(4), lambda x, i: x.kthvalue(0),
    lambda x, i: x.quantile(1.5), lambda x, i: x.quantile(-0.1),
    lambda x, i: x.quantile(0.5, interpolation="cubic"),
    lambda x, i: x.quantile(torch.ones(2, 2) if isinstance(x, torch.Tensor) else
                            js.ones((2, 2), dtype=x.dtype)),
    lambda x, i: i.quantile(0.5), lambda x, i: (i - 2).bincount(),
    lambda x, i: i.reshape(1, 3).bincount(), lambda x, i: x.bincount(),
])
def test_errors_where_torch_raises(call):
    values = np.array([1.0, 2.0, 3.0])
    with pytest.raises(RuntimeError):
        call(torch.tensor(values), torch.tensor([0, 1, 2]))
    with pytest.raises(RuntimeError):
        call(js.tensor(values), js.tensor(np.array([0, 1, 2])))


def test_jax_backend():
    """A sample of the cases above on JAX: float32 values, int32 indices (x64 is off)."""
    for name in ("median", "mode", "cummax"):
        test_selections_match_torch_with_ties_and_nans(name, "jax")
    x, t = pair(torch, DISTINCT, "jax")
    qs = (tensor_of([0.1, 0.6], "jax", False), torch.tensor([0.1, 0.6], dtype=torch.float64))
    ours, theirs = js.quantile(x, qs[0], 1, True), torch.quantile(t, qs[1], 1, True)
    same_structure(ours, theirs, "jax")
    _backward_both(ours, theirs, x, t, np.ones(theirs.shape))
    test_nan_skipping_sums_and_means("jax")
    assert str(js.count_nonzero(x, 1).dtype) == "int32"
    test_bincount("jax")
    test_unique_and_unique_consecutive("jax")
    y = tensor_of(DISTINCT, "jax")
    close(js.diff(y, 1, 0), np.diff(DISTINCT, 1, 0), "jax", "diff")
