"""The op table of convolution: one op, `CONV`, whose gradients are convolutions again.

Same conventions as `rules.py`. The params are per spatial axis: `stride`, `padding`
((lo, hi) pairs), `lhs_dilation`, `rhs_dilation`, and `groups`; Note [Convolutions carry
their own gradients] in windows.py says why the input and weight gradients are `CONV`s
of the output gradient, so that they go to any order. On JAX each runs at
`js.get_float32_matmul_precision()` (Note [Float32 matrix products] in precision.py).
"""

from __future__ import annotations

from typing import Any

from ..precision import jax_precision
from ..tensor import Tensor
from .dispatch import apply
from .opdef import OpContext, OpDef
from .windows import convolve, input_gradient_padding, weight_gradient_padding


# ------------------------------------------------------------------ kernel
def _conv(xp: Any, x: Any, w: Any, *bias: Any, stride: tuple, padding: tuple,
          lhs_dilation: tuple, rhs_dilation: tuple, groups: int) -> Any:
    out = convolve(xp, x, w, stride, padding, lhs_dilation, rhs_dilation, groups,
                   jax_precision())
    if not bias:
        return out
    return out + xp.reshape(bias[0], (-1,) + (1,) * (out.ndim - 2))


# ------------------------------------------------------------------ vjps
def _geometry(ctx: OpContext, outs: tuple) -> tuple:
    """What both gradient paddings read: the forward's padding, the input's and output's
    spatial sizes, the kernel, and the stride and dilations."""
    p = ctx.params
    return (p["padding"], ctx.shapes[0][2:], outs, ctx.shapes[1][2:], p["stride"],
            p["lhs_dilation"], p["rhs_dilation"])


def swapped_in_groups(t: Tensor, groups: int) -> Tensor:
    """`t` (groups * a, b, ...) as (groups * b, a, ...): its first two axes swapped within
    each group (all of it for one group)."""
    if groups == 1:
        return t.swapaxes(0, 1)
    a, b, *rest = t.shape
    swapped = t.reshape((groups, a // groups, b, *rest)).swapaxes(1, 2)
    return swapped.reshape((groups * b, a // groups, *rest))


def _dconv_x(g: Tensor, ctx: OpContext) -> Tensor:
    """The transposed convolution: `g` spread by the stride, with the kernel flipped and its
    channel axes swapped within each group."""
    p, w = ctx.params, ctx.inputs[1]
    flipped = swapped_in_groups(w, p["groups"]).flip(tuple(range(2, w.ndim)))
    return apply(CONV, g, flipped, stride=p["lhs_dilation"],
                 padding=input_gradient_padding(*_geometry(ctx, g.shape[2:])),
                 lhs_dilation=p["stride"], rhs_dilation=p["rhs_dilation"], groups=p["groups"])


def _dconv_w(g: Tensor, ctx: OpContext) -> Tensor:
    """The input (each group's channels as the batch, the batch as channels) convolved with
    `g` as the kernel (Note [Convolutions carry their own gradients] in windows.py)."""
    p, x = ctx.params, ctx.inputs[0]
    groups, (batch, channels, *sizes) = p["groups"], ctx.shapes[0]
    if groups == 1:
        grouped = x.swapaxes(0, 1)
    else:  # (batch, groups, per group) -> (per group, groups, batch)
        per_group, spatial = channels // groups, tuple(range(3, 3 + len(sizes)))
        grouped = x.reshape((batch, groups, per_group, *sizes)).permute((2, 1, 0, *spatial))
        grouped = grouped.reshape((per_group, groups * batch, *sizes))
    dw = apply(CONV, grouped, g.swapaxes(0, 1), stride=p["rhs_dilation"],
               padding=weight_gradient_padding(*_geometry(ctx, g.shape[2:])),
               lhs_dilation=p["lhs_dilation"], rhs_dilation=p["stride"], groups=groups)
    return dw.swapaxes(0, 1)


def _dconv_bias(g: Tensor, ctx: OpContext) -> Tensor:
    return g.sum(axis=(0, *range(2, g.ndim)))


# ------------------------------------------------------------------ the table
# fmt: off
CONV = OpDef("convolution", "ConvolutionBackward0", _conv, _dconv_x, _dconv_w, _dconv_bias,
             save_for=((1,), (0,), ()))
# fmt: on
