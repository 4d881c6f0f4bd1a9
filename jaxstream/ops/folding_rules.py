"""The op table of im2col (`F.unfold`), col2im (`F.fold`) and `Tensor.unfold`, each a
gather at positions the geometry fixes and its adjoint, a scatter-add done as a gather
(Note [Scatter-adds as gathers] in gathering.py): each pair's vjps are each other, so
gradients go to any order. Their nodes are PyTorch's (`Im2ColBackward0`,
`Col2ImBackward0`, `UnfoldBackward0`, `UnfoldBackwardBackward0`).

Same conventions as `rules.py`. The params of the 2-d pair: `kernel`, `dilation`,
`padding` (per side) and `stride` per spatial axis, and col2im's `output_size`; those of
`Tensor.unfold`'s pair: `axis`, `size`, `step`, and the backward's `length` along `axis`.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import numpy as np

from ..tensor import Tensor
from .dispatch import apply
from .gathering import gathering_table, scatter_as_gather
from .opdef import OpContext, OpDef
from .pooling_rules import window_positions


@functools.lru_cache(maxsize=256)
def block_positions(sizes: tuple, kernel: tuple, stride: tuple, padding: tuple,
                    dilation: tuple) -> tuple[np.ndarray, np.ndarray]:
    """In im2col's order (taps major, then blocks), the flat index in the plane of the
    element each tap of each block reads, or the plane's size where it reads padding (the
    zero put after the plane); and which of them land on each element of the plane."""
    flat, _ = window_positions(sizes, kernel, stride, tuple((p, p) for p in padding),
                                dilation)
    by_tap = np.moveaxis(flat, -1, 0).reshape(-1)  # (taps, *blocks), flattened
    plane = math.prod(sizes)
    return np.where(by_tap < 0, plane, by_tap), gathering_table(by_tap, plane)


# ------------------------------------------------------------------ kernels
def _im2col(xp: Any, x: Any, kernel: tuple, dilation: tuple, padding: tuple,
            stride: tuple) -> Any:
    """(*batch, C, H, W) -> (*batch, C * kH * kW, blocks): every block's taps, zero in the
    padding."""
    lead, taps = x.shape[:-2], math.prod(kernel)
    reads, _ = block_positions(x.shape[-2:], kernel, stride, padding, dilation)
    plane = xp.reshape(x, lead + (math.prod(x.shape[-2:]),))
    plane = xp.concat([plane, xp.zeros(lead + (1,), dtype=x.dtype)], axis=-1)
    picked = xp.take(plane, xp.asarray(reads), axis=len(lead))
    return xp.reshape(picked, lead[:-1] + (lead[-1] * taps, reads.size // taps))


def _col2im(xp: Any, cols: Any, output_size: tuple, kernel: tuple, dilation: tuple,
            padding: tuple, stride: tuple) -> Any:
    """(*batch, C * kH * kW, blocks) -> (*batch, C, H, W): each element the sum of the
    taps that read it."""
    _, table = block_positions(output_size, kernel, stride, padding, dilation)
    lead, count = cols.shape[:-2], math.prod(kernel)
    taps = xp.reshape(cols, lead + (cols.shape[-2] // count, count * cols.shape[-1]))
    summed = scatter_as_gather(xp, taps, table, len(lead) + 1)
    return xp.reshape(summed, summed.shape[:-1] + output_size)


def _windows_along(xp: Any, a: Any, axis: int, size: int, step: int) -> Any:
    """`Tensor.unfold`: `a` with `axis` cut into windows of `size` every `step`, each
    window along a new last axis."""
    reads, _ = block_positions(a.shape[axis:axis + 1], (size,), (step,), (0,), (1,))
    picked = xp.take(a, xp.asarray(reads), axis=axis)
    windows = (a.shape[axis] - size) // step + 1
    split = xp.reshape(picked, a.shape[:axis] + (size, windows) + a.shape[axis + 1:])
    order = (*range(axis), *range(axis + 1, a.ndim + 1), axis)
    return xp.permute_dims(split, order)


def _windows_along_adjoint(xp: Any, g: Any, axis: int, size: int, step: int,
                           length: int) -> Any:
    """Each element of the unfolded axis (of `length`) the sum of the window places that
    read it."""
    _, table = block_positions((length,), (size,), (step,), (0,), (1,))
    last = g.ndim - 1
    order = (*range(axis), last, *range(axis, last))
    taps = xp.permute_dims(g, order)
    merged = xp.reshape(taps, taps.shape[:axis] + (size * taps.shape[axis + 1],)
                        + taps.shape[axis + 2:])
    return scatter_as_gather(xp, merged, table, axis)


# ------------------------------------------------------------------ vjps
def _dim2col(g: Tensor, ctx: OpContext) -> Tensor:
    return apply(COL2IM, g, output_size=tuple(ctx.shapes[0][-2:]), **ctx.params)


def _dcol2im(g: Tensor, ctx: OpContext) -> Tensor:
    params = {k: v for k, v in ctx.params.items() if k != "output_size"}
    return apply(IM2COL, g, **params)


def _dunfold(g: Tensor, ctx: OpContext) -> Tensor:
    return apply(UNFOLD_BACKWARD, g, **ctx.params, length=ctx.shapes[0][ctx.params["axis"]])


def _dunfold_backward(g: Tensor, ctx: OpContext) -> Tensor:
    params = {k: v for k, v in ctx.params.items() if k != "length"}
    return apply(UNFOLD, g, **params)


# ------------------------------------------------------------------ the table
# fmt: off
IM2COL = OpDef("im2col", "Im2ColBackward0", _im2col, _dim2col)
COL2IM = OpDef("col2im", "Col2ImBackward0", _col2im, _dcol2im)
UNFOLD = OpDef("unfold", "UnfoldBackward0", _windows_along, _dunfold, view=True)
UNFOLD_BACKWARD = OpDef("unfold_backward", "UnfoldBackwardBackward0", _windows_along_adjoint,
                        _dunfold_backward)
# fmt: on
