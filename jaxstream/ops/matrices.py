"""`js.linalg`'s det, inv and solve (and the methods `det` and `inverse`), with PyTorch's
arguments, checks and messages; each runs its backend's own `linalg` kernel.

A singular matrix raises `LinAlgError` (a RuntimeError, as `torch.linalg.LinAlgError`) on
the NumPy and CuPy backends; JAX's kernels give inf or NaN instead, and so do they here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..tensor import Tensor, is_floating
from . import matrix_rules as M
from .dispatch import apply
from .dtype_names import scalar_type
from .operands import as_tensor


class LinAlgError(RuntimeError):
    """A matrix the operation needs invertible is singular (`torch.linalg.LinAlgError`)."""


def check_matrices(op: str, a: Tensor, name: str = "A", *, floating: bool = True,
                   square: bool = True) -> None:
    """PyTorch's checks of a batch of (`square`: square; `floating`: floating) matrices."""
    if floating and not is_floating(a.dtype):
        raise RuntimeError(f"{op}: Expected a floating point or complex tensor as input. Got "
                           f"{scalar_type(a.dtype)} (shape {a.shape}); cast it first, e.g. "
                           f"{name}.float()")
    if a.ndim < 2:
        raise RuntimeError(f"{op}: The input tensor {name} must have at least 2 dimensions. "
                           f"(got shape {a.shape})")
    if square and a.shape[-1] != a.shape[-2]:
        raise RuntimeError(f"{op}: {name} must be batches of square matrices, but they are "
                           f"{a.shape[-2]} by {a.shape[-1]} matrices")


def _invertible(op: str, what: str, run: Callable[[], Tensor]) -> Tensor:
    """`run()`, with the backend's error for a singular matrix as PyTorch's."""
    try:
        return run()
    except np.linalg.LinAlgError as err:
        raise LinAlgError(f"{op}: {what} because the input matrix is singular ({err}); a "
                          f"nearly singular one can be regularized first, e.g. "
                          f"A + eps * js.eye(n)") from err


def det(a: Tensor) -> Tensor:
    """The determinant of each square matrix of `a` (its last two dims)."""
    a = as_tensor(a)
    check_matrices("linalg.det", a)
    return apply(M.DET, a)


def inv(a: Tensor) -> Tensor:
    """The inverse of each square matrix of `a`; LinAlgError where one is singular."""
    a = as_tensor(a)
    check_matrices("linalg.inv", a)
    return _invertible("linalg.inv", "the inversion could not be completed",
                       lambda: apply(M.INV, a))


def solve(a: Tensor, b: Any, *, left: bool = True) -> Tensor:
    """X with `a @ X = b` (with `left=False`, `X @ a = b`), batches broadcast; `b` is a
    batch of vectors where it has one dim fewer than `a` and its shape is `a`'s without the
    last dim (or `b` is 1-d), as in PyTorch."""
    a = as_tensor(a)
    b = as_tensor(b, a)
    check_matrices("linalg.solve", a)
    if b.dtype != a.dtype:
        raise RuntimeError(
            f"linalg.solve: Expected A and B to have the same dtype, but found A of type "
            f"{scalar_type(a.dtype)} and B of type {scalar_type(b.dtype)} instead; cast one "
            f"first, e.g. B.to('{a.dtype}')"
        )
    vector = b.ndim == 1 or (b.ndim == a.ndim - 1 and b.shape == a.shape[:-1])
    if not left:
        if vector:
            raise RuntimeError("linalg.solve: Vector broadcasting of the left hand side is "
                               f"not supported for left=False (B of shape {b.shape})")
        return solve(a.swapaxes(-1, -2), b.swapaxes(-1, -2)).swapaxes(-1, -2)
    rows = b.shape[-1] if vector else b.shape[-2] if b.ndim > 1 else None
    if rows != a.shape[-1]:
        given = f"{b.shape[-1]}x1" if vector else "x".join(map(str, b.shape[-2:]))
        raise RuntimeError(f"linalg.solve: Incompatible shapes of A and B for the equation "
                           f"AX = B ({a.shape[-2]}x{a.shape[-1]} and {given})")
    return _invertible("torch.linalg.solve", "The solver failed",
                       lambda: apply(M.SOLVE, a, b, vector=vector))


METHODS: dict[str, Any] = {
    "det": det,
    "inverse": inv,
}
