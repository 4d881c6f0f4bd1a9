"""More of PyTorch's layers: GroupNorm and RMSNorm, the padding layers, 1-d and adaptive
pooling, Upsample, the pixel shuffles, Bilinear, the distances and channel dropout.

Each calls the functional of the same name with its configuration, takes PyTorch's
constructor arguments and prints as PyTorch's does. Layers with parameters take `key=` and
the factory arguments `dtype=`, `backend=`, `device=` as Linear does.
"""

from __future__ import annotations

from typing import Any

from ..devices import Device
from ..ops import distances, interpolation, padding, pooling
from ..ops import more_functional as M
from ..ops.creation import ones, zeros
from ..tensor import Tensor
from .convolution import MaxPoolNd
from .init import kaiming_uniform, split_key
from .module import Module
from .parameter import Parameter


def _factory(dtype: Any, backend: str | None, device: str | Device | None) -> dict[str, Any]:
    return {"dtype": dtype, "backend": backend, "device": device}


class GroupNorm(Module):
    """Normalise groups of channels of (N, C, *) inputs; per-channel weight and bias."""

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5,
                 affine: bool = True, *, bias: bool = True, dtype: Any = None,
                 backend: str | None = None, device: str | Device | None = None) -> None:
        super().__init__()
        if num_channels % num_groups:
            raise ValueError(f"num_channels ({num_channels}) must be divisible by num_groups "
                             f"({num_groups})")
        self.num_groups, self.num_channels, self.eps = num_groups, num_channels, eps
        self.affine, self.has_bias = affine, affine and bias
        factory = _factory(dtype, backend, device)
        self.weight = Parameter(ones((num_channels,), **factory)) if affine else None
        self.bias = Parameter(zeros((num_channels,), **factory)) if self.has_bias else None

    def forward(self, x: Tensor) -> Tensor:
        return M.group_norm(x, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}, "
                f"bias={self.has_bias}")


class RMSNorm(Module):
    """Divide by the root mean square over the trailing `normalized_shape` axes."""

    def __init__(self, normalized_shape: int | tuple[int, ...] | list[int],
                 eps: float | None = None, elementwise_affine: bool = True, *,
                 dtype: Any = None, backend: str | None = None,
                 device: str | Device | None = None) -> None:
        super().__init__()
        if isinstance(normalized_shape, int):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.eps, self.elementwise_affine = eps, elementwise_affine
        self.weight = (Parameter(ones(self.normalized_shape, **_factory(dtype, backend, device)))
                       if elementwise_affine else None)

    def forward(self, x: Tensor) -> Tensor:
        return M.rms_norm(x, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}")


# ------------------------------------------------------------------ padding
class _Pad(Module):
    """`F.pad` with a fixed padding and mode; `dims` is the number of padded axes."""

    dims = 1
    mode = "constant"

    def __init__(self, padding: int | tuple[int, ...]) -> None:
        super().__init__()
        self.padding = (padding,) * (2 * self.dims) if isinstance(padding, int) \
            else tuple(padding)

    def forward(self, x: Tensor) -> Tensor:
        return padding.pad(x, self.padding, self.mode)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class _ConstantPad(_Pad):
    def __init__(self, padding: int | tuple[int, ...], value: float) -> None:
        super().__init__(padding)
        self.value = value

    def forward(self, x: Tensor) -> Tensor:
        return padding.pad(x, self.padding, "constant", self.value)

    def extra_repr(self) -> str:
        return f"padding={self.padding}, value={self.value}"


class ConstantPad1d(_ConstantPad):
    """Pad the last axis with `value`."""


class ConstantPad2d(_ConstantPad):
    """Pad the last two axes with `value`."""

    dims = 2


class ZeroPad1d(_ConstantPad):
    """Pad the last axis with zeros."""

    def __init__(self, padding: int | tuple[int, ...]) -> None:
        super().__init__(padding, 0.0)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class ZeroPad2d(ZeroPad1d):
    """Pad the last two axes with zeros."""

    dims = 2


class ReflectionPad1d(_Pad):
    mode = "reflect"


class ReflectionPad2d(_Pad):
    dims, mode = 2, "reflect"


class ReplicationPad1d(_Pad):
    mode = "replicate"


class ReplicationPad2d(_Pad):
    dims, mode = 2, "replicate"


class _CircularPad(_Pad):
    """Circular padding, which takes batched or unbatched inputs only (PyTorch's check)."""

    mode = "circular"

    def forward(self, x: Tensor) -> Tensor:
        if x.ndim not in (self.dims + 1, self.dims + 2):
            raise ValueError(f"expected {self.dims + 1}D or {self.dims + 2}D input (got "
                             f"{x.ndim}D input of shape {x.shape})")
        return super().forward(x)


class CircularPad1d(_CircularPad):
    pass


class CircularPad2d(_CircularPad):
    dims = 2


# ------------------------------------------------------------------ pooling and resampling
class MaxPool1d(MaxPoolNd):
    """The maximum of each window along the last axis."""

    pool = staticmethod(pooling.max_pool1d)


def _single(value: int | tuple) -> tuple:
    return (value,) if isinstance(value, int) else tuple(value)


class AvgPool1d(Module):
    """The mean of each window along the last axis; the stride is the kernel size unless
    given."""

    def __init__(self, kernel_size: int | tuple, stride: int | tuple | None = None,
                 padding: int | tuple = 0, ceil_mode: bool = False,
                 count_include_pad: bool = True) -> None:
        super().__init__()
        self.kernel_size = _single(kernel_size)
        self.stride = _single(kernel_size if stride is None else stride)
        self.padding, self.ceil_mode = _single(padding), ceil_mode
        self.count_include_pad = count_include_pad

    def forward(self, x: Tensor) -> Tensor:
        return pooling.avg_pool1d(x, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                                  self.count_include_pad)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class _AdaptivePool(Module):
    """What the adaptive pools share: an output size (None entries keep the input's)."""

    def __init__(self, output_size: Any) -> None:
        super().__init__()
        self.output_size = tuple(output_size) if isinstance(output_size, list) else output_size

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}"


class AdaptiveAvgPool1d(_AdaptivePool):
    def forward(self, x: Tensor) -> Tensor:
        return M.adaptive_avg_pool1d(x, self.output_size)


class AdaptiveAvgPool2d(_AdaptivePool):
    def forward(self, x: Tensor) -> Tensor:
        return M.adaptive_avg_pool2d(x, self.output_size)


class _AdaptiveMaxPool(_AdaptivePool):
    def __init__(self, output_size: Any, return_indices: bool = False) -> None:
        super().__init__(output_size)
        self.return_indices = return_indices


class AdaptiveMaxPool1d(_AdaptiveMaxPool):
    def forward(self, x: Tensor) -> Any:
        return M.adaptive_max_pool1d(x, self.output_size, self.return_indices)


class AdaptiveMaxPool2d(_AdaptiveMaxPool):
    def forward(self, x: Tensor) -> Any:
        return M.adaptive_max_pool2d(x, self.output_size, self.return_indices)


class Upsample(Module):
    """`F.interpolate` to a fixed `size` or by a fixed `scale_factor` (exactly one given)."""

    def __init__(self, size: int | tuple | None = None, scale_factor: Any = None,
                 mode: str = "nearest", align_corners: bool | None = None,
                 recompute_scale_factor: bool | None = None) -> None:
        super().__init__()
        self.size = tuple(size) if isinstance(size, list) else size
        if isinstance(scale_factor, tuple | list):
            self.scale_factor: Any = tuple(float(f) for f in scale_factor)
        else:
            self.scale_factor = float(scale_factor) if scale_factor else None
        self.mode, self.align_corners = mode, align_corners
        self.recompute_scale_factor = recompute_scale_factor

    def forward(self, x: Tensor) -> Tensor:
        return interpolation.interpolate(x, self.size, self.scale_factor, self.mode,
                                         self.align_corners, self.recompute_scale_factor)

    def extra_repr(self) -> str:
        if self.scale_factor is not None:
            return f"scale_factor={self.scale_factor!r}, mode={self.mode!r}"
        return f"size={self.size!r}, mode={self.mode!r}"


class PixelShuffle(Module):
    def __init__(self, upscale_factor: int) -> None:
        super().__init__()
        self.upscale_factor = upscale_factor

    def forward(self, x: Tensor) -> Tensor:
        return M.pixel_shuffle(x, self.upscale_factor)

    def extra_repr(self) -> str:
        return f"upscale_factor={self.upscale_factor}"


class PixelUnshuffle(Module):
    def __init__(self, downscale_factor: int) -> None:
        super().__init__()
        self.downscale_factor = downscale_factor

    def forward(self, x: Tensor) -> Tensor:
        return M.pixel_unshuffle(x, self.downscale_factor)

    def extra_repr(self) -> str:
        return f"downscale_factor={self.downscale_factor}"


# ------------------------------------------------------------------ bilinear, distances
class Bilinear(Module):
    """`y = x1 @ weight[o] @ x2 + bias[o]`; weight and bias uniform in ±1/sqrt(in1_features),
    PyTorch's initialisation."""

    def __init__(self, in1_features: int, in2_features: int, out_features: int,
                 bias: bool = True, *, key: Any = None, dtype: Any = None,
                 backend: str | None = None, device: str | Device | None = None) -> None:
        super().__init__()
        self.in1_features, self.in2_features = in1_features, in2_features
        self.out_features = out_features
        factory = _factory(dtype, backend, device)
        weight_key, bias_key = split_key(key, 2)
        self.weight = kaiming_uniform((out_features, in1_features, in2_features), in1_features,
                                      key=weight_key, **factory)
        self.bias = (kaiming_uniform((out_features,), in1_features, key=bias_key, **factory)
                     if bias else None)

    def forward(self, x1: Tensor, x2: Tensor) -> Tensor:
        return M.bilinear(x1, x2, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")


class CosineSimilarity(Module):
    def __init__(self, dim: int = 1, eps: float = 1e-8) -> None:
        super().__init__()
        self.dim, self.eps = dim, eps

    def forward(self, x1: Tensor, x2: Tensor) -> Tensor:
        return distances.cosine_similarity(x1, x2, self.dim, self.eps)


class PairwiseDistance(Module):
    def __init__(self, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False) -> None:
        super().__init__()
        self.norm, self.eps, self.keepdim = p, eps, keepdim

    def forward(self, x1: Tensor, x2: Tensor) -> Tensor:
        return distances.pairwise_distance(x1, x2, self.norm, self.eps, self.keepdim)


# ------------------------------------------------------------------ channel dropout
class _ChannelDropout(Module):
    """Zero whole channels with probability `p`; the mask comes from the call's `key=` (pure)
    or the current draw source, as Dropout's."""

    def __init__(self, p: float = 0.5, inplace: bool = False) -> None:
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p, self.inplace = p, inplace

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"


class Dropout1d(_ChannelDropout):
    def forward(self, x: Tensor, key: Any = None) -> Tensor:
        return M.channel_dropout("dropout1d", x, self.p, self.training, self.inplace, key)


class Dropout2d(_ChannelDropout):
    def forward(self, x: Tensor, key: Any = None) -> Tensor:
        return M.channel_dropout("dropout2d", x, self.p, self.training, self.inplace, key)
