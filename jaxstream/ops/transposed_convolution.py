"""`conv_transpose1d`, `conv_transpose2d` and `conv_transpose3d` with PyTorch's arguments,
checks and messages: each is the one convolution op, `CONV`, so its node is PyTorch's
`ConvolutionBackward0` and its gradients are convolutions again, to any order.

Note [Transposed convolutions are convolutions]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
A transposed convolution is the input gradient of a convolution (`_dconv_x` in
convolution_rules.py): its input spread out by the stride (`lhs_dilation`, `stride - 1`
zeros between neighbours), convolved with stride 1 by the kernel flipped along its
spatial axes and with its two channel axes swapped within each group (the weight is
(in_channels, out_channels / groups, *kernel)), padded by `dilation * (k - 1) - padding`
on each side, plus `output_padding` on the high one (a negative padding crops). Its
output size is then PyTorch's, `(n - 1) * stride - 2 * padding + dilation * (k - 1) +
output_padding + 1`. The flip and the swap are ops of their own, so the weight's
gradient flows back through them.
"""

from __future__ import annotations

from typing import Any

from ..tensor import Tensor
from .convolution import (
    batched,
    check_geometry,
    check_operands,
    per_axis,
    prepared,
    run_convolution,
)
from .convolution_rules import swapped_in_groups

_AXES = ("depth", "height", "width")


def _check_paddings(name: str, padding: Any, output_padding: tuple, stride: tuple,
                    dilation: tuple) -> tuple:
    """The padding per axis, with PyTorch's checks of it and of `output_padding`."""
    if isinstance(padding, str):
        raise TypeError(f"{name}(): argument 'padding' must be tuple of ints, not str (a "
                        f"transposed convolution takes no {padding!r}; give the padding as "
                        f"numbers)")
    pads = per_axis("padding", padding, len(stride))
    if any(p < 0 for p in pads):
        raise RuntimeError(f"negative padding is not supported (padding={list(pads)})")
    if any(p < 0 for p in output_padding):
        raise RuntimeError(f"negative output_padding is not supported (output_padding="
                           f"{list(output_padding)})")
    if any(p >= s and p >= d for p, s, d in zip(output_padding, stride, dilation, strict=True)):
        named = " ".join(_named(what, values) for what, values in (
            ("output_padding", output_padding), ("stride", stride), ("dilation", dilation)))
        raise RuntimeError(f"output padding must be smaller than either stride or dilation, but "
                           f"got {named}")
    return pads


def _named(what: str, values: tuple) -> str:
    """`values` as PyTorch's messages name them per axis: "stride_height: 2 stride_width: 1"."""
    axes = _AXES[-len(values):]
    return " ".join(f"{what}_{axis}: {v}" for axis, v in zip(axes, values, strict=True))


def _check_output_size(sizes: tuple, outs: tuple) -> None:
    if min(outs) < 1:
        raise RuntimeError(
            f"Given input size per channel: ({' x '.join(map(str, sizes))}). Calculated output "
            f"size per channel: ({' x '.join(map(str, outs))}). Output size is too small; use "
            f"less padding, or a larger kernel, stride or dilation")


def _conv_transpose(name: str, n: int, x: Any, w: Any, b: Any, stride: Any, padding: Any,
                    output_padding: Any, groups: int, dilation: Any) -> Tensor:
    """Note [Transposed convolutions are convolutions]."""
    x, w, b = prepared(name, n, x, w, b, "in_channels, out_channels / groups")
    stride, dilation = per_axis("stride", stride, n), per_axis("dilation", dilation, n)
    extra = per_axis("output_padding", output_padding, n)
    check_geometry(stride, dilation, groups)
    pads = _check_paddings(name, padding, extra, stride, dilation)
    batch = batched(x, n)
    check_operands(batch, w, b, groups, transposed=True)
    reach = tuple(d * (k - 1) for k, d in zip(w.shape[2:], dilation, strict=True))
    sizes = tuple(x.shape[-n:])
    _check_output_size(sizes, tuple((m - 1) * s - 2 * p + r + e + 1 for m, s, p, r, e in
                                    zip(sizes, stride, pads, reach, extra, strict=True)))
    flipped = swapped_in_groups(w, groups).flip(tuple(range(2, n + 2)))
    pairs = tuple((r - p, r - p + e) for r, p, e in zip(reach, pads, extra, strict=True))
    return run_convolution(x, batch, flipped, b, stride=(1,) * n, padding=pairs,
                           lhs_dilation=stride, rhs_dilation=dilation, groups=int(groups))


def conv_transpose1d(input: Any, weight: Any, bias: Any = None, stride: Any = 1,  # noqa: A002
                     padding: Any = 0, output_padding: Any = 0, groups: int = 1,
                     dilation: Any = 1) -> Tensor:
    """PyTorch's conv_transpose1d: `input` (batch, in_channels, length), `weight`
    (in_channels, out_channels / groups, kernel), plus `bias` per out channel."""
    return _conv_transpose("conv_transpose1d", 1, input, weight, bias, stride, padding,
                           output_padding, groups, dilation)


def conv_transpose2d(input: Any, weight: Any, bias: Any = None, stride: Any = 1,  # noqa: A002
                     padding: Any = 0, output_padding: Any = 0, groups: int = 1,
                     dilation: Any = 1) -> Tensor:
    """PyTorch's conv_transpose2d: `input` (batch, in_channels, height, width), `weight`
    (in_channels, out_channels / groups, kh, kw), plus `bias` per out channel."""
    return _conv_transpose("conv_transpose2d", 2, input, weight, bias, stride, padding,
                           output_padding, groups, dilation)


def conv_transpose3d(input: Any, weight: Any, bias: Any = None, stride: Any = 1,  # noqa: A002
                     padding: Any = 0, output_padding: Any = 0, groups: int = 1,
                     dilation: Any = 1) -> Tensor:
    """PyTorch's conv_transpose3d: `input` (batch, in_channels, depth, height, width),
    `weight` (in_channels, out_channels / groups, kd, kh, kw), plus `bias`."""
    return _conv_transpose("conv_transpose3d", 3, input, weight, bias, stride, padding,
                           output_padding, groups, dilation)
