"""`F.unfold` (im2col), its adjoint `F.fold` (col2im) and `Tensor.unfold(dimension, size,
step)`, with PyTorch's arguments, checks and messages (folding_rules.py).

`Tensor.unfold` is a view, as PyTorch's: an in-place op on it writes through to its
base. Where its windows overlap (`step < size`) an in-place op on it raises the error
of any view whose elements share places (Note [Views and in-place ops] in views.py),
where PyTorch's writes each shared element once per window. Like PyTorch's, `fold` and
`unfold` take floating inputs only, batched or not.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..tensor import Tensor, is_floating
from . import folding_rules as FR
from . import shape_ops as S
from .dispatch import apply
from .operands import as_tensor
from .shapes import normalize_axis

Pair = int | Sequence[int]
_CHECKS = (("kernel_size", "kernel size", "kernel", 1), ("dilation", "dilation", "dilation", 1),
           ("padding", "padding", "pad", 0), ("stride", "stride", "stride", 1))
"""(argument, its name in messages, its prefix per axis, its least value)."""


def _pair(name: str, value: Pair) -> tuple[int, int]:
    values = (value,) * 2 if isinstance(value, int) else tuple(value)
    if len(values) != 2:
        raise RuntimeError(f"It is expected {name} equals to 2, but got size {len(values)}")
    return values


def _geometry(kernel_size: Pair, dilation: Pair, padding: Pair, stride: Pair) -> dict:
    """The params of both ops, checked as PyTorch checks them."""
    given = dict(zip(("kernel_size", "dilation", "padding", "stride"),
                     (kernel_size, dilation, padding, stride), strict=True))
    geometry = {}
    for argument, told, prefix, least in _CHECKS:
        height, width = _pair(argument, given[argument])
        if min(height, width) < least:
            rule = "be non-negative" if least == 0 else "be greater than zero"
            raise RuntimeError(f"{told} should {rule}, but got {prefix}_height: {height} "
                               f"{prefix}_width: {width}")
        geometry[argument.removesuffix("_size")] = (height, width)
    return geometry


def _blocks(sizes: tuple, geometry: dict) -> tuple[int, int]:
    """How many blocks fit along each spatial axis."""
    return tuple((n + 2 * p - d * (k - 1) - 1) // s + 1 for n, k, d, p, s in
                 zip(sizes, *(geometry[name] for name in ("kernel", "dilation", "padding",
                                                          "stride")), strict=True))


def _floating(op: str, x: Tensor) -> None:
    if not is_floating(x.dtype):
        raise NotImplementedError(f"\"{op}\" not implemented for {x.dtype} (an input of shape "
                                  f"{x.shape}); cast it first, e.g. x.float()")


def unfold(input: Tensor, kernel_size: Pair, dilation: Pair = 1, padding: Pair = 0,  # noqa: A002
           stride: Pair = 1) -> Tensor:
    """Every block of a (N, C, H, W) or (C, H, W) input as a column: (N, C * kH * kW, L),
    channels major, then the kernel's rows and columns; the blocks in row-major order."""
    x = as_tensor(input)
    if x.ndim not in (3, 4) or 0 in x.shape[-3:]:
        raise RuntimeError(f"Expected 3D or 4D (batch mode) tensor with possibly 0 batch size "
                           f"and other non-zero dimensions for input, but got: {list(x.shape)}")
    geometry = _geometry(kernel_size, dilation, padding, stride)
    blocks = _blocks(tuple(x.shape[-2:]), geometry)
    if min(blocks) < 1:
        raise RuntimeError(
            f"Given input with spatial size {tuple(x.shape[-2:])}, kernel_size="
            f"{geometry['kernel']}, dilation={geometry['dilation']}, padding="
            f"{geometry['padding']}, calculated shape of the array of sliding blocks as "
            f"{blocks}, but its components must be at least one.")
    _floating("im2col", x)
    return apply(FR.IM2COL, x, **geometry)


def fold(input: Tensor, output_size: Pair, kernel_size: Pair, dilation: Pair = 1,  # noqa: A002
         padding: Pair = 0, stride: Pair = 1) -> Tensor:
    """The adjoint of `unfold`: (N, C * kH * kW, L) or (C * kH * kW, L) columns summed back
    into (N, C, H, W) (or (C, H, W)) of `output_size`, where blocks overlap too."""
    x = as_tensor(input)
    if x.ndim not in (2, 3) or 0 in x.shape[-2:]:
        raise RuntimeError(f"Expected 2D or 3D (batch mode) tensor for input with possibly 0 "
                           f"batch size and non-zero dimensions for input, but got: "
                           f"{list(x.shape)}")
    size = _pair("output_size", output_size)
    geometry = _geometry(kernel_size, dilation, padding, stride)
    taps = geometry["kernel"][0] * geometry["kernel"][1]
    if x.shape[-2] % taps:
        raise RuntimeError(f"Expected size of input's dimension 1 to be divisible by the "
                           f"product of kernel_size, but got input.size(1)={x.shape[-2]} and "
                           f"kernel_size={geometry['kernel']}.")
    blocks = _blocks(size, geometry)
    if min(blocks) < 1 or blocks[0] * blocks[1] != x.shape[-1]:
        raise RuntimeError(
            f"Given output_size={size}, kernel_size={geometry['kernel']}, dilation="
            f"{geometry['dilation']}, padding={geometry['padding']}, stride="
            f"{geometry['stride']}, expected size of input's dimension 2 to match the "
            f"calculated number of sliding blocks {max(blocks[0], 0)} * {max(blocks[1], 0)} = "
            f"{max(blocks[0], 0) * max(blocks[1], 0)}, but got input.size(2)={x.shape[-1]}.")
    _floating("col2im", x)
    return apply(FR.COL2IM, x, output_size=size, **geometry)


def tensor_unfold(t: Tensor, dimension: int, size: int, step: int) -> Tensor:
    """`t.unfold(dimension, size, step)`: a view of `t` with `dimension` cut into its
    windows of `size` elements every `step`, each window along a new last axis."""
    axis = normalize_axis("unfold", dimension, t.shape)
    length = t.shape[axis] if t.ndim else 1
    if size > length:
        raise RuntimeError(f"maximum size for tensor at dimension {axis} is {length} but size "
                           f"is {size}")
    if size < 0:
        raise RuntimeError(f"size is {size} but must be >= 0")
    if step <= 0:
        raise RuntimeError(f"step is {step} but must be > 0")
    if not t.ndim:  # a number: one window of it, or none
        return S.reshape(apply(FR.UNFOLD, S.reshape(t, (1,)), axis=0, size=size, step=step),
                         (size,))
    return apply(FR.UNFOLD, t, axis=axis, size=size, step=step)


METHODS = {"unfold": tensor_unfold}
