"""The matrix decompositions and their top-level names against torch: det, inverse, slogdet,
logdet, cholesky (and js.linalg.cholesky), cholesky_solve, cholesky_inverse, qr (and
js.linalg.qr), svd (torch.svd's V and js.linalg.svd's Vh), pinverse (js.linalg.pinv):
values, named tuples, first gradients (second for cholesky), node names and errors, on
NumPy (float64) and a few on JAX (float32). Losses of singular vectors are invariant to
their signs (U U^T), which no library fixes."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import arr, error_text
from ops_oracle import check_against_torch, check_first_order

import jaxstream as js

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.oracle
RNG = np.random.default_rng(2)


def _r(*shape):
    return RNG.standard_normal(shape)


def _gram(u):
    return u @ u.swapaxes(-1, -2)


def _positive_definite(a, eye):
    """A symmetric positive-definite matrix from any square `a` (`eye` of its size)."""
    return _gram(a) + 3 * eye


def _eye(n, like):
    if isinstance(like, js.Tensor):
        return js.eye(n, dtype=like.dtype, backend=like.backend)
    return torch.eye(n, dtype=like.dtype)


DECOMPOSITIONS = {
    "det": (js.det, torch.det, [_r(2, 3, 3)]),
    "inverse": (js.inverse, torch.inverse, [_r(3, 3)]),
    "slogdet": (lambda a: js.slogdet(a).logabsdet, lambda a: torch.slogdet(a).logabsdet,
                [_r(2, 3, 3)]),
    "logdet": (lambda a: js.logdet(_gram(a)), lambda a: torch.logdet(_gram(a)), [_r(3, 3)]),
    "cholesky upper": (lambda a: js.linalg.cholesky(_positive_definite(a, _eye(3, a)), upper=True),
                       lambda a: torch.linalg.cholesky(_positive_definite(a, _eye(3, a)),
                                                       upper=True), [_r(2, 3, 3)]),
    "cholesky_solve": (
        lambda b, f: js.cholesky_solve(b, f.tril() + 2 * _eye(2, f)),
        lambda b, f: torch.cholesky_solve(b, f.tril() + 2 * _eye(2, f)), [_r(3, 2, 1), _r(2, 2)]),
    "cholesky_inverse upper": (
        lambda f: js.cholesky_inverse(f.triu() + 2 * _eye(2, f), upper=True),
        lambda f: torch.cholesky_inverse(f.triu() + 2 * _eye(2, f), upper=True), [_r(2, 2)]),
    "qr tall": (lambda a: js.linalg.qr(a).R + js.linalg.qr(a).Q[:3],
                lambda a: torch.linalg.qr(a).R + torch.linalg.qr(a).Q[:3], [_r(4, 3)]),
    "qr wide": (lambda a: js.qr(a).R[:, 1:3] + js.qr(a).Q,
                lambda a: torch.qr(a).R[:, 1:3] + torch.qr(a).Q, [_r(2, 4)]),
    "qr complete, wide": (lambda a: js.linalg.qr(a, "complete").R,
                          lambda a: torch.linalg.qr(a, "complete").R, [_r(2, 3)]),
    "svd values": (lambda a: js.linalg.svd(a).S, lambda a: torch.linalg.svd(a).S, [_r(4, 3)]),
    "svd U of a tall matrix": (lambda a: _gram(js.linalg.svd(a, False).U),
                               lambda a: _gram(torch.linalg.svd(a, False).U), [_r(4, 3)]),
    "svd U of a wide matrix": (lambda a: _gram(js.svd(a).U), lambda a: _gram(torch.svd(a).U),
                               [_r(3, 4)]),
    "svd V of a tall matrix": (lambda a: _gram(js.svd(a).V), lambda a: _gram(torch.svd(a).V),
                               [_r(4, 3)]),
    "svd V of a wide matrix": (lambda a: _gram(js.svd(a).V), lambda a: _gram(torch.svd(a).V),
                               [_r(3, 4)]),
    "svd full matrices": (lambda a: _gram(js.linalg.svd(a).U[..., :3]) + js.linalg.svd(a).S.sum(),
                          lambda a: _gram(torch.linalg.svd(a).U[..., :3])
                          + torch.linalg.svd(a).S.sum(), [_r(4, 3)]),
    "pinverse": (js.pinverse, torch.pinverse, [_r(4, 3)]),
    "linalg.pinv, wide": (js.linalg.pinv, torch.linalg.pinv, [_r(2, 3, 4)]),
}


@pytest.mark.parametrize("name", DECOMPOSITIONS)
def test_decompositions_match_torch(name):
    check_first_order(torch, *DECOMPOSITIONS[name], "numpy")


@pytest.mark.outside_twin  # seconds of XLA compiling per factorization: one of CI's two runs
@pytest.mark.parametrize("name", ["svd values", "qr tall"])
def test_decompositions_match_torch_on_jax(name):
    check_first_order(torch, *DECOMPOSITIONS[name], "jax")


def test_cholesky_matches_torch_to_second_order():
    check_against_torch(torch, lambda a: js.linalg.cholesky(_positive_definite(a, _eye(3, a))),
                        lambda a: torch.linalg.cholesky(_positive_definite(a, _eye(3, a))),
                        [_r(3, 3)], "numpy")


def test_results_are_torchs_named_tuples_and_nodes():
    a = js.tensor(_r(3, 2), requires_grad=True)
    square = js.tensor(_r(2, 2), requires_grad=True)
    expected = {
        "svd": (js.svd(a), ("U", "S", "V"), ["LinalgSvdBackward0"] * 2 + ["TransposeBackward0"]),
        "linalg_svd": (js.linalg.svd(a), ("U", "S", "Vh"), ["LinalgSvdBackward0"] * 3),
        "qr": (js.qr(a), ("Q", "R"), ["LinalgQrBackward0"] * 2),
        "linalg_qr": (js.linalg.qr(a), ("Q", "R"), ["LinalgQrBackward0"] * 2),
        "slogdet": (js.slogdet(square), ("sign", "logabsdet"), [None, "LinalgSlogdetBackward0"]),
        "linalg_slogdet": (js.linalg.slogdet(square), ("sign", "logabsdet"),
                           [None, "LinalgSlogdetBackward0"]),
    }
    for name, (result, fields, nodes) in expected.items():
        assert type(result).__name__ == name and result._fields == fields
        assert [t.grad_fn.name() if t.grad_fn else None for t in result] == nodes
    assert [t.shape for t in js.svd(a, some=False)] == [(3, 3), (2,), (2, 2)]
    assert [t.shape for t in js.linalg.svd(a)] == [(3, 3), (2,), (2, 2)]
    assert [t.shape for t in js.linalg.qr(a, "complete")] == [(3, 3), (3, 2)]
    assert [t.shape for t in js.linalg.qr(a, "r")] == [(0,), (2, 2)]
    u, s, v = js.svd(js.tensor(np.eye(2, 3)), compute_uv=False)
    assert u.shape == (2, 2) and v.shape == (3, 3) and not arr(u).any() and not arr(v).any()
    np.testing.assert_allclose(arr(s), [1.0, 1.0])
    assert js.pinverse(a).grad_fn.name() == "LinalgPinvBackward0"
    assert js.cholesky(_gram(square) + js.eye(2)).grad_fn.name() == "CholeskyBackward0"
    assert js.linalg.cholesky(_gram(square) + js.eye(2)).grad_fn.name() == \
        "LinalgCholeskyExBackward0"


def test_singular_and_indefinite_matrices():
    for ours, theirs in ((js.slogdet(js.zeros(2, 2)), torch.slogdet(torch.zeros(2, 2))),
                         ((js.logdet(js.tensor([[-1.0, 0.0], [0.0, 1.0]])),),
                          (torch.logdet(torch.tensor([[-1.0, 0.0], [0.0, 1.0]])),))):
        for a, b in zip(ours, theirs, strict=True):
            np.testing.assert_array_equal(arr(a), b.numpy())
    with pytest.raises(js.linalg.LinAlgError, match="not positive-definite"):
        js.linalg.cholesky(js.tensor([[1.0, 2.0], [2.0, 1.0]]))


@pytest.mark.parametrize("fn, args, error, phrase", [
    (js.slogdet, (js.ones(2, 3),), RuntimeError,
     "linalg.slogdet: A must be batches of square matrices, but they are 2 by 3 matrices"),
    (js.logdet, (js.ones(2, 2, dtype="int64"),), RuntimeError,
     "logdet: Expected a floating point or complex tensor as input. Got Long"),
    (js.linalg.cholesky, (js.ones(3),), RuntimeError,
     "linalg.cholesky: The input tensor A must have at least 2 dimensions."),
    (js.cholesky_solve, (js.ones(2), js.eye(2)), RuntimeError,
     "b should have at least 2 dimensions, but has 1 dimensions instead"),
    (js.cholesky_solve, (js.ones(3, 1), js.eye(2)), RuntimeError,
     "Incompatible matrix sizes for cholesky_solve: each A matrix is 2 by 2 but each b matrix "
     "is 3 by 1"),
    (js.cholesky_solve, (js.ones(2, 1, dtype="float64"), js.eye(2)), RuntimeError,
     "Expected b and A to have the same dtype, but found b of type Double and A of type Float"),
    (js.cholesky_inverse, (js.eye(2, dtype="int64"),), NotImplementedError,
     "\"cholesky_inverse_out_cpu\" not implemented for 'Long'"),
    (js.linalg.qr, (js.ones(2, 2), "x"), RuntimeError,
     "qr received unrecognized mode 'x' but expected one of 'reduced' (default), 'r', or "
     "'complete'"),
    (js.linalg.svd, (js.ones(3),), RuntimeError,
     "linalg.svd: The input tensor A must have at least 2 dimensions."),
    (js.pinverse, (js.ones(3),), RuntimeError,
     "expected a tensor with 2 or more dimensions of float, double, cfloat or cdouble types"),
    (js.lu, (js.eye(2),), NotImplementedError, "js.linalg.solve"),
    (js.lu_solve, (js.eye(2),), NotImplementedError, "no LU factorization"),
])
def test_decomposition_errors_are_torchs(fn, args, error, phrase):
    with pytest.raises(error) as excinfo:
        fn(*args)
    assert phrase in error_text(excinfo), error_text(excinfo)


def test_gradients_refused_where_torch_refuses():
    a = js.tensor(_r(3, 2), requires_grad=True)
    with pytest.raises(RuntimeError, match="not differentiable when mode='complete'"):
        js.linalg.qr(a, "complete").Q.sum().backward()
    with pytest.raises(RuntimeError, match="which is not computed when mode='r'"):
        js.linalg.qr(a, "r").R.sum().backward()
