"""The op table of pooling over the last 2 or 3 axes (as many as the kernel has): max
pooling as a gather at the windows' maxima and its scatter, average pooling as a window
sum and its spread; each pair is adjoint, so that each op's vjp is the other and
gradients go to any order. Their nodes are PyTorch's of that many axes
(`MaxPool3DWithIndicesBackward0` for three).

Same conventions as `rules.py`. The params: `kernel`, `stride`, `dilation` per spatial
axis, `padding` ((lo, hi) per axis: `ceil_mode`'s last window may reach past the padding,
so hi can be larger), and for the average the `divisors` of each output position, one
tuple per axis whose outer product is the divisor.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ..tensor import Tensor
from .dispatch import apply
from .gathering import gathering_table, scatter_as_gather
from .opdef import OpContext, OpDef
from .windows import convolve, input_gradient_padding, output_sizes, pad_dilated, windows


# ------------------------------------------------------------------ kernels
def _lowest(xp: Any, dtype: Any) -> Any:
    """What padding loses to in a maximum: -inf, or an integer dtype's least value."""
    return -math.inf if xp.isdtype(dtype, "real floating") else xp.iinfo(dtype).min


@functools.lru_cache(maxsize=256)
def window_positions(sizes: tuple, kernel: tuple, stride: tuple, padding: tuple,
                      dilation: tuple) -> tuple[np.ndarray, np.ndarray]:
    """For each output position and tap (flattened), the flat index in the plane of the
    input element it reads (-1 for padding), and which of those taps land on each element
    (Note [Scatter-adds as gathers] in gathering.py)."""
    outs = output_sizes(tuple(n + lo + hi for n, (lo, hi) in zip(sizes, padding, strict=True)),
                        kernel, stride, dilation)
    flat, inside = np.zeros((), np.int64), np.ones((), bool)
    for axis, (n, k, s, (lo, _), d, m) in enumerate(
            zip(sizes, kernel, stride, padding, dilation, outs, strict=True)):
        at = np.arange(m)[:, None] * s - lo + np.arange(k)[None, :] * d  # (outputs, taps)
        shape = [1] * (2 * len(kernel))
        shape[axis], shape[len(kernel) + axis] = m, k
        flat = flat * n + at.reshape(shape)
        inside = inside & ((at >= 0) & (at < n)).reshape(shape)
    flat = np.where(inside, flat, -1).reshape(outs + (-1,))
    return flat, gathering_table(flat.reshape(-1), math.prod(sizes))


def _max_pool_indices(xp: Any, x: Any, kernel: tuple, stride: tuple, padding: tuple,
                      dilation: tuple) -> Any:
    """The flat index in its plane of each window's first maximum in row-major order, or of
    its last NaN where it has one: PyTorch's `return_indices` (its scan takes a later
    element only when it is larger, or NaN)."""
    n = len(kernel)
    flat, _ = window_positions(x.shape[-n:], kernel, stride, padding, dilation)
    padded = pad_dilated(xp, x, padding, (1,) * n, _lowest(xp, x.dtype))
    taps = windows(xp, padded, kernel, stride, dilation)
    taps = xp.reshape(taps, taps.shape[:-n] + (-1,))
    hits = (taps == xp.max(taps, axis=-1, keepdims=True)) & xp.asarray(flat >= 0)
    first = xp.argmax(xp.astype(hits, xp.int8), axis=-1, keepdims=True)
    nans = xp.flip(xp.astype(taps != taps, xp.int8), axis=-1)
    last_nan = taps.shape[-1] - 1 - xp.argmax(nans, axis=-1, keepdims=True)
    chosen = xp.where(xp.max(nans, axis=-1, keepdims=True) > 0, last_nan, first)
    positions = xp.broadcast_to(xp.asarray(flat), taps.shape)
    return xp.squeeze(xp.take_along_axis(positions, chosen, axis=-1), axis=-1)


def _plane_rows(xp: Any, a: Any, n: int) -> Any:
    """`a` with its `n` spatial axes as one, each plane a row."""
    return xp.reshape(a, a.shape[:-n] + (-1,))


def _gather_at(xp: Any, x: Any, indices: Any, kernel: tuple, **geometry: Any) -> Any:
    n = len(kernel)
    picked = xp.take_along_axis(_plane_rows(xp, x, n), _plane_rows(xp, indices, n), axis=-1)
    return xp.reshape(picked, indices.shape)


def _scatter_to(xp: Any, g: Any, indices: Any, kernel: tuple, stride: tuple, padding: tuple,
                dilation: tuple, shape: tuple) -> Any:
    """Each value of `g` added at its plane's `indices` in zeros of `shape`: each window's
    taps hold its gradient at the tap its index names (zero elsewhere), and each element
    sums the taps that read it."""
    n = len(kernel)
    flat, landing = window_positions(shape[-n:], kernel, stride, padding, dilation)
    chosen = xp.expand_dims(indices, axis=-1) == xp.asarray(flat)
    taps = xp.where(chosen, xp.expand_dims(g, axis=-1), xp.zeros((), dtype=g.dtype))
    taps = xp.reshape(taps, g.shape[:-n] + (-1,))
    return xp.reshape(scatter_as_gather(xp, taps, landing, taps.ndim - 1), shape)


def _divisor(xp: Any, divisors: tuple, dtype: Any) -> Any:
    out = xp.ones((), dtype=dtype)
    for axis, counts in enumerate(divisors):
        shape = [1] * len(divisors)
        shape[axis] = len(counts)
        out = out * xp.reshape(xp.asarray(counts, dtype=dtype), tuple(shape))
    return out


def _window_sums(xp: Any, x: Any, kernel: tuple, stride: tuple, padding: tuple,
                 lhs_dilation: tuple) -> Any:
    """Each plane convolved with a kernel of ones (one channel, the planes as the batch)."""
    n = len(kernel)
    lead = x.shape[:-n]
    planes = xp.reshape(x, (-1, 1) + x.shape[-n:])
    ones = xp.ones((1, 1) + kernel, dtype=x.dtype)
    sums = convolve(xp, planes, ones, stride, padding, lhs_dilation, (1,) * n, 1)
    return xp.reshape(sums, lead + sums.shape[-n:])


def _avg_pool(xp: Any, x: Any, kernel: tuple, stride: tuple, padding: tuple,
              divisors: tuple) -> Any:
    unit = (1,) * len(kernel)
    return _window_sums(xp, x, kernel, stride, padding, unit) / _divisor(xp, divisors, x.dtype)


def _avg_pool_adjoint(xp: Any, g: Any, kernel: tuple, stride: tuple, padding: tuple,
                      divisors: tuple, shape: tuple) -> Any:
    """Each output's share of the gradient spread over its window: the window sum's input
    gradient (Note [Convolutions carry their own gradients] in windows.py)."""
    n = len(kernel)
    unit = (1,) * n
    spread = input_gradient_padding(padding, shape[-n:], g.shape[-n:], kernel,
                                    stride, unit, unit)
    return _window_sums(xp, g / _divisor(xp, divisors, g.dtype), kernel, unit, spread, stride)


# ------------------------------------------------------------------ vjps
_dmax_pool = lambda g, ctx: apply(MAX_POOL_ADJOINT, g, ctx.inputs[1], **ctx.params,
                                  shape=ctx.shapes[0])
_dmax_pool_adjoint = lambda g, ctx: apply(MAX_POOL, g, ctx.inputs[1], **_geometry(ctx))


def _davg_pool(g: Tensor, ctx: OpContext) -> Tensor:
    return apply(AVG_POOL_ADJOINT, g, **ctx.params, shape=ctx.shapes[0])


def _geometry(ctx: OpContext) -> dict:
    """An adjoint's params without the `shape` it restores."""
    return {name: value for name, value in ctx.params.items() if name != "shape"}


_davg_pool_adjoint = lambda g, ctx: apply(AVG_POOL, g, **_geometry(ctx))


# ------------------------------------------------------------------ the table
def _node(name: str) -> Callable[[tuple, dict], str]:
    """PyTorch's node `name` for as many pooled axes as the kernel has (2 or 3)."""
    return lambda args, params: name.format(len(params["kernel"]))


# fmt: off
MAX_POOL = OpDef("max_pool", _node("MaxPool{}DWithIndicesBackward0"), _gather_at, _dmax_pool,
                 None, save_inputs=(1,))
MAX_POOL_ADJOINT = OpDef("max_pool_backward", _node("MaxPool{}DWithIndicesBackwardBackward0"),
                         _scatter_to, _dmax_pool_adjoint, None, save_inputs=(1,))
AVG_POOL = OpDef("avg_pool", _node("AvgPool{}DBackward0"), _avg_pool, _davg_pool)
AVG_POOL_ADJOINT = OpDef("avg_pool_backward", _node("AvgPool{}DBackwardBackward0"),
                         _avg_pool_adjoint, _davg_pool_adjoint)
# fmt: on
# Not differentiable: no vjp, no node.
MAX_POOL_INDICES = OpDef("max_pool_indices", None, _max_pool_indices)
