"""The op table of the products PyTorch records as one node: cross, addmv, addr, addbmm,
block_diag and matrix_exp.

Same conventions as `rules.py`: each vjp is written in jaxstream ops (most through the op
itself: the gradient of a cross product is a cross product, that of a matrix exponential
the exponential of a block matrix), so gradients go to any order. The matrix products run
`linalg_rules`' kernels, and so take `js.get_float32_matmul_precision()` on JAX.

Note [The matrix exponential by scaling and squaring]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
exp(A) is Higham's degree-13 Padé approximant of exp(A / 2^s), squared s times, with s the
least that brings A's 1-norm under 5.37 (s for each matrix of a batch). A loop's length
must be known when the kernel compiles, so the kernel squares `squarings` times and keeps
each square only where a matrix still needs it; `squarings` is the batch's largest s where
the values can be read, and `SQUARINGS_IN_A_TRACE` inside a trace, which serves matrices of
1-norm up to 5.37 * 2^32 (about 2e10). The gradient is the exponential of the block matrix
[[A^T, G], [0, A^T]] with G scaled to entries of at most 1 (the block is linear in G, so
the result is scaled back): its 1-norm is at most A's plus n, which bounds its squarings
without reading any value, so a backward compiles as few of them as the forward.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..tensor import Tensor
from . import linalg_rules as L
from . import shape_ops as S
from .creation import zeros_like
from .dispatch import apply
from .matrix_rules import matrix_transpose
from .opdef import OpContext, OpDef

SQUARINGS_IN_A_TRACE = 32
_PADE_13 = (64764752532480000.0, 32382376266240000.0, 7771770303897600.0, 1187353796428800.0,
            129060195264000.0, 10559470521600.0, 670442572800.0, 33522128640.0, 1323241920.0,
            40840800.0, 960960.0, 16380.0, 182.0, 1.0)
PADE_13_REACH = 5.371920351148152
"""The largest 1-norm at which the degree-13 Padé approximant is exact in float64."""


# ------------------------------------------------------------------ kernels
def _matmul(xp: Any, a: Any, b: Any) -> Any:
    return L.MATMUL.kernel(xp, a, b)


def _cross(xp: Any, a: Any, b: Any, axis: int) -> Any:
    a, b = xp.broadcast_arrays(a, b)
    return xp.linalg.cross(a, b, axis=axis)


def _addmv(xp: Any, x: Any, mat: Any, vec: Any, beta: float, alpha: float) -> Any:
    return L.ADDMM.kernel(xp, x, mat, vec, beta=beta, alpha=alpha)


def _addr(xp: Any, x: Any, vec1: Any, vec2: Any, beta: float, alpha: float) -> Any:
    return L.ADDMM.kernel(xp, x, vec1[:, None], vec2[None, :], beta=beta, alpha=alpha)


def _addbmm(xp: Any, x: Any, batch1: Any, batch2: Any, beta: float, alpha: float) -> Any:
    """`beta * x + alpha * sum_b batch1[b] @ batch2[b]`, the sum one product of the batches
    laid side by side."""
    count, rows, inner = batch1.shape
    side_by_side = xp.reshape(xp.permute_dims(batch1, (1, 0, 2)), (rows, count * inner))
    stacked = xp.reshape(batch2, (count * inner, batch2.shape[-1]))
    return L.ADDMM.kernel(xp, x, side_by_side, stacked, beta=beta, alpha=alpha)


def _block_diag(xp: Any, *blocks: Any, dtype: Any) -> Any:
    """The matrices `blocks` along the diagonal of one zero matrix."""
    width = sum(b.shape[1] for b in blocks)
    rows, left = [], 0
    for b in blocks:
        right = width - left - b.shape[1]
        rows.append(xp.concat([xp.zeros((b.shape[0], left), dtype=dtype), xp.astype(b, dtype),
                               xp.zeros((b.shape[0], right), dtype=dtype)], axis=1))
        left += b.shape[1]
    return xp.concat(rows, axis=0)


def _pade_13(xp: Any, a: Any) -> Any:
    """The degree-13 Padé approximant of exp(a), for matrices of 1-norm at most 5.37."""
    b = _PADE_13
    eye = xp.eye(a.shape[-1], dtype=a.dtype)
    a2 = _matmul(xp, a, a)
    a4 = _matmul(xp, a2, a2)
    a6 = _matmul(xp, a4, a2)
    odd = _matmul(xp, a6, b[13] * a6 + b[11] * a4 + b[9] * a2)
    u = _matmul(xp, a, odd + b[7] * a6 + b[5] * a4 + b[3] * a2 + b[1] * eye)
    v = _matmul(xp, a6, b[12] * a6 + b[10] * a4 + b[8] * a2) + b[6] * a6 + b[4] * a4 + \
        b[2] * a2 + b[0] * eye
    return xp.linalg.solve(v - u, v + u)


def _matrix_exp(xp: Any, a: Any, squarings: int) -> Any:
    """exp(a) for a batch of square matrices (Note [The matrix exponential by scaling and
    squaring])."""
    norm = xp.max(xp.sum(xp.abs(a), axis=-2), axis=-1)
    need = xp.ceil(xp.log2(xp.maximum(norm, PADE_13_REACH) / PADE_13_REACH))
    need = xp.minimum(need, float(squarings))[..., None, None]
    r = _pade_13(xp, a / xp.astype(2.0 ** need, a.dtype))
    for k in range(squarings):
        r = xp.where(need > k, _matmul(xp, r, r), r)
    return r


def squarings_with(squared: int, size: int) -> int:
    """The squarings of a matrix whose 1-norm exceeds that of one needing `squared` by at
    most `size` (Note [The matrix exponential by scaling and squaring])."""
    if squared >= SQUARINGS_IN_A_TRACE:
        return SQUARINGS_IN_A_TRACE
    return min(SQUARINGS_IN_A_TRACE, math.ceil(math.log2(2.0**squared + size / PADE_13_REACH)))


def squarings(values: np.ndarray | None) -> int:
    """How often the matrices `values` must be squared (Note [The matrix exponential by
    scaling and squaring]): `SQUARINGS_IN_A_TRACE` where they are not known."""
    if values is None:
        return SQUARINGS_IN_A_TRACE
    if not values.size:
        return 0
    norm = float(np.max(np.sum(np.abs(values), axis=-2)))
    if not math.isfinite(norm):
        return SQUARINGS_IN_A_TRACE
    return max(0, math.ceil(math.log2(max(norm, PADE_13_REACH) / PADE_13_REACH)))


# ------------------------------------------------------------------ vjps
def _dmatrix_exp(g: Tensor, ctx: OpContext) -> Tensor:
    """The adjoint of exp's differential at A applied to g: the top right block of
    exp([[A^T, g], [0, A^T]]), as PyTorch computes it."""
    at = matrix_transpose(ctx.inputs[0])
    n = at.shape[-1]
    scale = g.abs().amax((-2, -1), keepdims=True).clip(min=1)
    block = S.concat([S.concat([at, g / scale], -1), S.concat([zeros_like(at), at], -1)], -2)
    squared = squarings_with(ctx.params["squarings"], n)
    return apply(MATRIX_EXP, block, squarings=squared)[..., :n, n:] * scale


def _dblock_diag(g: Tensor, ctx: OpContext, needs: Sequence[bool]) -> list[Tensor | None]:
    """Each block's gradient: its own place in g."""
    grads: list[Tensor | None] = []
    top = left = 0
    for shape, need in zip(ctx.shapes, needs, strict=True):
        grads.append(g[top:top + shape[0], left:left + shape[1]] if need else None)
        top, left = top + shape[0], left + shape[1]
    return grads


# fmt: off
CROSS = OpDef("linalg.cross", "LinalgCrossBackward0", _cross,
              lambda g, ctx: apply(CROSS, ctx.inputs[1], g, axis=ctx.params["axis"]),
              lambda g, ctx: apply(CROSS, g, ctx.inputs[0], axis=ctx.params["axis"]),
              save_for=((1,), (0,)))
ADDMV = OpDef("addmv", "AddmvBackward0", _addmv,
              lambda g, ctx: L.scaled_by(g, ctx.params["beta"]),
              lambda g, ctx: L.scaled_by(g.unsqueeze(-1) * ctx.inputs[2], ctx.params["alpha"]),
              lambda g, ctx: L.scaled_by(matrix_transpose(ctx.inputs[1]) @ g, ctx.params["alpha"]),
              save_for=((), (2,), (1,)))
ADDR = OpDef("addr", "AddrBackward0", _addr,
             lambda g, ctx: L.scaled_by(g, ctx.params["beta"]),
             lambda g, ctx: L.scaled_by(g @ ctx.inputs[2], ctx.params["alpha"]),
             lambda g, ctx: L.scaled_by(matrix_transpose(g) @ ctx.inputs[1], ctx.params["alpha"]),
             save_for=((), (2,), (1,)))
ADDBMM = OpDef("addbmm", "AddbmmBackward0", _addbmm,
               lambda g, ctx: L.scaled_by(g, ctx.params["beta"]),
               lambda g, ctx: L.scaled_by(g @ matrix_transpose(ctx.inputs[2]), ctx.params["alpha"]),
               lambda g, ctx: L.scaled_by(matrix_transpose(ctx.inputs[1]) @ g, ctx.params["alpha"]),
               save_for=((), (2,), (1,)))
BLOCK_DIAG = OpDef("block_diag", "BlockDiagBackward0", _block_diag, joint_grads=_dblock_diag)
MATRIX_EXP = OpDef("linalg.matrix_exp", "LinalgMatrixExpBackward0", _matrix_exp,
                   _dmatrix_exp, save_inputs=(0,))
# fmt: on
