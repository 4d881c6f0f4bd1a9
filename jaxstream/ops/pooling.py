"""Max and average pooling of 1, 2 or 3 axes with PyTorch's arguments, checks and messages
(pooling_rules.py).

The output size is PyTorch's: with `ceil_mode` a last, partial window is kept where it
starts inside the input or its left padding. Max pooling's gradient goes to the first
maximum of each window in row-major order (its last NaN where it has one), PyTorch's
choice, to every order: the gradient is a scatter to those indices, whose gradient is
the gather again. The 1-d poolings run as 2-d ones on a height of one, as PyTorch's do,
so that their node is `SqueezeBackward1` as there.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..tensor import Tensor
from . import pooling_rules as P
from . import shape_ops as S
from .dispatch import apply

Ints = int | Sequence[int]
_COUNT = {1: "one int", 2: "two ints", 3: "three ints"}
_AXES = ("T", "H", "W")


def _ints(op: str, name: str, value: Ints, n: int, must: str = "must either be") -> tuple:
    values = (value,) if isinstance(value, int) else tuple(value)
    if len(values) == 1:
        return values * n
    if len(values) != n:
        raise RuntimeError(f"{op}: {name} {must} a single int, or a tuple of {_COUNT[n]} (got "
                           f"{name}={value!r})")
    return values


def _check_input(op: str, x: Tensor, n: int) -> None:
    if x.ndim not in (n + 1, n + 2) or 0 in x.shape[x.ndim - n - 1:]:  # a batch may be empty
        raise RuntimeError(f"non-empty {n + 1}D or {n + 2}D (batch mode) tensor expected for "
                           f"input ({op}: got input of size {list(x.shape)})")


def _named(prefix: str, values: tuple) -> str:
    """`values` as PyTorch's messages name them per axis: "kH: 2 kW: 3"."""
    axes = _AXES[-len(values):]
    return " ".join(f"{prefix}{axis}: {v}" for axis, v in zip(axes, values, strict=True))


def _check_geometry(op: str, x: Tensor, kernel: tuple, stride: tuple, pad: tuple,
                    dilation: tuple) -> None:
    """PyTorch's checks of a pooling's geometry, with its messages."""
    if min(kernel) <= 0:
        raise RuntimeError(f"kernel size should be greater than zero, but got "
                           f"{_named('k', kernel)} ({op})")
    if min(stride) <= 0:
        raise RuntimeError(f"stride should be greater than zero, but got {_named('d', stride)} "
                           f"({op})")
    if min(dilation) <= 0:
        raise RuntimeError(f"dilation should be greater than zero, but got "
                           f"{_named('dilation', dilation)} ({op})")
    for k, p, d in zip(kernel, pad, dilation, strict=True):
        if p < 0:
            raise RuntimeError(f"pad must be non-negative, but got pad: {p} ({op})")
        if p > ((k - 1) * d + 1) // 2:
            raise RuntimeError(f"pad should be at most half of effective kernel size, but got "
                               f"pad={p}, kernel_size={k} and dilation={d} ({op} of an input "
                               f"of size {list(x.shape)})")


def _output_size(n: int, k: int, s: int, p: int, d: int, ceil_mode: bool) -> int:
    out = (n + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (out - 1) * s >= n + p:  # a last window must start inside
        out -= 1
    return out


def _geometry(op: str, n: int, x: Tensor, kernel_size: Ints, stride: Ints | None,
              padding: Ints, dilation: Ints, ceil_mode: bool) -> dict[str, Any]:
    """The params of a pooling op of `n` axes: the padding on the right is whatever gives
    exactly the output size (more than `padding` for a partial last window, less where the
    last elements fall in no window)."""
    _check_input(op, x, n)
    kernel = _ints(op, "kernel_size", kernel_size, n)
    strides = kernel if stride is None or stride == () else _ints(
        op, "stride", stride, n, "must either be omitted,")
    pad = _ints(op, "padding", padding, n)
    dilation = _ints(op, "dilation", dilation, n, "must be either")
    _check_geometry(op, x, kernel, strides, pad, dilation)
    sizes = tuple(x.shape[-n:])
    outs = tuple(_output_size(*a, ceil_mode) for a in
                 zip(sizes, kernel, strides, pad, dilation, strict=True))
    if min(outs) < 1:
        channels = x.shape[-n - 1]
        raise RuntimeError(f"Given input size: ({'x'.join(map(str, (channels, *sizes)))}). "
                           f"Calculated output size: ({'x'.join(map(str, (channels, *outs)))}). "
                           f"Output size is too small ({op}, kernel {kernel}, stride {strides}, "
                           f"padding {pad})")
    padding_pairs = tuple((p, (m - 1) * s + d * (k - 1) + 1 - n - p) for n, m, k, s, p, d in
                          zip(sizes, outs, kernel, strides, pad, dilation, strict=True))
    return {"kernel": kernel, "stride": strides, "padding": padding_pairs, "dilation": dilation}


def _max_pool(op: str, n: int, x: Tensor, kernel_size: Ints, stride: Ints | None,
              padding: Ints, dilation: Ints, ceil_mode: bool,
              return_indices: bool) -> Tensor | tuple[Tensor, Tensor]:
    """The maximum of each window of the last `n` axes (and its flat index in its plane)."""
    if x.dtype.kind == "b":
        raise NotImplementedError(f"\"{op}\" not implemented for 'Bool' (an input of size "
                                  f"{list(x.shape)}); cast it first, e.g. x.int()")
    geometry = _geometry(op, n, x, kernel_size, stride, padding, dilation, ceil_mode)
    indices = apply(P.MAX_POOL_INDICES, x, **geometry)
    values = apply(P.MAX_POOL, x, indices, **geometry)
    return (values, indices) if return_indices else values


def max_pool2d(input: Tensor, kernel_size: Ints, stride: Ints | None = None,  # noqa: A002
               padding: Ints = 0, dilation: Ints = 1, ceil_mode: bool = False,
               return_indices: bool = False) -> Tensor | tuple[Tensor, Tensor]:
    """The maximum of each window of the last two axes; with `return_indices`, also where
    it is, as a flat index in its plane (PyTorch's layout of the indices)."""
    return _max_pool("max_pool2d", 2, input, kernel_size, stride, padding, dilation, ceil_mode,
                     return_indices)


def max_pool3d(input: Tensor, kernel_size: Ints, stride: Ints | None = None,  # noqa: A002
               padding: Ints = 0, dilation: Ints = 1, ceil_mode: bool = False,
               return_indices: bool = False) -> Tensor | tuple[Tensor, Tensor]:
    """The maximum of each window of the last three axes (and its flat index in its volume,
    depth * H * W + row * W + column, with `return_indices`)."""
    return _max_pool("max_pool3d", 3, input, kernel_size, stride, padding, dilation, ceil_mode,
                     return_indices)


def max_pool1d(input: Tensor, kernel_size: Ints, stride: Ints | None = None,  # noqa: A002
               padding: Ints = 0, dilation: Ints = 1, ceil_mode: bool = False,
               return_indices: bool = False) -> Tensor | tuple[Tensor, Tensor]:
    """The maximum of each window of the last axis (and its index, with `return_indices`)."""
    if input.ndim not in (2, 3):
        raise RuntimeError(f"max_pool1d: Expected 2D or 3D (batch mode) tensor with optional 0 "
                           f"dim batch size for input, but got:{list(input.shape)}")
    k, s, p, d = _one_axis("max_pool1d", kernel_size, stride, padding, dilation)
    out = max_pool2d(S.unsqueeze(input, -2), (1, k), (1, s), (0, p), (1, d), ceil_mode,
                     return_indices)
    if return_indices:
        return S.squeeze(out[0], -2), S.squeeze(out[1], -2)
    return S.squeeze(out, -2)


def _one_axis(op: str, kernel_size: Ints, stride: Ints | None, padding: Ints,
              dilation: Ints) -> tuple[int, int, int, int]:
    """A 1-d pooling's kernel size, stride (the kernel size where omitted), padding and
    dilation."""
    (k,) = _ints(op, "kernel_size", kernel_size, 1)
    (s,) = (k,) if stride is None or stride == () else _ints(op, "stride", stride, 1)
    return k, s, _ints(op, "padding", padding, 1)[0], _ints(op, "dilation", dilation, 1)[0]


def _divisors(sizes: tuple, geometry: dict, count_include_pad: bool,
              divisor_override: int | None) -> tuple:
    """Per axis, what each output position's window counts: its part inside the padded
    input (`count_include_pad`) or inside the input; the divisor is their product."""
    if divisor_override is not None:
        return ((divisor_override,),) + ((1,),) * (len(sizes) - 1)
    divisors = []
    for n, k, s, (p, hi) in zip(sizes, geometry["kernel"], geometry["stride"],
                                geometry["padding"], strict=True):
        starts = np.arange((n + p + hi - k) // s + 1) * s - p
        ends = np.minimum(starts + k, n + p)
        counted = ends - starts if count_include_pad else (
            np.minimum(ends, n) - np.maximum(starts, 0))
        divisors.append(tuple(counted.tolist()))
    return tuple(divisors)


def _avg_pool(op: str, n: int, x: Tensor, kernel_size: Ints, stride: Ints | None,
              padding: Ints, ceil_mode: bool, count_include_pad: bool,
              divisor_override: int | None) -> Tensor:
    """The mean of each window of the last `n` axes: its sum over the count of the padded
    window (`count_include_pad`), of its elements inside the input, or `divisor_override`."""
    if divisor_override == 0:
        raise RuntimeError(f"divisor must be not zero ({op}'s divisor_override)")
    if x.dtype.kind in "biu":
        raise NotImplementedError(
            f"{op} of {x.dtype} input is not supported (PyTorch's rounds each mean to an "
            f"integer); cast the input to a floating dtype first, e.g. x.float()")
    geometry = _geometry(op, n, x, kernel_size, stride, padding, 1, ceil_mode)
    del geometry["dilation"]
    divisors = _divisors(tuple(x.shape[-n:]), geometry, count_include_pad, divisor_override)
    return apply(P.AVG_POOL, x, **geometry, divisors=divisors)


def avg_pool2d(input: Tensor, kernel_size: Ints, stride: Ints | None = None,  # noqa: A002
               padding: Ints = 0, ceil_mode: bool = False, count_include_pad: bool = True,
               divisor_override: int | None = None) -> Tensor:
    """The mean of each window of the last two axes (as `_avg_pool` counts it)."""
    return _avg_pool("avg_pool2d", 2, input, kernel_size, stride, padding, ceil_mode,
                     count_include_pad, divisor_override)


def avg_pool3d(input: Tensor, kernel_size: Ints, stride: Ints | None = None,  # noqa: A002
               padding: Ints = 0, ceil_mode: bool = False, count_include_pad: bool = True,
               divisor_override: int | None = None) -> Tensor:
    """The mean of each window of the last three axes (as `_avg_pool` counts it)."""
    return _avg_pool("avg_pool3d", 3, input, kernel_size, stride, padding, ceil_mode,
                     count_include_pad, divisor_override)


def avg_pool1d(input: Tensor, kernel_size: Ints, stride: Ints | None = None,  # noqa: A002
               padding: Ints = 0, ceil_mode: bool = False,
               count_include_pad: bool = True) -> Tensor:
    """The mean of each window of the last axis (as `avg_pool2d` counts it)."""
    if input.ndim not in (2, 3):
        raise RuntimeError(f"Expected 2 to 3 dimensions, but got {input.ndim}-dimensional "
                           f"tensor for argument #1 'self' (while checking arguments for "
                           f"avg_pool1d; input of size {list(input.shape)})")
    k, s, p, _ = _one_axis("avg_pool1d", kernel_size, stride, padding, 1)
    out = avg_pool2d(S.unsqueeze(input, -2), (1, k), (1, s), (0, p), ceil_mode,
                     count_include_pad)
    return S.squeeze(out, -2)
