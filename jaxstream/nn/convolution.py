"""The convolution and pooling layers: Conv1d/2d/3d, ConvTranspose1d/2d/3d, MaxPool2d/3d,
AvgPool2d/3d.

A convolution layer takes `key=` and the factory arguments `dtype=`, `backend=`,
`device=` as Linear does, and PyTorch's initialisation: weight and bias uniform in
±1/sqrt(fan_in), fan_in being the weight's second axis times the kernel's size
(`in_channels / groups` for a convolution, `out_channels / groups` for a transposed one;
the weight's is kaiming_uniform with a=sqrt(5)). A `padding_mode` other than "zeros" pads
the input with `pad` first, then convolves without padding, as PyTorch's layer does; a
transposed convolution takes "zeros" only, as PyTorch's.
"""

from __future__ import annotations

import math
from typing import Any

from ..devices import Device
from ..ops import convolution, padding, pooling, transposed_convolution
from ..tensor import Tensor
from .init import kaiming_uniform, split_key
from .module import Module

_PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


def _tuple(value: int | tuple, n: int) -> tuple:
    return (value,) * n if isinstance(value, int) else tuple(value)


class _ConvNd(Module):
    """What the convolution layers share; `dims` is the number of spatial axes, `convolve`
    the functional a subclass runs, `transposed` whether its weight is laid out
    (in_channels, out_channels / groups, *kernel), as a transposed convolution's."""

    dims = 0
    transposed = False

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int | tuple,
                 stride: int | tuple = 1, padding: int | tuple | str = 0,
                 dilation: int | tuple = 1, groups: int = 1, bias: bool = True,
                 padding_mode: str = "zeros", *, key: Any = None, dtype: Any = None,
                 backend: str | None = None, device: str | Device | None = None) -> None:
        super().__init__()
        n = self.dims
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.kernel_size, self.stride = _tuple(kernel_size, n), _tuple(stride, n)
        self.padding = padding if isinstance(padding, str) else _tuple(padding, n)
        self.dilation, self.padding_mode = _tuple(dilation, n), padding_mode
        self.output_padding = (0,) * n
        self._check()
        first, second = ((in_channels, out_channels) if self.transposed
                         else (out_channels, in_channels))
        shape = (first, second // groups) + self.kernel_size
        fan_in = math.prod(shape[1:])  # PyTorch's: the weight's second axis times the kernel
        factory = {"dtype": dtype, "backend": backend, "device": device}
        weight_key, bias_key = split_key(key, 2)
        self.weight = kaiming_uniform(shape, fan_in, key=weight_key, **factory)
        self.bias = (kaiming_uniform((out_channels,), fan_in, key=bias_key, **factory) if bias
                     else None)

    def _check(self) -> None:
        """PyTorch's checks of a convolution layer's arguments, with its messages."""
        if self.groups <= 0:
            raise ValueError(f"groups must be a positive integer (got groups={self.groups})")
        for name in ("in_channels", "out_channels"):
            if getattr(self, name) % self.groups:
                raise ValueError(f"{name} must be divisible by groups ({name}="
                                 f"{getattr(self, name)}, groups={self.groups})")
        if isinstance(self.padding, str) and self.padding not in ("valid", "same"):
            raise ValueError(f"Invalid padding string {self.padding!r}, should be one of "
                             f"{{'valid', 'same'}}")
        if self.padding == "same" and any(s != 1 for s in self.stride):
            raise ValueError(f"padding='same' is not supported for strided convolutions "
                             f"(stride={self.stride})")
        if self.padding_mode not in _PADDING_MODES:
            raise ValueError(f"padding_mode must be one of {list(_PADDING_MODES)}, but got "
                             f"padding_mode={self.padding_mode!r}")

    def _pad_widths(self) -> tuple:
        """The padding as `pad`'s tuple: (lo, hi) per axis, the last axis first."""
        if self.padding == "valid":
            return (0, 0) * self.dims
        if self.padding == "same":
            totals = [d * (k - 1) for k, d in zip(self.kernel_size, self.dilation, strict=True)]
            pairs = [(t // 2, t - t // 2) for t in totals]
        else:
            pairs = [(p, p) for p in self.padding]
        return tuple(w for pair in reversed(pairs) for w in pair)

    def forward(self, x: Tensor) -> Tensor:
        if self.padding_mode == "zeros":
            return self.convolve(x, self.weight, self.bias, self.stride, self.padding,
                                 self.dilation, self.groups)
        padded = padding.pad(x, self._pad_widths(), self.padding_mode)
        return self.convolve(padded, self.weight, self.bias, self.stride, 0, self.dilation,
                             self.groups)

    def extra_repr(self) -> str:
        n = self.dims
        text = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}")
        if self.padding != (0,) * n:
            text += f", padding={self.padding}"
        if self.dilation != (1,) * n:
            text += f", dilation={self.dilation}"
        if self.output_padding != (0,) * n:
            text += f", output_padding={self.output_padding}"
        if self.groups != 1:
            text += f", groups={self.groups}"
        if self.bias is None:
            text += ", bias=False"
        if self.padding_mode != "zeros":
            text += f", padding_mode={self.padding_mode}"
        return text


class Conv1d(_ConvNd):
    """A 1-d convolution of (batch, in_channels, length) inputs; PyTorch's arguments."""

    dims = 1
    convolve = staticmethod(convolution.conv1d)


class Conv2d(_ConvNd):
    """A 2-d convolution of (batch, in_channels, height, width) inputs; PyTorch's arguments."""

    dims = 2
    convolve = staticmethod(convolution.conv2d)


class Conv3d(_ConvNd):
    """A 3-d convolution of (batch, in_channels, depth, height, width) inputs; PyTorch's
    arguments."""

    dims = 3
    convolve = staticmethod(convolution.conv3d)


class _ConvTransposeNd(_ConvNd):
    """What the transposed convolution layers share: PyTorch's arguments (`output_padding`,
    `groups` before `bias` and `dilation`), and its `output_size=` in `forward`."""

    transposed = True

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int | tuple,
                 stride: int | tuple = 1, padding: int | tuple = 0,
                 output_padding: int | tuple = 0, groups: int = 1, bias: bool = True,
                 dilation: int | tuple = 1, padding_mode: str = "zeros", *, key: Any = None,
                 dtype: Any = None, backend: str | None = None,
                 device: str | Device | None = None) -> None:
        if padding_mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for {type(self).__name__}')
        if isinstance(padding, str):
            raise ValueError(f"{type(self).__name__} takes no padding={padding!r}; give the "
                             f"padding as numbers")
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         groups, bias, padding_mode, key=key, dtype=dtype, backend=backend,
                         device=device)
        self.output_padding = _tuple(output_padding, self.dims)

    def forward(self, x: Tensor, output_size: Any = None) -> Tensor:
        output_padding = (self.output_padding if output_size is None
                          else self._output_padding(x, output_size))
        return self.convolve(x, self.weight, self.bias, self.stride, self.padding,
                             output_padding, self.groups, self.dilation)

    def _output_padding(self, x: Tensor, output_size: Any) -> tuple:
        """The output padding that gives `output_size` (the spatial sizes, or the whole
        shape), with PyTorch's checks and messages."""
        n, leading = self.dims, 2 if x.ndim == self.dims + 2 else 1
        if len(output_size) == leading + n:
            output_size = output_size[leading:]
        sizes = tuple(output_size)
        if len(sizes) != n:
            raise ValueError(f"ConvTranspose{n}D: for {x.ndim}D input, output_size must have "
                             f"{n} or {leading + n} elements (got {len(sizes)})")
        smallest = [(m - 1) * s - 2 * p + d * (k - 1) + 1 for m, s, p, d, k in zip(
            x.shape[leading:], self.stride, self.padding, self.dilation, self.kernel_size,
            strict=True)]
        largest = [size + s - 1 for size, s in zip(smallest, self.stride, strict=True)]
        if any(not lo <= size <= hi for size, lo, hi in zip(sizes, smallest, largest,
                                                              strict=True)):
            raise ValueError(f"requested an output size of {output_size}, but valid sizes range "
                             f"from {smallest} to {largest} (for an input of "
                             f"{list(x.shape[leading:])})")
        return tuple(size - lo for size, lo in zip(sizes, smallest, strict=True))


class ConvTranspose1d(_ConvTransposeNd):
    """A 1-d transposed convolution of (batch, in_channels, length) inputs."""

    dims = 1
    convolve = staticmethod(transposed_convolution.conv_transpose1d)


class ConvTranspose2d(_ConvTransposeNd):
    """A 2-d transposed convolution of (batch, in_channels, height, width) inputs."""

    dims = 2
    convolve = staticmethod(transposed_convolution.conv_transpose2d)


class ConvTranspose3d(_ConvTransposeNd):
    """A 3-d transposed convolution of (batch, in_channels, depth, height, width) inputs."""

    dims = 3
    convolve = staticmethod(transposed_convolution.conv_transpose3d)


class MaxPoolNd(Module):
    """The maximum of each window (and its index, with `return_indices`); the stride is the
    kernel size unless given. A subclass names its pooling function (`pool`)."""

    def __init__(self, kernel_size: int | tuple, stride: int | tuple | None = None,
                 padding: int | tuple = 0, dilation: int | tuple = 1,
                 return_indices: bool = False, ceil_mode: bool = False) -> None:
        super().__init__()
        self.kernel_size, self.stride = kernel_size, kernel_size if stride is None else stride
        self.padding, self.dilation = padding, dilation
        self.return_indices, self.ceil_mode = return_indices, ceil_mode

    def forward(self, x: Tensor) -> Any:
        return self.pool(x, self.kernel_size, self.stride, self.padding, self.dilation,
                         self.ceil_mode, self.return_indices)

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}, "
                f"dilation={self.dilation}, ceil_mode={self.ceil_mode}")


class MaxPool2d(MaxPoolNd):
    """The maximum of each 2-d window."""

    pool = staticmethod(pooling.max_pool2d)


class MaxPool3d(MaxPoolNd):
    """The maximum of each 3-d window."""

    pool = staticmethod(pooling.max_pool3d)


class AvgPoolNd(Module):
    """The mean of each window; the stride is the kernel size unless given. A subclass
    names its pooling function (`pool`)."""

    def __init__(self, kernel_size: int | tuple, stride: int | tuple | None = None,
                 padding: int | tuple = 0, ceil_mode: bool = False,
                 count_include_pad: bool = True, divisor_override: int | None = None) -> None:
        super().__init__()
        self.kernel_size, self.stride = kernel_size, kernel_size if stride is None else stride
        self.padding, self.ceil_mode = padding, ceil_mode
        self.count_include_pad, self.divisor_override = count_include_pad, divisor_override

    def forward(self, x: Tensor) -> Tensor:
        return self.pool(x, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                         self.count_include_pad, self.divisor_override)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AvgPool2d(AvgPoolNd):
    """The mean of each 2-d window."""

    pool = staticmethod(pooling.avg_pool2d)


class AvgPool3d(AvgPoolNd):
    """The mean of each 3-d window."""

    pool = staticmethod(pooling.avg_pool3d)
