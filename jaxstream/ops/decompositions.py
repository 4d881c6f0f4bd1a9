"""PyTorch's matrix decompositions and their top-level names: `js.linalg.slogdet`,
`cholesky`, `qr`, `svd`, `pinv`, and `js.det`, `inverse`, `slogdet`, `logdet`, `cholesky`,
`cholesky_solve`, `cholesky_inverse`, `qr` (`some=`), `svd` (`some=`, `compute_uv=`: V, not
Vh), `pinverse`.

Each factor is one op under PyTorch's node (decomposition_rules.py), differentiable to any
order where the decomposition is (distinct singular values, full rank, as PyTorch assumes).
cholesky_solve and cholesky_inverse compose `solve` and `inv` of L L^T (their gradients
are PyTorch's; their nodes are the composition's). Honest differences: the sign of
slogdet has no node (its gradient is zero in PyTorch too); JAX's kernels give NaN where a
matrix is not positive-definite, where NumPy's raise `LinAlgError`. jaxstream has no LU
factorization: `lu`, `lu_solve` and `lu_unpack` are refused by name.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..tensor import Tensor
from . import decomposition_rules as D
from . import return_types
from .creation import zeros
from .dispatch import apply
from .dtype_names import scalar_type
from .functional import where
from .matrices import LinAlgError, check_matrices, det, inv, solve
from .matrix_rules import matrix_transpose
from .operands import as_tensor
from .pointwise import kernel_lacks

__all__ = [
    "cholesky", "cholesky_inverse", "cholesky_solve", "det", "inverse", "logdet", "lu",
    "lu_solve", "lu_unpack", "pinverse", "qr", "slogdet", "svd",
]


# ------------------------------------------------------------------ determinants
def linalg_slogdet(A: Any) -> return_types.linalg_slogdet:  # noqa: N803  (torch's name)
    """The named tuple `(sign, logabsdet)` of each square matrix's determinant: its sign (0
    for a singular matrix) and the log of its absolute value (-inf there)."""
    a = as_tensor(A)
    check_matrices("linalg.slogdet", a)
    return return_types.linalg_slogdet(apply(D.SLOGDET_SIGN, a.detach()),
                                       apply(D.SLOGDET_LOGABS, a))


def slogdet(input: Any) -> return_types.slogdet:  # noqa: A002
    """`js.linalg.slogdet` as `torch.slogdet` names its result."""
    return return_types.slogdet(*linalg_slogdet(input))


def logdet(input: Any) -> Tensor:  # noqa: A002
    """The log of each determinant: NaN where it is negative, -inf where it is 0."""
    a = as_tensor(input)
    check_matrices("logdet", a)
    sign, logabsdet = linalg_slogdet(a)
    return where(sign == -1, float("nan"), logabsdet)


# ------------------------------------------------------------------ cholesky
def _factored(op: str, node: str, a: Any, upper: bool) -> Tensor:
    a = as_tensor(a)
    check_matrices(op, a)
    try:
        return apply(D.CHOLESKY, a, upper=bool(upper), node=node)
    except np.linalg.LinAlgError as err:
        raise LinAlgError(f"{op}: The factorization could not be completed because the input "
                          f"is not positive-definite ({err}).") from err


def linalg_cholesky(A: Any, *, upper: bool = False) -> Tensor:  # noqa: N803
    """The lower-triangular L with A = L L^T of each symmetric positive-definite matrix (the
    upper U = L^T with `upper`); LinAlgError (NumPy, CuPy) where one is not."""
    return _factored("linalg.cholesky", "LinalgCholeskyExBackward0", A, upper)


def cholesky(input: Any, upper: bool = False) -> Tensor:  # noqa: A002
    """`torch.cholesky`: `js.linalg.cholesky` with `upper` positional, node
    CholeskyBackward0."""
    return _factored("cholesky", "CholeskyBackward0", input, upper)


def _gram(factor: Tensor, upper: bool) -> Tensor:
    """A = L L^T from its Cholesky factor (U^T U from an upper one)."""
    return matrix_transpose(factor) @ factor if upper else factor @ matrix_transpose(factor)


def cholesky_solve(B: Any, L: Any, upper: bool = False) -> Tensor:  # noqa: N803
    """X with A X = B, A = L L^T given by its Cholesky factor `L` (U^T U with `upper`),
    batches broadcast."""
    b = as_tensor(B)
    factor = as_tensor(L, b)
    for name, t in (("b", b), ("u", factor)):
        if t.ndim < 2:
            raise RuntimeError(f"{name} should have at least 2 dimensions, but has {t.ndim} "
                               f"dimensions instead")
    if b.dtype != factor.dtype:
        raise RuntimeError(f"Expected b and A to have the same dtype, but found b of type "
                           f"{scalar_type(b.dtype)} and A of type {scalar_type(factor.dtype)} "
                           f"instead.")
    if b.dtype.kind not in "fc":
        raise kernel_lacks("cholesky_solve_cpu", b, "cast the operands first, e.g. t.double()")
    check_matrices("cholesky_solve", factor, floating=False)
    if factor.shape[-1] != b.shape[-2]:
        raise RuntimeError(f"Incompatible matrix sizes for cholesky_solve: each A matrix is "
                           f"{factor.shape[-2]} by {factor.shape[-1]} but each b matrix is "
                           f"{b.shape[-2]} by {b.shape[-1]}")
    return solve(_gram(factor, upper), b)


def cholesky_inverse(L: Any, upper: bool = False) -> Tensor:  # noqa: N803
    """The inverse of A = L L^T given by its Cholesky factor `L` (U^T U with `upper`)."""
    factor = as_tensor(L)
    check_matrices("cholesky_inverse", factor, floating=False)
    if factor.dtype.kind not in "fc":
        raise kernel_lacks("cholesky_inverse_out_cpu", factor, "cast it first, e.g. t.double()")
    return inv(_gram(factor, upper))


# ------------------------------------------------------------------ qr, svd, pinv
def linalg_qr(A: Any, mode: str = "reduced") -> return_types.linalg_qr:  # noqa: N803
    """The named tuple `(Q, R)` with A = QR, Q with orthonormal columns and R upper
    triangular: Q (m, k) and R (k, n) for k = min(m, n) in mode "reduced", Q (m, m) and R
    (m, n) in "complete", an empty Q and R (k, n) in "r"."""
    a = as_tensor(A)
    check_matrices("linalg.qr", a, square=False)
    if mode not in ("reduced", "complete", "r"):
        raise RuntimeError(f"qr received unrecognized mode '{mode}' but expected one of "
                           f"'reduced' (default), 'r', or 'complete'")
    q = zeros(0, dtype=a.dtype, backend=a.backend, device=a.device) if mode == "r" else \
        apply(D.QR_Q, a, mode=mode)
    return return_types.linalg_qr(q, apply(D.QR_R, a, mode=mode))


def qr(input: Any, some: bool = True) -> return_types.qr:  # noqa: A002
    """`torch.qr`: `js.linalg.qr` in mode "reduced" (`some=False`: "complete")."""
    return return_types.qr(*linalg_qr(input, "reduced" if some else "complete"))


def _svd_factors(a: Tensor, full_matrices: bool) -> tuple[Tensor, Tensor, Tensor]:
    return tuple(apply(factor, a, full_matrices=full_matrices)
                 for factor in (D.SVD_U, D.SVD_S, D.SVD_VH))


def linalg_svd(A: Any, full_matrices: bool = True, *,  # noqa: N803
               driver: str | None = None) -> return_types.linalg_svd:
    """The named tuple `(U, S, Vh)` with A = U diag(S) Vh, S descending; U (m, m) and Vh
    (n, n) with `full_matrices`, else (m, k) and (k, n) for k = min(m, n)."""
    a = as_tensor(A)
    if driver is not None:
        raise RuntimeError("torch.linalg.svd: keyword argument `driver=` is only supported on "
                           "CUDA inputs with cuSOLVER backend.")
    check_matrices("linalg.svd", a, square=False)
    return return_types.linalg_svd(*_svd_factors(a, full_matrices))


def svd(input: Any, some: bool = True, compute_uv: bool = True) -> return_types.svd:  # noqa: A002
    """`torch.svd`: the named tuple `(U, S, V)` with A = U diag(S) V^T (V, not Vh); all of U
    and V with `some=False`; with `compute_uv=False` only S, U and V zeros of (m, m) and
    (n, n)."""
    a = as_tensor(input)
    check_matrices("linalg.svd", a, square=False)
    if not compute_uv:
        s = apply(D.SVD_S, a, full_matrices=False)
        batch, (m, n) = a.shape[:-2], a.shape[-2:]
        place = {"dtype": a.dtype, "backend": a.backend, "device": a.device}
        return return_types.svd(zeros(batch + (m, m), **place), s,
                                zeros(batch + (n, n), **place))
    u, s, vh = _svd_factors(a, not some)
    return return_types.svd(u, s, matrix_transpose(vh))


def linalg_pinv(A: Any, *, atol: float | None = None, rtol: float | None = None,  # noqa: N803
                hermitian: bool = False) -> Tensor:
    """The Moore-Penrose pseudo-inverse of each matrix, singular values at most
    max(atol, rtol * largest) taken as zero (rtol defaults to eps * max(m, n), or 0 where
    atol > 0 is given). `hermitian` gives the same pseudo-inverse (here from the SVD too)."""
    a = as_tensor(A)
    if a.ndim < 2 or a.dtype.kind not in "fc":
        raise RuntimeError(f"linalg.pinv({scalar_type(a.dtype)}{list(a.shape)}): expected a "
                           f"tensor with 2 or more dimensions of float, double, cfloat or "
                           f"cdouble types")
    if rtol is None:
        eps = float(np.finfo(np.dtype(str(a.dtype))).eps)
        rtol = 0.0 if atol is not None and atol > 0 else eps * max(a.shape[-2:])
    return apply(D.PINV, a, atol=float(atol or 0.0), rtol=float(rtol))


def pinverse(input: Any, rcond: float = 1e-15) -> Tensor:  # noqa: A002
    """`torch.pinverse`: `js.linalg.pinv` with `rtol=rcond`."""
    return linalg_pinv(input, rtol=rcond)


# ------------------------------------------------------------------ no LU
def _no_lu(name: str) -> Callable[..., Any]:
    def refused(*args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(
            f"{name}: jaxstream has no LU factorization. Solve systems with js.linalg.solve, "
            f"invert with js.linalg.inv, and take determinants with js.linalg.det or "
            f"js.linalg.slogdet (a Cholesky factorization, js.linalg.cholesky, serves "
            f"symmetric positive-definite matrices)")

    refused.__name__ = refused.__qualname__ = name
    refused.__doc__ = f"Refused: `{name}` needs an LU factorization, which jaxstream lacks."
    return refused


lu, lu_solve, lu_unpack = _no_lu("lu"), _no_lu("lu_solve"), _no_lu("lu_unpack")
inverse = inv  # torch.inverse; torch.det is js.linalg.det

METHODS: dict[str, Any] = {
    "slogdet": slogdet, "logdet": logdet, "cholesky": cholesky,
    "cholesky_solve": cholesky_solve, "cholesky_inverse": cholesky_inverse, "qr": qr,
    "svd": svd, "pinverse": pinverse, "lu": lu, "lu_solve": lu_solve,
}
