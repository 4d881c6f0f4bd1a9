"""The op table of the ops on a tensor's structure: tril/triu, roll, the diagonal of a
matrix and the matrix of a diagonal, trace.

Same conventions as `rules.py`. `DIAGONAL` and `DIAG_EMBED` are each other's adjoint, so
each one's vjp is the other and their gradients go to any order.
"""

from __future__ import annotations

from typing import Any

from .dispatch import apply
from .opdef import OpDef
from .rules import XP


# ------------------------------------------------------------------ kernels
def _diagonal(xp: Any, a: Any, offset: int) -> Any:
    """The `offset` diagonal of the matrix `a` (above the main one for offset > 0)."""
    return xp.diagonal(a, offset=offset)


def _diag_embed(xp: Any, v: Any, offset: int, shape: tuple) -> Any:
    """A zero matrix of `shape` with `v` on its `offset` diagonal: where that diagonal is,
    each row (offset >= 0) or column (offset < 0) holds its own element of `v`."""
    rows, cols = shape
    on_diagonal = xp.eye(rows, cols, k=offset, dtype=xp.bool)
    length = rows if offset >= 0 else cols
    values = xp.concat([v, xp.zeros(length - v.shape[0], dtype=v.dtype)])
    placed = xp.reshape(values, (rows, 1)) if offset >= 0 else xp.reshape(values, (1, cols))
    return xp.where(on_diagonal, placed, xp.zeros((), dtype=v.dtype))


def _roll(xp: Any, a: Any, shifts: tuple, dims: tuple | None) -> Any:
    """`a` rolled by `shifts` along `dims` (None: the flattened tensor, then reshaped)."""
    if dims is None:
        return xp.reshape(xp.roll(xp.reshape(a, (-1,)), shifts[0]), a.shape)
    return xp.roll(a, shifts, axis=dims)


def _trace(xp: Any, a: Any) -> Any:
    return xp.sum(xp.diagonal(a))


# ------------------------------------------------------------------ vjps
_dtril = lambda g, ctx: apply(TRIL, g, k=ctx.params["k"])
_dtriu = lambda g, ctx: apply(TRIU, g, k=ctx.params["k"])
_droll = lambda g, ctx: apply(ROLL, g, shifts=tuple(-s for s in ctx.params["shifts"]),
                              dims=ctx.params["dims"])
_ddiagonal = lambda g, ctx: apply(DIAG_EMBED, g, offset=ctx.params["offset"],
                                  shape=ctx.shapes[0])
_ddiag_embed = lambda g, ctx: apply(DIAGONAL, g, offset=ctx.params["offset"])
_dtrace = lambda g, ctx: apply(DIAG_EMBED, g.broadcast_to((min(ctx.shapes[0]),)), offset=0,
                               shape=ctx.shapes[0])

# ------------------------------------------------------------------ the table
# fmt: off
TRIL = OpDef("tril", "TrilBackward0", XP.tril, _dtril)
TRIU = OpDef("triu", "TriuBackward0", XP.triu, _dtriu)
ROLL = OpDef("roll", "RollBackward0", _roll, _droll)
DIAGONAL = OpDef("diag", "DiagonalBackward0_copy", _diagonal, _ddiagonal)  # torch's name
DIAG_EMBED = OpDef("diag", "DiagEmbedBackward0", _diag_embed, _ddiag_embed)
TRACE = OpDef("trace", "TraceBackward0", _trace, _dtrace)
# fmt: on
