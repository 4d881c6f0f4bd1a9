"""The op table of the shape ops: reshape, permutations, squeeze, flip, concatenate, stack.

Same conventions as `rules.py`. Most of these are views of their input (`view=True`,
Note [Views and in-place ops] in views.py); their vjps move the gradient back into
the input's layout.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..tensor import Tensor
from .dispatch import apply
from .opdef import OpContext, OpDef
from .rules import XP, same
from .shapes import inverse_permutation, split_bounds, swapped_axes


# ------------------------------------------------------------------ kernels
def _concat(xp: Any, *arrays: Any, axis: int) -> Any:
    return xp.concat(arrays, axis=axis)


def _stack(xp: Any, *arrays: Any, axis: int) -> Any:
    return xp.stack(arrays, axis=axis)


def _swapaxes(xp: Any, a: Any, axis1: int, axis2: int) -> Any:
    return xp.permute_dims(a, swapped_axes(a.ndim, axis1, axis2))


def _squeeze_name(args: tuple, params: dict) -> str:
    axis = params["axis"]
    return "SqueezeBackward0" if axis is None else f"SqueezeBackward{1 + isinstance(axis, tuple)}"


# ------------------------------------------------------------------ vjps
_dpermute = lambda g, ctx: g.transpose(inverse_permutation(ctx.params["axes"]))
_dswapaxes = lambda g, ctx: g.swapaxes(ctx.params["axis1"], ctx.params["axis2"])
_dreshape = lambda g, ctx: g.reshape(ctx.shapes[0])
_dflip = lambda g, ctx: apply(FLIP, g, axis=ctx.params["axis"])


def _split(g: Tensor, ctx: OpContext, needs: Sequence[bool]) -> list[Tensor | None]:
    """Each input's slice of the gradient of a concatenation (joint: offsets add up)."""
    axis = ctx.params["axis"] % g.ndim
    bounds = split_bounds(ctx.shapes, axis)
    return [
        g[(slice(None),) * axis + (slice(start, stop),)] if need else None
        for (start, stop), need in zip(bounds, needs, strict=True)
    ]


def _unstack(g: Tensor, ctx: OpContext, needs: Sequence[bool]) -> list[Tensor | None]:
    """Each input's slice of the gradient of a stack (joint: any number of inputs)."""
    axis = ctx.params["axis"] % g.ndim
    return [g[(slice(None),) * axis + (i,)] if need else None for i, need in enumerate(needs)]


# ------------------------------------------------------------------ the table
# fmt: off
RESHAPE = OpDef("reshape", "ViewBackward0", XP.reshape, _dreshape, view=True)
PERMUTE = OpDef("transpose", "PermuteBackward0", XP.permute_dims, _dpermute, view=True)
SWAPAXES = OpDef("swapaxes", "TransposeBackward0", _swapaxes, _dswapaxes, view=True)
SQUEEZE = OpDef("squeeze", _squeeze_name, XP.squeeze, _dreshape, view=True)
EXPAND_DIMS = OpDef("expand_dims", "UnsqueezeBackward0", XP.expand_dims, _dreshape, view=True)
FLIP = OpDef("flip", "FlipBackward0", XP.flip, _dflip)
EXPAND = OpDef("broadcast_to", "ExpandBackward0", XP.broadcast_to, same)
CONCAT = OpDef("concatenate", "CatBackward0", _concat, joint_grads=_split)
STACK = OpDef("stack", "StackBackward0", _stack, joint_grads=_unstack)
# fmt: on
