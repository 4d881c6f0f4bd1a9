"""The op table of `js.linalg`'s det, inv and solve, each its backend's own kernel
(`xp.linalg`: NumPy's, JAX's or CuPy's).

Same conventions as `rules.py`. The vjps are the standard ones, written in jaxstream ops
(INV and SOLVE among them), so gradients go to any order where the matrix is invertible:
d det = det * A^-T, d inv = -Y^T g Y^T, and for X = solve(A, B) the gradient of B is
solve(A^T, g) and that of A minus it times X^T.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..tensor import Tensor
from .dispatch import apply
from .opdef import OpContext, OpDef


# ------------------------------------------------------------------ kernels
def _det(xp: Any, a: Any) -> Any:
    return xp.linalg.det(a)


def _inv(xp: Any, a: Any) -> Any:
    return xp.linalg.inv(a)


def _solve(xp: Any, a: Any, b: Any, vector: bool) -> Any:
    """X with A X = B, for matrices B or (`vector`) a batch of vectors B."""
    if vector:
        return xp.linalg.solve(a, b[..., None])[..., 0]
    return xp.linalg.solve(a, b)


# ------------------------------------------------------------------ vjps
def matrix_transpose(t: Tensor) -> Tensor:
    return t.swapaxes(-1, -2)


def _ddet(g: Tensor, ctx: OpContext) -> Tensor:
    scale = (g * ctx.output).reshape(tuple(g.shape) + (1, 1))
    return scale * matrix_transpose(apply(INV, ctx.inputs[0]))


def _dinv(g: Tensor, ctx: OpContext) -> Tensor:
    y = matrix_transpose(ctx.output)
    return -(y @ g @ y)


def _dsolve(g: Tensor, ctx: OpContext, needs: Sequence[bool]) -> list[Tensor | None]:
    """Both gradients from one solve with A^T (joint: A's reads B's)."""
    vector = ctx.params["vector"]
    grad_b = apply(SOLVE, matrix_transpose(ctx.inputs[0]), g, vector=vector)
    if not needs[0]:
        return [None, grad_b]
    x = ctx.output
    outer = grad_b.unsqueeze(-1) * x.unsqueeze(-2) if vector else grad_b @ matrix_transpose(x)
    return [-outer, grad_b if needs[1] else None]


# ------------------------------------------------------------------ the table
# fmt: off
DET = OpDef("linalg.det", "LinalgDetBackward0", _det, _ddet, save_inputs=(0,), save_output=True)
INV = OpDef("linalg.inv", "LinalgInvExBackward0", _inv, _dinv, save_output=True)
SOLVE = OpDef("linalg.solve", "LinalgSolveExBackward0", _solve, joint_grads=_dsolve,
              save_inputs=(0,), save_output=True)
# fmt: on
