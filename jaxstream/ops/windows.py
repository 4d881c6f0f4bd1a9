"""Kernels over the windows of a tensor's spatial axes (its trailing ones), for convolution
and pooling: padding with zeros between neighbours, every window at once, a convolution,
and the arithmetic of the convolutions that carry a gradient back.

JAX has the first three as XLA ops (`lax.pad`, `lax.conv_general_dilated`); on NumPy and
CuPy the windows are one strided view (`sliding_window_view`: no copy) and a convolution
is one batched matrix product of those windows with the weight, never a loop over
positions.

Note [Convolutions carry their own gradients]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
One convolution here has five geometric params per spatial axis: a window `stride`,
`padding` (lo, hi) added to the input (a negative one crops it), `lhs_dilation` (the input
spread out, `lhs_dilation - 1` zeros between neighbours, as a transposed convolution's),
`rhs_dilation` (the kernel's taps spread out: PyTorch's `dilation`), and `groups`. With
all five the family is closed under differentiation (as in XLA):

* the input's gradient is a convolution of the output gradient, spread by the forward's
  `stride`, with the kernel flipped along its spatial axes and its two channel axes
  swapped within each group, taking every `lhs_dilation`-th position
  (`input_gradient_padding` gives its padding: the full correlation, cut to the input);
* the weight's gradient is a convolution of the input (batch and channel axes swapped)
  with the output gradient as the kernel, its taps spread by the forward's `stride`,
  its windows stepping by the forward's `rhs_dilation` (`weight_gradient_padding`).

So every gradient of a convolution is again a convolution with a vjp of its own, and
gradients go to any order. Average pooling is the convolution of each channel with a
kernel of ones, divided, and reuses both.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import array_api_compat
import jax
import jax.numpy as jnp
import numpy as np

Pairs = tuple[tuple[int, int], ...]
"""(lo, hi) per spatial axis."""


def _host_library(xp: Any) -> Any:
    """The array library behind a host namespace: NumPy's, or CuPy's on a GPU."""
    if array_api_compat.is_cupy_namespace(xp):
        import cupy  # only where CuPy arrays already exist

        return cupy
    return np


def pad_dilated(xp: Any, a: Any, padding: Pairs, dilation: tuple, value: Any = 0) -> Any:
    """`a` with `dilation - 1` copies of `value` between neighbours along each spatial axis,
    then `padding` of `value` at the ends (a negative one crops)."""
    lead = a.ndim - len(padding)
    if xp is jnp:
        config = [(0, 0, 0)] * lead + [(lo, hi, d - 1) for (lo, hi), d in
                                       zip(padding, dilation, strict=True)]
        return jax.lax.pad(a, jnp.asarray(value, a.dtype), config)
    if all(d == 1 for d in dilation) and not any(lo or hi for lo, hi in padding):
        return a
    spans = [(n - 1) * d + 1 if n else 0 for n, d in zip(a.shape[lead:], dilation, strict=True)]
    shape = tuple(max(lo, 0) + span + max(hi, 0) for (lo, hi), span in
                  zip(padding, spans, strict=True))
    out = xp.full(a.shape[:lead] + shape, value, dtype=a.dtype)
    out[(...,) + tuple(slice(max(lo, 0), max(lo, 0) + span, d) for (lo, _), span, d in
                       zip(padding, spans, dilation, strict=True))] = a
    return out[(...,) + tuple(slice(max(-lo, 0), size - max(-hi, 0)) for (lo, hi), size in
                              zip(padding, shape, strict=True))]


def output_sizes(sizes: tuple, kernel: tuple, stride: tuple, dilation: tuple) -> tuple:
    """How many windows of `kernel` taps (spaced `dilation`) fit, stepping by `stride`."""
    return tuple((n - d * (k - 1) - 1) // s + 1 for n, k, s, d in
                 zip(sizes, kernel, stride, dilation, strict=True))


def windows(xp: Any, a: Any, kernel: tuple, stride: tuple, dilation: tuple) -> Any:
    """Every window of `a`'s spatial axes: shape `leading + output sizes + kernel`."""
    n = len(kernel)
    lead = a.ndim - n
    if xp is jnp:
        outs = output_sizes(a.shape[lead:], kernel, stride, dilation)
        taps = [a[(...,) + tuple(slice(o * d, o * d + (m - 1) * s + 1, s) for o, d, m, s in
                                 zip(offset, dilation, outs, stride, strict=True))]
                for offset in itertools.product(*map(range, kernel))]
        return jnp.reshape(jnp.stack(taps, axis=-1), a.shape[:lead] + outs + kernel)
    spans = tuple(d * (k - 1) + 1 for k, d in zip(kernel, dilation, strict=True))
    view = _host_library(xp).lib.stride_tricks.sliding_window_view(
        a, spans, axis=tuple(range(lead, a.ndim)))
    return view[(...,) + tuple(slice(None, None, s) for s in stride)
                + tuple(slice(None, None, d) for d in dilation)]


# Note [XLA's operand swap of a spread convolution]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# XLA's simplifier swaps a convolution's operands where the kernel is larger than the
# input, and keeps as they are the axes it takes for a group axis: no padding and no
# kernel dilation, an input spread by the kernel's size, and a stride one less than it.
# The jaxlib this project pins then builds a window that does not fit the swapped kernel
# and aborts the whole process (a failed check, not an exception); a plain `jax.grad` of
# a strided convolution reaches it too, e.g. a (2, 4) input, a (3, 2) kernel, stride 2,
# padding 1. The input gradient of a stride-2 convolution with a kernel of two along an
# axis is such an axis. There the input is spread by `lax.pad` (zeros between
# neighbours, the same values) instead of by `lhs_dilation`, which XLA cannot mistake
# for a group axis; every other axis keeps XLA's dilation, which is faster.
def _spread_where_xla_sees_groups(x: Any, kernel: tuple, stride: tuple, padding: Pairs,
                                  lhs_dilation: tuple, rhs_dilation: tuple) -> tuple:
    """`x`, `padding` and `lhs_dilation` with the axes XLA would take for group axes
    spread beforehand (Note [XLA's operand swap of a spread convolution])."""
    mistaken = [ld > 1 and ld == k and s == k - 1 and d == 1 and lo == hi == 0
                for k, s, (lo, hi), ld, d in
                zip(kernel, stride, padding, lhs_dilation, rhs_dilation, strict=True)]
    if not any(mistaken):
        return x, padding, lhs_dilation
    interior = [(0, 0, ld - 1 if m else 0) for ld, m in zip(lhs_dilation, mistaken, strict=True)]
    x = jax.lax.pad(x, jnp.zeros((), x.dtype), [(0, 0, 0), (0, 0, 0), *interior])
    return x, padding, tuple(1 if m else ld for ld, m in zip(lhs_dilation, mistaken, strict=True))


def convolve(xp: Any, x: Any, w: Any, stride: tuple, padding: Pairs, lhs_dilation: tuple,
             rhs_dilation: tuple, groups: int,
             precision: jax.lax.Precision = jax.lax.Precision.HIGHEST) -> Any:
    """The convolution (cross-correlation, as PyTorch's) of `x` (batch, channels, *spatial)
    with `w` (out channels, channels / groups, *kernel) (Note [Convolutions carry their own
    gradients]); on JAX at `precision` (Note [Float32 matrix products] in precision.py),
    elsewhere always in the operands' dtype."""
    if xp is jnp:
        x, padding, lhs_dilation = _spread_where_xla_sees_groups(
            x, tuple(w.shape[2:]), stride, padding, lhs_dilation, rhs_dilation)
        return jax.lax.conv_general_dilated(
            x, w, stride, padding, lhs_dilation, rhs_dilation, feature_group_count=groups,
            precision=precision)
    kernel = tuple(w.shape[2:])
    n = len(kernel)
    cols = windows(xp, pad_dilated(xp, x, padding, lhs_dilation), kernel, stride, rhs_dilation)
    batch, channels = x.shape[:2]
    per_group, outs = channels // groups, tuple(cols.shape[2:2 + n])
    # (batch, groups, *outs, per group, *kernel): each row of a group's matrix is one window.
    cols = xp.permute_dims(xp.reshape(cols, (batch, groups, per_group) + outs + kernel),
                           (0, 1, *range(3, 3 + n), 2, *range(3 + n, 3 + 2 * n)))
    cols = xp.reshape(cols, (batch, groups, math.prod(outs), per_group * math.prod(kernel)))
    taps = xp.reshape(w, (groups, w.shape[0] // groups, per_group * math.prod(kernel)))
    out = xp.matmul(cols, xp.permute_dims(taps, (0, 2, 1)))  # (batch, groups, outs, out/group)
    return xp.reshape(xp.permute_dims(out, (0, 1, 3, 2)), (batch, w.shape[0]) + outs)


def input_gradient_padding(padding: Pairs, sizes: tuple, outs: tuple, kernel: tuple,
                           stride: tuple, lhs_dilation: tuple, rhs_dilation: tuple) -> Pairs:
    """The padding of the convolution that gives a convolution's input gradient (Note
    [Convolutions carry their own gradients]): on the left the kernel's reach less the
    forward's; on the right whatever makes its windows end at the input's last element."""
    return tuple((d * (k - 1) - lo, (n - 1) * ld + lo - (m - 1) * s)
                 for (lo, _), n, m, k, s, ld, d in
                 zip(padding, sizes, outs, kernel, stride, lhs_dilation, rhs_dilation,
                     strict=True))


def weight_gradient_padding(padding: Pairs, sizes: tuple, outs: tuple, kernel: tuple,
                            stride: tuple, lhs_dilation: tuple, rhs_dilation: tuple) -> Pairs:
    """The padding of the convolution that gives a convolution's weight gradient: the
    forward's on the left, and on the right as much as gives exactly `kernel` windows."""
    return tuple((lo, (k - 1) * d + (m - 1) * s - lo - (n - 1) * ld)
                 for (lo, _), n, m, k, s, ld, d in
                 zip(padding, sizes, outs, kernel, stride, lhs_dilation, rhs_dilation,
                     strict=True))
