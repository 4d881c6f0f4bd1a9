"""The op table of the shape ops: reshape, permutations, squeeze, flip, expand, repeat,
concatenate, stack, and the bit reinterpretation `view(dtype)`.

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


def _repeat(xp: Any, a: Any, reps: tuple) -> Any:
    """PyTorch's `repeat`: `a` tiled `reps` times, new leading axes first (NumPy's `tile`)."""
    return xp.tile(xp.reshape(a, (1,) * (len(reps) - a.ndim) + a.shape), reps)


def _bitcast(xp: Any, a: Any, dtype: Any) -> Any:
    """`a`'s bytes read as `dtype`; the last axis scales by the ratio of the item sizes."""
    return a.view(dtype)


def _squeeze(xp: Any, a: Any, axis: Any) -> Any:
    """`a` without its axes of length 1 among `axis` (None: all of them); PyTorch's squeeze
    leaves the others."""
    if axis is not None:
        axis = tuple(d for d in ((axis,) if isinstance(axis, int) else axis) if a.shape[d] == 1)
    return xp.squeeze(a, axis=axis)


def _squeeze_name(args: tuple, params: dict) -> str:
    axis = params["axis"]
    return "SqueezeBackward0" if axis is None else f"SqueezeBackward{1 + isinstance(axis, tuple)}"


# ------------------------------------------------------------------ vjps
_dpermute = lambda g, ctx: apply(PERMUTE, g, axes=inverse_permutation(ctx.params["axes"]))
_dswapaxes = lambda g, ctx: g.swapaxes(ctx.params["axis1"], ctx.params["axis2"])
_dreshape = lambda g, ctx: g.reshape(ctx.shapes[0])
_dflip = lambda g, ctx: apply(FLIP, g, axis=ctx.params["axis"])


def _drepeat(g: Tensor, ctx: OpContext) -> Tensor:
    """The sum of the gradient's tiles: each axis split in (repeats, own length), the
    repeats summed away."""
    reps, shape = ctx.params["reps"], ctx.shapes[0]
    own = (1,) * (len(reps) - len(shape)) + tuple(shape)
    tiles = g.reshape(tuple(n for pair in zip(reps, own, strict=True) for n in pair))
    return tiles.sum(axis=tuple(range(0, 2 * len(reps), 2))).reshape(shape)


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
SQUEEZE = OpDef("squeeze", _squeeze_name, _squeeze, _dreshape, view=True)
EXPAND_DIMS = OpDef("expand_dims", "UnsqueezeBackward0", XP.expand_dims, _dreshape, view=True)
FLIP = OpDef("flip", "FlipBackward0", XP.flip, _dflip)
EXPAND = OpDef("broadcast_to", "ExpandBackward0", XP.broadcast_to, same, view=True)
REPEAT = OpDef("repeat", "RepeatBackward0", _repeat, _drepeat)
CONCAT = OpDef("concatenate", "CatBackward0", _concat, joint_grads=_split)
STACK = OpDef("stack", "StackBackward0", _stack, joint_grads=_unstack)
# fmt: on

# Not differentiable (PyTorch's `view(dtype)` to another dtype has no gradient either).
BITCAST = OpDef("view", None, _bitcast)
