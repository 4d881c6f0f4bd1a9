"""The NumPy backend's own products and sums (Note [Host products that reach BLAS] and Note
[Host sums over leading axes] in backends/host_kernels.py): each fast path against NumPy's
own function (the general path) and against PyTorch, on the cases it takes and the edges
around them; and the namespace the NumPy backend gives its kernels."""

from __future__ import annotations

import array_api_compat
import array_api_compat.numpy as xnp
import numpy as np
import pytest

import jaxstream as js
from jaxstream.backends import get_backend, host_kernels
from jaxstream.backends.host_kernels import matmul as host_matmul
from jaxstream.backends.host_kernels import sum as host_sum

_RNG = np.random.default_rng(7)


def _normal(shape: tuple, dtype: str = "float32") -> np.ndarray:
    values = _RNG.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        values = values + 1j * _RNG.standard_normal(shape)
    return values.astype(dtype)


def _tolerance(dtype: np.dtype, terms: int) -> dict:
    return {"rtol": 0, "atol": 8 * terms * float(np.finfo(dtype).eps)}


def _strided(a: np.ndarray, kind: str) -> np.ndarray:
    """A view of `a`'s values (up to a broadcast of its first row or column)."""
    if kind == "rows stride 0":
        return np.broadcast_to(a[:1], a.shape)
    if kind == "columns stride 0":
        return np.broadcast_to(a[:, :1], a.shape)
    if kind == "all strides 0":
        return np.broadcast_to(a[:1, :1], a.shape)
    if kind == "every other row":
        return np.repeat(a, 2, axis=0)[::2]
    if kind == "reversed":
        return np.ascontiguousarray(a[::-1])[::-1]
    if kind == "fortran":
        return np.asfortranarray(a)
    return a


_LAYOUTS = ["contiguous", "rows stride 0", "columns stride 0", "all strides 0",
            "every other row", "reversed", "fortran"]
_SHAPES = [(5, 1, 4), (6, 3, 4), (1, 3, 4), (6, 3, 1), (1, 1, 1), (300, 16, 64)]


@pytest.mark.parametrize("shape", _SHAPES, ids=str)
@pytest.mark.parametrize("left", _LAYOUTS)
@pytest.mark.parametrize("right", ["contiguous", "rows stride 0", "columns stride 0", "reversed"])
def test_products_match_numpys_and_pytorchs(torch, shape, left, right) -> None:
    rows, inner, columns = shape
    a = _strided(_normal((rows, inner)), left)
    b = _strided(_normal((inner, columns)), right)
    got = host_matmul(a, b)
    want = np.matmul(a, b)
    assert got.shape == want.shape and got.dtype == want.dtype
    assert got.flags.c_contiguous and got.flags.writeable and got.flags.owndata
    np.testing.assert_allclose(got, want, **_tolerance(want.dtype, inner))
    by_torch = (torch.from_numpy(a.copy()) @ torch.from_numpy(b.copy())).numpy()
    np.testing.assert_allclose(got, by_torch, **_tolerance(want.dtype, inner))


@pytest.mark.parametrize("dtype", ["float64", "complex64", "complex128"])
@pytest.mark.parametrize("left", ["contiguous", "rows stride 0", "all strides 0"])
@pytest.mark.parametrize("inner", [1, 5])
def test_products_of_other_blas_dtypes(dtype, left, inner) -> None:
    a = _strided(_normal((4, inner), dtype), left)
    b = _normal((inner, 3), dtype)
    got = host_matmul(a, b)
    assert got.dtype == np.dtype(dtype)
    np.testing.assert_allclose(got, np.matmul(a, b), **_tolerance(got.dtype, inner))


def test_a_written_product_leaves_its_operands_alone() -> None:
    """Every path returns an array of its own, which kernels downstream may write over."""
    row = _normal((1, 3))
    for a, b in [(np.broadcast_to(row, (4, 3)), _normal((3, 2))),
                 (_normal((4, 1)), _normal((1, 2))),
                 (_normal((4, 3)), np.broadcast_to(_normal((3, 1)), (3, 2)))]:
        before = (a.copy(), b.copy())
        got = host_matmul(a, b)
        got[...] = 0.0
        np.testing.assert_array_equal(a, before[0])
        np.testing.assert_array_equal(b, before[1])


@pytest.mark.parametrize("left", ["contiguous", "rows stride 0"])
def test_nan_and_inf_spread_as_in_numpys_product(left) -> None:
    a = _strided(np.array([[np.inf, 1.0], [0.0, 1.0]], np.float32), left)
    b = np.array([[0.0, 1.0], [np.nan, 2.0]], np.float32)
    column = _strided(np.array([[np.inf], [2.0]], np.float32), left)
    with np.errstate(invalid="ignore"):  # inf * 0, which NumPy's product warns of too
        np.testing.assert_array_equal(host_matmul(a, b), np.matmul(a, b))
        np.testing.assert_array_equal(host_matmul(column, b[:1]), np.matmul(column, b[:1]))


class _Subclass(np.ndarray):
    """A subclass of ndarray (np.matrix, np.ma's arrays), whose operators it may redefine."""


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (np.ones((3, 4), np.int32), np.ones((4, 2), np.int32)),  # no BLAS for integers
        (np.ones((3, 1), np.float16), np.ones((1, 2), np.float16)),
        (np.ones((3, 1), np.float32), np.ones((1, 2), np.float64)),  # NumPy promotes
        (np.ones((2, 3, 1), np.float32), np.ones((1, 2), np.float32)),  # a stack
        (np.ones(3, np.float32), np.broadcast_to(np.ones((3, 1), np.float32), (3, 2))),
        (np.ones((3, 1)).view(_Subclass), np.ones((1, 2)).view(_Subclass)),
        (np.zeros((0, 3), np.float32), np.ones((3, 2), np.float32)),
        (np.ones((2, 0), np.float32), np.ones((0, 2), np.float32)),
    ],
    ids=["int32", "float16", "mixed", "stack", "vector", "subclass", "no rows",
         "no inner"],
)
def test_products_off_the_fast_paths_are_numpys_own(a, b) -> None:
    got, want = host_matmul(a, b), np.matmul(a, b)
    assert type(got) is type(want) and got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def test_mismatched_products_raise_numpys_error() -> None:
    a, b = np.ones((3, 4), np.float32), np.ones((5, 2), np.float32)
    with pytest.raises(ValueError, match="mismatch in its core dimension") as raised:
        host_matmul(a, b)
    with pytest.raises(ValueError) as numpys:
        np.matmul(a, b)
    assert str(raised.value) == str(numpys.value)


def test_keywords_go_to_numpys_product() -> None:
    a = np.broadcast_to(_normal((1, 3)), (4, 3))
    out = np.empty((4, 2), np.float32)
    assert host_matmul(a, _normal((3, 2)), out=out) is out


@pytest.mark.parametrize(
    ("shape", "axis", "keepdims"),
    [((2000, 64), 0, False), ((2000, 64), 0, True), ((128, 2), 0, False),
     ((300, 4, 5), (0, 1), False), ((300, 4, 5), (1, 0), True), ((300, 4, 5), 0, True),
     ((3, 100, 2), (0, 1), False)],
    ids=str,
)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_sums_over_leading_axes_match_numpys_and_pytorchs(torch, shape, axis, keepdims, dtype):
    x = _normal(shape, dtype)
    got = host_sum(x, axis=axis, keepdims=keepdims)
    want = np.sum(x, axis=axis, keepdims=keepdims)
    assert type(got) is np.ndarray and got.shape == want.shape and got.dtype == want.dtype
    terms = x.size // want.size
    np.testing.assert_allclose(got, want, **_tolerance(want.dtype, terms))
    dims = axis if isinstance(axis, tuple) else (axis,)
    by_torch = torch.from_numpy(x).sum(dim=dims, keepdim=keepdims).numpy()
    np.testing.assert_allclose(got, by_torch, **_tolerance(want.dtype, terms))


def test_sums_keep_nan_and_inf() -> None:
    x = np.ones((200, 3), np.float32)
    x[5, 0], x[7, 1], x[9, 1], x[0, 2] = np.nan, np.inf, -np.inf, np.inf
    with np.errstate(invalid="ignore"):  # inf - inf, which NumPy's sum warns of too
        np.testing.assert_array_equal(host_sum(x, axis=0), [np.nan, np.nan, np.inf])


@pytest.mark.parametrize(
    ("x", "params"),
    [
        (_normal((127, 64)), {"axis": 0}),  # too few rows to gain
        (_normal((2000, 1)), {"axis": 0}),  # one column: NumPy's one contiguous pass
        (_normal((2000, 64)), {"axis": 1}),
        (_normal((2000, 64)), {"axis": None}),
        (_normal((2000, 64)), {"axis": 0, "dtype": np.float64}),
        (_normal((2000, 64)).astype(np.float16), {"axis": 0}),
        (np.arange(600, dtype=np.int32).reshape(300, 2), {"axis": 0}),
        (np.asfortranarray(_normal((300, 4))), {"axis": 0}),
        (np.broadcast_to(_normal((1, 4)), (300, 4)), {"axis": 0}),
        (np.zeros((0, 4), np.float32), {"axis": 0}),
        (_normal((300, 4)), {"axis": 0, "where": np.ones((300, 4), bool)}),
    ],
    ids=["127 rows", "one column", "last axis", "all axes", "dtype", "float16", "int32",
         "fortran", "broadcast", "empty", "keywords"],
)
def test_sums_off_the_fast_path_are_numpys_own(x, params) -> None:
    got, want = host_sum(x, **params), np.sum(x, **params)
    assert type(got) is type(want) and got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


def test_sums_raise_numpys_error_for_a_missing_axis() -> None:
    with pytest.raises(np.exceptions.AxisError):
        host_sum(_normal((300, 4)), axis=2)


def test_the_numpy_backend_runs_its_kernels_in_the_host_namespace() -> None:
    space = host_kernels.namespace
    assert get_backend("numpy").xp is space
    assert get_backend("jax").xp is not space
    assert space.matmul is host_matmul and space.sum is host_sum
    for name in xnp.__all__:
        if name not in ("matmul", "sum"):
            assert getattr(space, name) is getattr(xnp, name), name
    assert space.__array_api_version__ == xnp.__array_api_version__
    assert not array_api_compat.is_cupy_namespace(space)


def test_a_tensor_product_and_sum_take_the_host_kernels(torch) -> None:
    """`y.sum()`'s gradient times a weight: a zero-stride column times a row."""
    w0 = _normal((1, 8))
    x = js.tensor(_normal((50, 1)), requires_grad=True)
    w = js.tensor(w0, requires_grad=True)
    (x @ w).sum().backward()
    tx = torch.from_numpy(x.numpy().copy()).requires_grad_()
    tw = torch.from_numpy(w0).requires_grad_()
    (tx @ tw).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-6)
    np.testing.assert_allclose(w.grad.numpy(), tw.grad.numpy(), rtol=1e-6)
    big = js.tensor(_normal((400, 8)))
    np.testing.assert_allclose(big.sum(axis=0).numpy(), big.numpy().sum(0), rtol=0, atol=1e-4)
