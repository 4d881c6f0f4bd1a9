"""Matrix products (matmul, linear, einsum) fail as PyTorch's do, diff-tested against torch:
its error type and message for every rank (wrong shapes, two dtypes, bool), followed by the
operands' shapes and dtypes and the fix (Note [Matrix products do not promote]). JAX runs in
its 64-bit mode here, so that every dtype of the table exists on both backends."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import BACKENDS

import jaxstream as js

pytestmark = [pytest.mark.oracle, pytest.mark.usefixtures("jax_x64")]

MISMATCHED_SHAPES = [
    ((3, 4), (5, 2)), ((4,), (5,)), ((3, 4), (5,)), ((4,), (5, 2)), ((2, 3, 4), (2, 5, 2)),
    ((2, 3, 4), (5, 2)), ((3, 4), (2, 5, 2)), ((2, 3, 4), (5,)), ((4,), (2, 5, 2)),
    ((2, 3, 4), (3, 5, 2)), ((2, 3, 4), (2, 4, 3, 2)), ((2, 2, 3, 4), (2, 2, 5, 2)),
    ((6, 2, 3, 4), (5, 2, 4, 2)), ((), (3,)), ((3,), ()),
]


def _error(fn):
    try:
        fn()
    except Exception as err:  # the error itself is what the tests compare
        return err
    raise AssertionError("no error raised")


def assert_fails_as_torch(ours, theirs, *names):
    """`ours()` raises `theirs()`'s error type with its message, and names each of `names`."""
    expected, got = _error(theirs), _error(ours)
    assert type(got) is type(expected), (got, expected)
    assert str(expected) in str(got)
    for name in names:
        assert str(name) in str(got), (name, str(got))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("sa, sb", MISMATCHED_SHAPES)
def test_matmul_shape_errors_are_torchs_and_name_both_shapes(torch, backend, sa, sb):
    a, b = np.ones(sa, np.float32), np.ones(sb, np.float32)
    names = (sa, sb) if sa and sb else ()
    assert_fails_as_torch(lambda: js.tensor(a, backend=backend) @ js.tensor(b, backend=backend),
                          lambda: torch.tensor(a) @ torch.tensor(b), *names)


def test_the_issues_shape_message():
    with pytest.raises(RuntimeError, match=r"mat1 and mat2 shapes cannot be multiplied "
                       r"\(3x4 and 5x2\)"):
        js.ones(3, 4) @ js.ones(5, 2)


# (input shape, weight shape, bias shape or None, input dtype, weight dtype, bias dtype)
LINEAR_FAILURES = [
    *[(x, (2, 4), b, "int64", "float32", "float32") for x in ((4,), (3, 4), (2, 3, 4), (2, 2, 3, 4))
      for b in (None, (2,))],
    *[(x, (2, 4), (2,), "float32", "float32", "float64") for x in ((4,), (3, 4), (2, 3, 4))],
    *[(x, (2, 4), (2,), "float32", "float64", "float32") for x in ((3, 4), (2, 3, 4))],
    *[(x, (2, 4), None, "float64", "float32", None) for x in ((4,), (3, 4), (2, 3, 4))],
    *[(x[:-1] + (5,), (2, 4), b, "float32", "float32", "float32")
      for x in ((4,), (3, 4), (2, 3, 4), (2, 2, 3, 4)) for b in (None, (2,))],
    *[(x, (2, 4), (3,), "float32", "float32", "float32") for x in ((4,), (3, 4), (2, 3, 4))],
    ((3, 4), (2, 4), None, "bool", "bool", None), ((3, 4), (2, 4), (2,), "bool", "bool", "bool"),
    ((), (2, 4), None, "float32", "float32", None),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("xs, ws, bs, dx, dw, db", LINEAR_FAILURES)
def test_linear_errors_are_torchs(torch, backend, xs, ws, bs, dx, dw, db):
    x, w = np.ones(xs, dx), np.ones(ws, dw)
    b = None if bs is None else np.ones(bs, db)

    def ours():
        return js.linear(*(None if v is None else js.tensor(v, backend=backend)
                           for v in (x, w, b)))

    def theirs():
        return torch.nn.functional.linear(*(None if v is None else torch.tensor(v)
                                            for v in (x, w, b)))

    assert_fails_as_torch(ours, theirs, *([xs, ws] if xs else []))


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_linear_layer_on_an_integer_batch_raises_instead_of_truncating(backend):
    layer = js.nn.Linear(2, 1, bias=False, backend=backend)
    batch = js.tensor(np.array([[1, 2]], np.int32), backend=backend)
    with pytest.raises(RuntimeError, match=r"expected m1 and m2 to have the same dtype, but got: "
                       r"int != float \(linear: input int32 of shape \(1, 2\), weight float32 "
                       r"of shape \(1, 2\)\); .*input.to\('float32'\)"):
        layer(batch)
    assert layer(batch.float()).dtype == np.float32


@pytest.mark.parametrize("backend", BACKENDS)
def test_einsum_of_two_dtypes_raises_torchs_error(torch, backend):
    a, b = np.ones((2, 3), np.int32), np.ones((3, 2), np.float32)
    assert_fails_as_torch(
        lambda: js.einsum("ij,jk->ik", js.tensor(a, backend=backend),
                          js.tensor(b, backend=backend)),
        lambda: torch.einsum("ij,jk->ik", torch.tensor(a), torch.tensor(b)), "(2, 3)", "(3, 2)")


@pytest.mark.parametrize("backend", BACKENDS)
def test_products_of_one_dtype_still_work_on_every_rank(torch, backend):
    for sa, sb in [((3, 4), (4, 2)), ((4,), (4,)), ((3, 4), (4,)), ((4,), (4, 2)),
                   ((2, 3, 4), (2, 4, 2)), ((2, 3, 4), (4, 2)), ((3, 4), (2, 4, 2)),
                   ((2, 1, 3, 4), (3, 4, 2))]:
        a = np.arange(np.prod(sa), dtype=np.float32).reshape(sa)
        b = np.arange(np.prod(sb), dtype=np.float32).reshape(sb)
        ours = js.tensor(a, backend=backend) @ js.tensor(b, backend=backend)
        np.testing.assert_allclose(ours.numpy(), (torch.tensor(a) @ torch.tensor(b)).numpy())
