"""The op table of PyTorch's everyday Tensor utilities that no other table holds: `t()`, the
views `narrow`/`select` and `diagonal`, `diag_embed`, `rot90`, `take`, `masked_select` and
`vdot`, each under PyTorch's node name.

Same conventions as `rules.py`. The selections (`narrow`, `select`, `take`,
`masked_select`) read `a[index]` with an index built on the host, as `rules.INDEX` does,
and take its vjp (`rules.INDEX_ADD` of the gradient at that index): gradients to any order,
repeated indices adding up. `narrow` and `select` are views of their input, as in
PyTorch, and so is `diagonal` (Note [Views and in-place ops] in views.py): the view's
region in its base is found by running these kernels on the host. `DIAGONAL` and
`EMBED_DIAGONAL` are each other's adjoint, so their gradients go to any order.
"""

from __future__ import annotations

from typing import Any

from .dispatch import apply
from .opdef import OpDef
from .rules import INDEX
from .shapes import inverse_permutation, swapped_axes


def diagonal_length(rows: int, cols: int, offset: int) -> int:
    """How many elements the `offset` diagonal of a rows x cols matrix has."""
    if offset >= 0:
        return max(0, min(rows, cols - offset))
    return max(0, min(rows + offset, cols))


def _matrix_dims_last(dim1: int, dim2: int, ndim: int) -> tuple:
    """The permutation that moves `dim1` and `dim2` (rows, columns) after the other dims."""
    return (*(d for d in range(ndim) if d not in (dim1, dim2)), dim1, dim2)


# ------------------------------------------------------------------ kernels
def _t(xp: Any, a: Any) -> Any:
    return xp.permute_dims(a, tuple(reversed(range(a.ndim))))


def _diagonal(xp: Any, a: Any, offset: int, dim1: int, dim2: int) -> Any:
    """The `offset` diagonal of the matrices along `dim1` (rows) and `dim2` (columns),
    as a last dim after the others."""
    a = xp.permute_dims(a, _matrix_dims_last(dim1, dim2, a.ndim))
    n = diagonal_length(a.shape[-2], a.shape[-1], offset)
    rows, cols = xp.arange(n) + max(-offset, 0), xp.arange(n) + max(offset, 0)
    return a[..., rows, cols]


def _embed_diagonal(xp: Any, v: Any, offset: int, dim1: int, dim2: int, shape: tuple) -> Any:
    """Zeros of `shape` with `v`'s last dim on the `offset` diagonal of the matrices along
    `dim1` and `dim2`: each row (offset >= 0) or column (offset < 0) of the diagonal's
    matrix takes its own element of `v`, padded with zeros to that length."""
    order = _matrix_dims_last(dim1, dim2, len(shape))
    rows, cols = shape[dim1], shape[dim2]
    length = rows if offset >= 0 else cols
    batch = v.shape[:-1]
    padding = xp.zeros((*batch, length - v.shape[-1]), dtype=v.dtype)
    values = xp.concat([v, padding], axis=-1)
    placed = xp.reshape(values, (*batch, *((rows, 1) if offset >= 0 else (1, cols))))
    on_diagonal = xp.eye(rows, cols, k=offset, dtype=xp.bool)
    moved = xp.where(on_diagonal, placed, xp.zeros((), dtype=v.dtype))
    return xp.permute_dims(moved, inverse_permutation(order))


def _rot90(xp: Any, a: Any, k: int, dims: tuple) -> Any:
    """`a` turned k quarter turns from `dims[0]` towards `dims[1]`: a flip and a swap."""
    k %= 4
    if k == 0:
        return xp.asarray(a, copy=True)
    if k == 2:
        return xp.flip(a, axis=dims)
    flipped = xp.flip(a, axis=dims[1] if k == 1 else dims[0])
    return xp.permute_dims(flipped, swapped_axes(a.ndim, *dims))


def _vdot(xp: Any, a: Any, b: Any) -> Any:
    """The dot product with the first vector conjugated (the array API's `vecdot`)."""
    return xp.vecdot(a, b)


# ------------------------------------------------------------------ vjps
_dt = lambda g, ctx: apply(T, g)
_ddiagonal = lambda g, ctx: apply(EMBED_DIAGONAL, g, **ctx.params, shape=ctx.shapes[0])
_dembed = lambda g, ctx: apply(DIAGONAL, g, **{k: ctx.params[k] for k in _DIAGONAL_PARAMS})
_drot90 = lambda g, ctx: apply(ROT90, g, k=-ctx.params["k"], dims=ctx.params["dims"])
_DIAGONAL_PARAMS = ("offset", "dim1", "dim2")

# ------------------------------------------------------------------ the table
# fmt: off
T = OpDef("t", "TBackward0", _t, _dt, view=True)
SLICE = OpDef("narrow", "SliceBackward0", INDEX.kernel, *INDEX.grads, view=True,
              per_call_params=True)
SELECT = OpDef("select", "SelectBackward0", INDEX.kernel, *INDEX.grads, view=True,
               per_call_params=True)
DIAGONAL = OpDef("diagonal", "DiagonalBackward0", _diagonal, _ddiagonal, view=True)
EMBED_DIAGONAL = OpDef("diag_embed", "DiagEmbedBackward0", _embed_diagonal, _dembed)
ROT90 = OpDef("rot90", "Rot90Backward0", _rot90, _drot90)
TAKE = OpDef("take", "TakeBackward0", INDEX.kernel, *INDEX.grads, per_call_params=True)
MASKED_SELECT = OpDef("masked_select", "MaskedSelectBackward0", INDEX.kernel, *INDEX.grads,
                      per_call_params=True)
VDOT = OpDef("vdot", "VdotBackward0", _vdot, lambda g, ctx: g * ctx.inputs[1],
             lambda g, ctx: g * ctx.inputs[0], save_for=((1,), (0,)))
# fmt: on
