"""The products cross (and js.linalg.cross), tensordot, block_diag, addmv, addr, addbmm,
chain_matmul, matrix_power, matrix_exp and vander against torch: values, dtypes, first
gradients (second for matrix_exp), node names and errors, on NumPy (float64) and a few on
JAX (float32)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from helpers import arr
from ops_oracle import check_against_torch, check_first_order, close, raises_saying, same_integers

import jaxstream as js

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.oracle
RNG = np.random.default_rng(0)


# ------------------------------------------------------------------ products
def _r(*shape):
    return RNG.standard_normal(shape)


PRODUCTS = {
    "cross": (lambda a, b: js.cross(a, b, dim=1), lambda a, b: torch.cross(a, b, dim=1),
              [_r(2, 3), _r(2, 3)]),
    "linalg.cross broadcast": (js.linalg.cross, torch.linalg.cross, [_r(2, 3), _r(1, 3)]),
    "cross default dim": (js.cross, torch.cross, [_r(3, 2), _r(3, 2)]),
    "tensordot": (js.tensordot, torch.tensordot, [_r(2, 3, 4), _r(3, 4, 2)]),
    "tensordot lists": (lambda a, b: js.tensordot(a, b, ([1, 2], [1, 0])),
                        lambda a, b: torch.tensordot(a, b, ([1, 2], [1, 0])),
                        [_r(2, 3, 4), _r(4, 3, 2)]),
    "tensordot broadcast": (lambda a, b: js.tensordot(a, b, ([0], [0])),
                            lambda a, b: torch.tensordot(a, b, ([0], [0])), [_r(1, 3), _r(2, 3)]),
    "block_diag": (js.block_diag, torch.block_diag, [_r(2, 2), _r(3), np.array(2.0)]),
    "addmv": (lambda x, m, v: js.addmv(x, m, v, beta=0.5, alpha=2),
              lambda x, m, v: torch.addmv(x, m, v, beta=0.5, alpha=2), [_r(1), _r(2, 3), _r(3)]),
    "addr": (lambda x, a, b: js.addr(x, a, b, beta=2, alpha=0.5),
             lambda x, a, b: torch.addr(x, a, b, beta=2, alpha=0.5), [_r(3), _r(2), _r(3)]),
    "addbmm": (lambda x, a, b: js.addbmm(x, a, b, beta=0.5, alpha=3),
               lambda x, a, b: torch.addbmm(x, a, b, beta=0.5, alpha=3),
               [_r(2, 4), _r(5, 2, 3), _r(5, 3, 4)]),
    "chain_matmul": (js.chain_matmul, torch.chain_matmul, [_r(2, 3), _r(3, 4), _r(4, 2)]),
    "matrix_power 3": (lambda a: js.matrix_power(a, 3), lambda a: torch.matrix_power(a, 3),
                       [_r(2, 3, 3)]),
    "matrix_power -2": (lambda a: a.matrix_power(-2), lambda a: a.matrix_power(-2), [_r(3, 3)]),
    "matrix_power 0": (lambda a: js.matrix_power(a, 0), lambda a: torch.matrix_power(a, 0),
                       [_r(3, 3)]),
    # torch.vander's own backward fails (its cumprod writes in place): its powers are the oracle
    "vander": (js.vander, lambda x: x.unsqueeze(1) ** torch.arange(2.0, -1.0, -1.0), [_r(3)]),
    "vander increasing": (lambda x: js.vander(x, 4, True),
                          lambda x: x.unsqueeze(1) ** torch.arange(4.0), [_r(3)]),
}


@pytest.mark.parametrize("name", PRODUCTS)
def test_products_match_torch(name):
    check_first_order(torch, *PRODUCTS[name], "numpy")


@pytest.mark.parametrize("name", ["cross", "addbmm", "block_diag"])
def test_products_match_torch_on_jax(name):
    check_first_order(torch, *PRODUCTS[name], "jax")


def test_matrix_exp_matches_torch_to_second_order():
    """On NumPy: on JAX each new shape compiles a solve and the squarings, seconds each."""
    check_against_torch(torch, js.matrix_exp, torch.matrix_exp, [_r(2, 3, 3)], "numpy")
    check_first_order(torch, js.linalg.matrix_exp, torch.linalg.matrix_exp, [_r(3, 3) * 6], "numpy")


def test_one_op_products_record_torchs_nodes():
    a, b, v = (js.tensor(_r(*s), requires_grad=True) for s in ((3, 3), (3, 3), (3,)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        nodes = {"LinalgCrossBackward0": js.cross(a, b), "AddmvBackward0": js.addmv(v, a, v),
                 "AddrBackward0": a.addr(v, v), "BlockDiagBackward0": js.block_diag(a, b),
                 "AddbmmBackward0": a.addbmm(a.unsqueeze(0), b.unsqueeze(0)),
                 "LinalgMatrixExpBackward0": a.matrix_exp()}
    for name, result in nodes.items():
        assert result.grad_fn.name() == name
    with pytest.warns(UserWarning, match="Using torch.cross without specifying the dim"):
        js.cross(a, b)


def test_integer_products_match_torch():
    x = [1.5, -2.0, 0.5]
    close(js.vander(js.tensor(x), 4), torch.vander(torch.tensor(x), 4).numpy(), "jax", "vander")
    m = [[1, 1], [0, 1]]
    same_integers(js.matrix_power(js.tensor(m), 3), torch.matrix_power(torch.tensor(m), 3), "numpy")
    for x in ([1, 2, 3], [True, False]):
        same_integers(js.vander(js.tensor(x), 3), torch.vander(torch.tensor(x), 3), "numpy")
    ours = js.addr(js.ones(2, 3, dtype="int64"), js.ones(2, dtype="int64"), js.ones(3))
    assert ours.dtype == np.float32 and np.all(arr(ours) == 2)
    t = js.zeros(2)
    t.addmv_(js.ones(2, 3), js.ones(3))
    np.testing.assert_array_equal(arr(t), [3.0, 3.0])


@pytest.mark.parametrize("fn, args, error, phrase", [
    (js.cross, (js.ones(2, 4), js.ones(2, 4)), RuntimeError, "no dimension of size 3 in input"),
    (js.linalg.cross, (js.ones(3, 2), js.ones(3, 2)), RuntimeError,
     "linalg.cross: inputs dimension -1 must have length 3. Got 2 and 2"),
    (js.tensordot, (js.ones(2, 3), js.ones(4, 5), 1), RuntimeError,
     "contracted dimensions need to match, but first has size 3 in dim -1 and second has size "
     "4 in dim 0"),
    (js.tensordot, (js.ones(2, 3), js.ones(4, 5), -1), RuntimeError,
     "tensordot expects dims >= 0, but got dims=-1"),
    (js.tensordot, (js.ones(2, 3), js.ones(3, 5), ([1], [0, 1])), RuntimeError,
     "both dimension lists should have same length"),
    (js.block_diag, (js.ones(2, 2, 2),), RuntimeError,
     "Input tensors must have 2 or fewer dimensions. Input 0 has 3 dimensions"),
    (js.addmv, (js.ones(2), js.ones(2, 3), js.ones(4)), RuntimeError,
     "size mismatch, got input (2), mat (2x3), vec (4)"),
    (js.addmv, (js.ones(2), js.ones(2, 3), js.ones(3, 1)), RuntimeError,
     "vector + matrix @ vector expected, got 1, 2, 2"),
    (js.addr, (js.ones(2, 3), js.ones(2, 1), js.ones(3)), RuntimeError,
     "addr: Expected 1-D argument vec1, but got 2-D"),
    (js.addbmm, (js.ones(2, 4), js.ones(5, 2, 3), js.ones(4, 3, 4)), RuntimeError,
     "batch1 and batch2 must have same number of batches, got 5 and 4"),
    (js.addbmm, (js.ones(2, 4), js.ones(5, 2, 3), js.ones(5, 2, 4)), RuntimeError,
     "Incompatible matrix sizes for bmm (2x3 and 2x4)"),
    (js.chain_matmul, (), RuntimeError, "chain_matmul(): Expected one or more matrices"),
    (js.matrix_power, (js.ones(3, 2), 2), RuntimeError,
     "linalg.matrix_power: A must be batches of square matrices, but they are 3 by 2 matrices"),
    (js.matrix_power, (js.ones(2, 2, dtype="int64"), -1), RuntimeError,
     "linalg.inv: Expected a floating point or complex tensor as input. Got Long"),
    (js.matrix_exp, (js.ones(3),), RuntimeError,
     "linalg.matrix_exp: The input tensor A must have at least 2 dimensions."),
    (js.vander, (js.ones(2, 2),), RuntimeError, "x must be a one-dimensional tensor."),
    (js.vander, (js.ones(2), -1), RuntimeError, "N must be non-negative."),
])
def test_product_errors_are_torchs(fn, args, error, phrase):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        raises_saying(error, phrase, fn, *args)
