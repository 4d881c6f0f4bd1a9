"""`conv1d`, `conv2d` and `conv3d` with PyTorch's arguments, checks and messages; one op,
`CONV` (convolution_rules.py), whose node is PyTorch's `ConvolutionBackward0`. The
checks and the running of `CONV` here serve the transposed convolutions too
(transposed_convolution.py).

An unbatched input (no batch axis) runs as a batch of one, squeezed after, as PyTorch's
does (its node is then `SqueezeBackward1`). Like the matrix products, a convolution
promotes nothing (Note [Matrix products do not promote] in products.py), and it runs in
the autocast dtype inside `amp.autocast`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..tensor import Tensor
from . import convolution_rules as C
from . import shape_ops as S
from .dispatch import apply
from .dtype_names import scalar_type
from .operands import autocast, operand
from .windows import Pairs

Padding = int | Sequence[int] | str
CONV_LAYOUT = "out_channels, in_channels / groups"
"""A convolution's weight axes before the kernel's, as the rank error names them."""


def per_axis(name: str, value: int | Sequence[int], n: int) -> tuple:
    """One int per spatial axis from an int or a sequence of 1 or `n` (PyTorch's rule)."""
    values = (value,) if isinstance(value, int) else tuple(value)
    if len(values) == 1:
        return values * n
    if len(values) != n:
        raise RuntimeError(
            f"expected {name} to be a single integer value or a list of {n} values to match the "
            f"convolution dimensions, but got {name}={list(values)}"
        )
    return values


def check_geometry(stride: tuple, dilation: tuple, groups: int) -> None:
    if any(s <= 0 for s in stride):
        raise RuntimeError(f"non-positive stride is not supported (stride={list(stride)})")
    if any(d <= 0 for d in dilation):
        raise RuntimeError(f"dilation should be greater than zero, but got {list(dilation)}")
    if groups <= 0:
        raise RuntimeError(f"non-positive groups is not supported (groups={groups})")


def _padding(padding: Padding, kernel: tuple, stride: tuple, dilation: tuple) -> Pairs:
    """(lo, hi) per spatial axis: "valid" is none, "same" keeps the size (the odd one of an
    even total on the right, as PyTorch's)."""
    n = len(kernel)
    if isinstance(padding, str):
        if padding == "valid":
            return ((0, 0),) * n
        if padding != "same":
            raise RuntimeError(f"Invalid padding string: '{padding}' (use 'valid' or 'same')")
        if any(s != 1 for s in stride):
            raise RuntimeError(
                f"padding='same' is not supported for strided convolutions (stride="
                f"{list(stride)}); give the padding as numbers instead"
            )
        totals = [d * (k - 1) for k, d in zip(kernel, dilation, strict=True)]
        return tuple((t // 2, t - t // 2) for t in totals)
    pads = per_axis("padding", padding, n)
    if any(p < 0 for p in pads):
        raise RuntimeError(f"negative padding is not supported (padding={list(pads)})")
    return tuple((p, p) for p in pads)


def check_operands(x: Tensor, w: Tensor, b: Tensor | None, groups: int,
                   transposed: bool = False) -> None:
    """PyTorch's checks of the channels, the bias and the dtypes, with its messages; a
    transposed convolution's weight is (in_channels, out_channels / groups, *kernel)."""
    if w.shape[0] % groups:
        raise RuntimeError(
            f"Given groups={groups}, expected weight to be divisible by {groups} at dimension 0, "
            f"but got weight of size {list(w.shape)} instead"
        )
    channels = w.shape[0] if transposed else w.shape[1] * groups
    out_channels = w.shape[1] * groups if transposed else w.shape[0]
    given = "Given transposed=1, weight" if transposed else f"Given groups={groups}, weight"
    if x.shape[1] != channels:
        raise RuntimeError(
            f"{given} of size {list(w.shape)}, expected input{list(x.shape)} to have {channels} "
            f"channels, but got {x.shape[1]} channels instead"
        )
    if b is not None and tuple(b.shape) != (out_channels,):
        raise RuntimeError(
            f"Given {'transposed=1, ' if transposed else ''}weight of size {list(w.shape)}, "
            f"expected bias to be 1-dimensional with {out_channels} elements, but got bias of "
            f"size {list(b.shape)} instead"
        )
    for name, t in (("weight", w), ("bias", b)):
        if t is not None and t.dtype != x.dtype:
            raise RuntimeError(
                f"expected scalar type {scalar_type(x.dtype)} but found {scalar_type(t.dtype)} "
                f"(convolution: input {x.dtype} of shape {x.shape}, {name} {t.dtype} of shape "
                f"{t.shape}); convolutions do not promote dtypes: cast one first, e.g. "
                f"{name}.to('{x.dtype}')"
            )


def _check_fits(sizes: tuple, padding: Pairs, kernel: tuple, dilation: tuple) -> None:
    padded = [n + lo + hi for n, (lo, hi) in zip(sizes, padding, strict=True)]
    reach = [d * (k - 1) + 1 for k, d in zip(kernel, dilation, strict=True)]
    if any(p < r for p, r in zip(padded, reach, strict=True)):
        raise RuntimeError(
            f"Calculated padded input size per channel: ({' x '.join(map(str, padded))}). "
            f"Kernel size: ({' x '.join(map(str, reach))}). Kernel size can't be greater than "
            f"actual input size (input of spatial size {sizes}, kernel {kernel}, dilation "
            f"{dilation}); pad the input or use a smaller kernel"
        )


def prepared(name: str, n: int, x: Any, w: Any, b: Any,
             layout: str = CONV_LAYOUT) -> tuple[Tensor, Tensor, Tensor | None]:
    """The operands as tensors beside each other, in the autocast dtype, their ranks
    checked: an input of `n + 1` (unbatched) or `n + 2` axes, a weight of `n + 2`."""
    like = next((t for t in (x, w, b) if isinstance(t, Tensor)), None)
    x, w = operand(x, like), operand(w, like)
    x, w, b = autocast(x, w, None if b is None else operand(b, like))
    if x.ndim not in (n + 1, n + 2):
        raise RuntimeError(
            f"Expected {n + 1}D (unbatched) or {n + 2}D (batched) input to {name}, but got "
            f"input of size: {list(x.shape)}"
        )
    if w.ndim != n + 2:
        raise RuntimeError(
            f"{name}: expected a weight of {n + 2} dimensions ({layout}, then {n} kernel "
            f"sizes), but got weight of size {list(w.shape)}"
        )
    return x, w, b


def batched(x: Tensor, n: int) -> Tensor:
    """`x` with a batch axis: itself, or an unbatched input as a batch of one."""
    return x if x.ndim == n + 2 else S.unsqueeze(x, 0)


def run_convolution(x: Tensor, batch: Tensor, w: Tensor, b: Tensor | None,
                    **params: Any) -> Tensor:
    """`CONV` of `batch` (`x` with a batch axis) and `w`, plus `b`; squeezed to `x`'s rank."""
    args = (batch, w) if b is None else (batch, w, b)
    y = apply(C.CONV, *args, **params)
    return y if batch is x else S.squeeze(y, 0)


def _convolution(name: str, n: int, x: Any, w: Any, b: Any, stride: Any, padding: Padding,
                 dilation: Any, groups: int) -> Tensor:
    x, w, b = prepared(name, n, x, w, b)
    stride, dilation = per_axis("stride", stride, n), per_axis("dilation", dilation, n)
    check_geometry(stride, dilation, groups)
    kernel = tuple(w.shape[2:])
    pairs = _padding(padding, kernel, stride, dilation)
    batch = batched(x, n)
    check_operands(batch, w, b, groups)
    _check_fits(tuple(x.shape[-n:]), pairs, kernel, dilation)
    return run_convolution(x, batch, w, b, stride=stride, padding=pairs,
                           lhs_dilation=(1,) * n, rhs_dilation=dilation, groups=int(groups))


def conv1d(input: Any, weight: Any, bias: Any = None, stride: Any = 1,  # noqa: A002
           padding: Padding = 0, dilation: Any = 1, groups: int = 1) -> Tensor:
    """PyTorch's conv1d: the cross-correlation of `input` (batch, in_channels, length) with
    `weight` (out_channels, in_channels / groups, kernel), plus `bias` per out channel."""
    return _convolution("conv1d", 1, input, weight, bias, stride, padding, dilation, groups)


def conv2d(input: Any, weight: Any, bias: Any = None, stride: Any = 1,  # noqa: A002
           padding: Padding = 0, dilation: Any = 1, groups: int = 1) -> Tensor:
    """PyTorch's conv2d: the cross-correlation of `input` (batch, in_channels, height, width)
    with `weight` (out_channels, in_channels / groups, kh, kw), plus `bias` per out channel."""
    return _convolution("conv2d", 2, input, weight, bias, stride, padding, dilation, groups)


def conv3d(input: Any, weight: Any, bias: Any = None, stride: Any = 1,  # noqa: A002
           padding: Padding = 0, dilation: Any = 1, groups: int = 1) -> Tensor:
    """PyTorch's conv3d: the cross-correlation of `input` (batch, in_channels, depth, height,
    width) with `weight` (out_channels, in_channels / groups, kd, kh, kw), plus `bias`."""
    return _convolution("conv3d", 3, input, weight, bias, stride, padding, dilation, groups)
