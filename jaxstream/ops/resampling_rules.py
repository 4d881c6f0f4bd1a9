"""The op table of padding and interpolation: a constant pad, and a resampling (each output
element a weighted sum of a few input elements along each axis) with its adjoint.

Same conventions as `rules.py`. A constant pad's gradient is the pad with the widths
negated (cropping where it padded), PyTorch's own, so that it goes to any order.

Note [Resampling as taps along axes]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
The reflect, replicate and circular pads and nearest and (bi/tri)linear interpolation are
each, along each axis they change, the same thing: output position `i` reads input
positions `indices[i]` of a few taps, each times its `weights[i]` (no weights for a pad or
nearest: a plain gather, exact whatever the values). The axes are separable, so `RESAMPLE`
applies them one after the other (`taps`: (axis, ((indices, weights or None), ...)) per
axis, plain tuples, so that JAX compiles one kernel per geometry); bilinear is linear
along the height, then the width. Its adjoint, `RESAMPLE_ADJOINT`, adds each tap's
weighted gradient back where it was read (Note [Scatter-adds as gathers] in
gathering.py), axis by axis in the reverse order. Each is the other's vjp, so gradients
go to any order. The node names are the caller's (`node`: PyTorch's name of the
forward's node; the adjoint's is its backward's).
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from ..tensor import Tensor
from .dispatch import apply
from .gathering import gathering_table, scatter_as_gather
from .opdef import OpContext, OpDef


# ------------------------------------------------------------------ kernels
def _constant_pad(xp: Any, a: Any, widths: tuple, value: Any) -> Any:
    """`a` with (lo, hi) elements of `value` at the ends of each axis (a negative width crops)."""
    cropped = a[tuple(slice(max(-lo, 0), n - max(-hi, 0)) for (lo, hi), n in
                      zip(widths, a.shape, strict=True))]
    return xp.pad(cropped, [(max(lo, 0), max(hi, 0)) for lo, hi in widths],
                  constant_values=value)


def _along(xp: Any, weights: tuple, axis: int, a: Any) -> Any:
    """`weights` as an array that multiplies `a` along `axis`."""
    return xp.reshape(xp.asarray(weights, dtype=a.dtype), (-1,) + (1,) * (a.ndim - axis - 1))


def _resample(xp: Any, a: Any, taps: tuple, node: str) -> Any:
    for axis, axis_taps in taps:
        total = None
        for indices, weights in axis_taps:
            term = xp.take(a, xp.asarray(indices), axis=axis)
            term = term if weights is None else term * _along(xp, weights, axis, term)
            total = term if total is None else total + term
        a = total
    return a


@functools.lru_cache(maxsize=256)
def _landing(axis_taps: tuple, size: int) -> np.ndarray:
    """Which of an axis's weighted values (the taps' one after the other) land on each of
    its `size` input positions (Note [Scatter-adds as gathers] in gathering.py)."""
    return gathering_table(np.concatenate([np.asarray(ids) for ids, _ in axis_taps]), size)


def _resample_adjoint(xp: Any, g: Any, taps: tuple, node: str, shape: tuple) -> Any:
    for axis, axis_taps in reversed(taps):
        values = xp.concat([g if w is None else g * _along(xp, w, axis, g) for _, w in axis_taps],
                           axis=axis)
        g = scatter_as_gather(xp, values, _landing(axis_taps, shape[axis]), axis)
    return g


def _adjoint_name(args: tuple, params: dict) -> str:
    return params["node"].removesuffix("0") + "Backward0"


# ------------------------------------------------------------------ vjps
def _dconstant_pad(g: Tensor, ctx: OpContext) -> Tensor:
    widths = tuple((-lo, -hi) for lo, hi in ctx.params["widths"])
    return apply(CONSTANT_PAD, g, widths=widths, value=0.0)


def _dresample(g: Tensor, ctx: OpContext) -> Tensor:
    return apply(RESAMPLE_ADJOINT, g, **ctx.params, shape=ctx.shapes[0])


def _dresample_adjoint(g: Tensor, ctx: OpContext) -> Tensor:
    return apply(RESAMPLE, g, taps=ctx.params["taps"], node=ctx.params["node"])


# ------------------------------------------------------------------ the table
# fmt: off
CONSTANT_PAD = OpDef("pad", "ConstantPadNdBackward0", _constant_pad, _dconstant_pad)
RESAMPLE = OpDef("resample", lambda args, params: params["node"], _resample, _dresample)
RESAMPLE_ADJOINT = OpDef("resample_backward", _adjoint_name, _resample_adjoint,
                         _dresample_adjoint)
# fmt: on
