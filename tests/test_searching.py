"""searchsorted, bucketize, isin, unravel_index, the triangle indices, cartesian_prod,
combinations and logspace against torch: values, dtypes, first gradients, node names and
errors, on NumPy (float64) and a few on JAX (float32)."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import arr
from ops_oracle import check_first_order, raises_saying, same_integers, tensor_of

import jaxstream as js

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.oracle
BACKENDS = ["numpy", "jax"]
NAN = float("nan")


# ------------------------------------------------------------------ searching
SEQUENCE = [1.0, 3.0, 5.0, 7.0]
VALUES = [[0.0, 3.0, 6.0], [8.0, 1.0, 5.0]]
SEARCHES = [
    (SEQUENCE, VALUES, {}), (SEQUENCE, VALUES, {"right": True}),
    (SEQUENCE, VALUES, {"side": "right", "out_int32": True}),
    ([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0]], [[2.5, 2.0], [2.5, 7.0]], {}),
    ([1.0, 3.0, NAN], [2.0, NAN, 5.0], {}), ([1.0, 3.0, NAN], [2.0, NAN, 5.0], {"right": True}),
    ([5.0, 1.0, 3.0], [2.0, 4.0, 0.5], {"sorter": [1, 2, 0]}),
    ([1.0, 2.0, 2.0, 2.0, 3.0], [2.0], {}), ([], [1.0], {}),
]


@pytest.mark.parametrize("sequence, values, kwargs", SEARCHES)
def test_searchsorted_matches_torch(sequence, values, kwargs):
    searched("numpy", sequence, values, kwargs)


@pytest.mark.parametrize("case", [0, 3, 6])
def test_searchsorted_matches_torch_on_jax(case):
    searched("jax", *SEARCHES[case])


def searched(backend, sequence, values, kwargs):
    def place(v, kind):
        return js.tensor(np.asarray(v, dtype=kind), backend=backend)

    given = {k: place(v, np.int32) if k == "sorter" else v for k, v in kwargs.items()}
    ours = js.searchsorted(place(sequence, np.float32), place(values, np.float32), **given)
    theirs = torch.searchsorted(torch.tensor(sequence), torch.tensor(values),
                                **{k: torch.tensor(v) if k == "sorter" else v
                                   for k, v in kwargs.items()})
    same_integers(ours, theirs, backend)


def test_bucketize_and_scalar_values_match_torch():
    x, boundaries = js.tensor(VALUES), js.tensor(SEQUENCE)
    for right in (False, True):
        same_integers(js.bucketize(x, boundaries, right=right),
                      torch.bucketize(torch.tensor(VALUES), torch.tensor(SEQUENCE), right=right),
                      "numpy")
    same_integers(js.bucketize(3.0, boundaries, out_int32=True),
                  torch.bucketize(3.0, torch.tensor(SEQUENCE), out_int32=True), "numpy")
    same_integers(js.searchsorted(boundaries, 4.0), torch.searchsorted(torch.tensor(SEQUENCE), 4.0),
                  "numpy")
    same_integers(js.searchsorted(js.tensor([1, 2]), js.tensor([1.5, 3.0])),
                  torch.searchsorted(torch.tensor([1, 2]), torch.tensor([1.5, 3.0])), "numpy")


def test_search_errors_are_torchs():
    seq = js.tensor(SEQUENCE)
    raises_saying(RuntimeError, "side can only be 'left' or 'right' but got middle",
                  js.searchsorted, seq, seq, side="middle")
    raises_saying(RuntimeError, "side and right can't be set to opposites",
                  js.searchsorted, seq, seq, side="left", right=True)
    raises_saying(RuntimeError, "boundaries tensor should have positive dimension",
                  js.searchsorted, js.tensor(1.0), seq)
    raises_saying(RuntimeError, "boundaries tensor [2, 3] and input value tensor [2]",
                  js.searchsorted, js.ones(2, 3), js.ones(2))
    raises_saying(RuntimeError, "sorter must be a tensor of long dtype but got dtype Float",
                  js.searchsorted, seq, seq, sorter=js.ones(4))
    raises_saying(RuntimeError, "boundary and sorter must have the same size",
                  js.searchsorted, seq, seq, sorter=js.tensor([0, 1]))
    raises_saying(RuntimeError, "sorter index out of range",
                  js.searchsorted, seq, seq, sorter=js.tensor([0, 1, 2, 4]))
    raises_saying(RuntimeError, "boundaries tensor must be 1 dimension, but got dim(2)",
                  js.bucketize, seq, js.ones(2, 2))


@pytest.mark.parametrize("backend", BACKENDS)
def test_isin_matches_torch(backend):
    x = [[0.0, 3.0, NAN], [8.0, 1.0, 5.0]]
    for test, invert in (([3.0, 5.0, NAN], False), ([5.0, 3.0], True), ([], False)):
        ours = js.isin(js.tensor(x, backend=backend), js.tensor(test, backend=backend),
                       invert=invert)
        same_integers(ours, torch.isin(torch.tensor(x), torch.tensor(test), invert=invert), backend)
    same_integers(js.isin(js.tensor([1, 2], backend=backend),
                          js.tensor([1.0, 2.5], backend=backend)),
                  torch.isin(torch.tensor([1, 2]), torch.tensor([1.0, 2.5])), backend)
    same_integers(js.isin(3.0, js.tensor([3.0, 5.0], backend=backend)),
                  torch.isin(3.0, torch.tensor([3.0, 5.0])), backend)
    raises_saying(TypeError, "must be a tensor", js.isin, 3.0, 3.0)


def test_unravel_index_matches_torch():
    indices = [4, 1, -1, 6]
    ours = js.unravel_index(js.tensor(indices), (2, 3))
    theirs = torch.unravel_index(torch.tensor(indices), (2, 3))
    assert isinstance(ours, tuple) and len(ours) == 2
    for a, b in zip(ours, theirs, strict=True):
        same_integers(a, b, "numpy")
    same_integers(js.unravel_index(js.tensor([[5]]), 4)[0],
                  torch.unravel_index(torch.tensor([[5]]), 4)[0], "numpy")
    assert js.unravel_index(js.tensor(0), ()) == ()
    raises_saying(TypeError, "expected 'indices' to be integer dtype", js.unravel_index,
                  js.ones(1), (2,))
    raises_saying(ValueError, "'shape' cannot have negative values, but got (2, -3)",
                  js.unravel_index, js.tensor([1]), (2, -3))


@pytest.mark.parametrize("args", [(3, 4), (3, 4, 1), (4, 3, -2), (0, 3), (4, 2, 5)])
def test_triangle_indices_match_torch(args):
    for name in ("tril_indices", "triu_indices"):
        same_integers(getattr(js, name)(*args), getattr(torch, name)(*args), "numpy")
    ours = js.tril_indices(3, 3, dtype="int32", backend="jax")
    same_integers(ours, torch.tril_indices(3, 3, dtype=torch.int32), "jax")


def test_triangle_indices_errors():
    raises_saying(RuntimeError, "row must be non-negative, got-1", js.tril_indices, -1, 3)
    raises_saying(RuntimeError, "col must be non-negative, got-2", js.triu_indices, 1, -2)
    raises_saying(NotImplementedError, "\"tril_indices\" not implemented for 'Float'",
                  js.tril_indices, 3, 3, dtype="float32")


def test_cartesian_prod_matches_torch_on_jax():
    check_first_order(torch, lambda a, b: js.cartesian_prod(a, b), torch.cartesian_prod,
                [[1.0, 2.0], [3.0, 4.0, 5.0]], "jax")


def test_cartesian_prod_and_combinations_match_torch():
    check_first_order(torch, lambda a, b: js.cartesian_prod(a, b), torch.cartesian_prod,
                [[1.0, 2.0], [3.0, 4.0, 5.0]], "numpy")
    check_first_order(torch, lambda a: js.combinations(a, 3), lambda a: torch.combinations(a, 3),
                [[1.0, 2.0, 3.0, 4.0]], "numpy")
    check_first_order(torch, lambda a: js.combinations(a, with_replacement=True),
                lambda a: torch.combinations(a, with_replacement=True), [[1.0, 2.0, 3.0]],
                "numpy")
    x = tensor_of([1.0, 2.0, 3.0], "numpy")
    assert js.combinations(x).grad_fn.name() == "StackBackward0"
    assert js.combinations(x, 5).shape == (0, 5) and js.combinations(x, 0).shape == (0,)
    assert js.cartesian_prod(x) is x


def test_cartesian_prod_and_combinations_errors():
    raises_saying(RuntimeError, "Expect a 1D vector, but got shape [2, 2]", js.combinations,
                  js.ones(2, 2))
    raises_saying(RuntimeError, "Expect a non-negative number, but got -1",
                  js.combinations, js.ones(2), -1)
    raises_saying(RuntimeError, "Expect a 1D vector, but got shape [2, 2]",
                  js.cartesian_prod, js.ones(2, 2), js.ones(2))
    raises_saying(RuntimeError, "meshgrid expects all tensors to have the same dtype",
                  js.cartesian_prod, js.tensor([1, 2]), js.tensor([1.0]))


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
def test_logspace_matches_torch(dtype):
    for start, end, steps, base in [(0, 2, 3, 10.0), (0.3, 2.7, 7, 10.0), (-1.5, 3.2, 11, 2.0),
                                    (1, 2, 1, 10.0), (0, 3, 0, 10.0)]:
        ours = js.logspace(start, end, steps, base, dtype=dtype)
        theirs = torch.logspace(start, end, steps, base, dtype=getattr(torch, dtype))
        assert str(ours.dtype) == dtype and ours.shape == (steps,)
        np.testing.assert_allclose(arr(ours), theirs.numpy(), rtol=1e-6 if dtype == "float32"
                                   else 1e-15)
    assert js.logspace(0, 1, 2, backend="jax", requires_grad=True).requires_grad
    raises_saying(RuntimeError, "number of steps must be non-negative", js.logspace, 0, 2, -1)
