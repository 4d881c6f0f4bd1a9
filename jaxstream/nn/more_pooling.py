"""More of PyTorch's window layers: the power-average pools LPPool1d/2d/3d, the max
unpools MaxUnpool1d/2d/3d, Fold and Unfold (col2im and im2col), and the fixed-mode
resamplers UpsamplingNearest2d and UpsamplingBilinear2d (align_corners=True).

Each calls the functional of the same name with its configuration, takes PyTorch's
constructor arguments and keeps them as PyTorch's does, so that it prints as PyTorch's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..ops import folding, pool_compositions, unpooling
from ..tensor import Tensor
from .module import Module
from .more_layers import Upsample


class _LPPoolNd(Module):
    """`F.lp_pool*d` with a fixed norm and geometry; a subclass names its function."""

    pool: Callable[..., Tensor]

    def __init__(self, norm_type: float, kernel_size: Any, stride: Any = None,
                 ceil_mode: bool = False) -> None:
        super().__init__()
        self.norm_type, self.kernel_size = norm_type, kernel_size
        self.stride, self.ceil_mode = stride, ceil_mode

    def forward(self, x: Tensor) -> Tensor:
        return self.pool(x, float(self.norm_type), self.kernel_size, self.stride, self.ceil_mode)

    def extra_repr(self) -> str:
        return (f"norm_type={self.norm_type}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}, ceil_mode={self.ceil_mode}")


class LPPool1d(_LPPoolNd):
    """The `norm_type`-norm of each window along the last axis."""

    pool = staticmethod(pool_compositions.lp_pool1d)


class LPPool2d(_LPPoolNd):
    """The `norm_type`-norm of each window of the last two axes."""

    pool = staticmethod(pool_compositions.lp_pool2d)


class LPPool3d(_LPPoolNd):
    """The `norm_type`-norm of each window of the last three axes."""

    pool = staticmethod(pool_compositions.lp_pool3d)


def _tuple(value: Any, n: int) -> tuple:
    """PyTorch's `_single`, `_pair`, `_triple`: a number repeated, an iterable as a tuple."""
    return tuple(value) if isinstance(value, tuple | list) else (value,) * n


class _MaxUnpoolNd(Module):
    """`F.max_unpool*d` with a fixed geometry (the stride is the kernel size unless given);
    a subclass names its function and its number of axes."""

    dims = 1
    unpool: Callable[..., Tensor]

    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0) -> None:
        super().__init__()
        self.kernel_size = _tuple(kernel_size, self.dims)
        self.stride = _tuple(kernel_size if stride is None else stride, self.dims)
        self.padding = _tuple(padding, self.dims)

    def forward(self, x: Tensor, indices: Tensor, output_size: Any = None) -> Tensor:
        return self.unpool(x, indices, self.kernel_size, self.stride, self.padding, output_size)

    def extra_repr(self) -> str:
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class MaxUnpool1d(_MaxUnpoolNd):
    """The values of a max pool along the last axis put back at their indices."""

    unpool = staticmethod(unpooling.max_unpool1d)


class MaxUnpool2d(_MaxUnpoolNd):
    """The values of a 2-d max pool put back at their indices."""

    dims = 2
    unpool = staticmethod(unpooling.max_unpool2d)


class MaxUnpool3d(_MaxUnpoolNd):
    """The values of a 3-d max pool put back at their indices."""

    dims = 3
    unpool = staticmethod(unpooling.max_unpool3d)


class _Blocks(Module):
    """What Fold and Unfold share: the blocks' geometry, kept as given."""

    def __init__(self, kernel_size: Any, dilation: Any = 1, padding: Any = 0,
                 stride: Any = 1) -> None:
        super().__init__()
        self.kernel_size, self.dilation = kernel_size, dilation
        self.padding, self.stride = padding, stride

    def extra_repr(self) -> str:
        return (f"kernel_size={self.kernel_size}, dilation={self.dilation}, "
                f"padding={self.padding}, stride={self.stride}")


class Unfold(_Blocks):
    """Every block of a (N, C, H, W) input as a column (`F.unfold`, im2col)."""

    def forward(self, x: Tensor) -> Tensor:
        return folding.unfold(x, self.kernel_size, self.dilation, self.padding, self.stride)


class Fold(_Blocks):
    """Columns summed back into (N, C, *output_size) (`F.fold`, col2im): Unfold's adjoint."""

    def __init__(self, output_size: Any, kernel_size: Any, dilation: Any = 1, padding: Any = 0,
                 stride: Any = 1) -> None:
        super().__init__(kernel_size, dilation, padding, stride)
        self.output_size = output_size

    def forward(self, x: Tensor) -> Tensor:
        return folding.fold(x, self.output_size, self.kernel_size, self.dilation, self.padding,
                            self.stride)

    def extra_repr(self) -> str:
        return f"output_size={self.output_size}, {super().extra_repr()}"


class UpsamplingNearest2d(Upsample):
    """`Upsample(size, scale_factor, mode="nearest")`."""

    def __init__(self, size: Any = None, scale_factor: Any = None) -> None:
        super().__init__(size, scale_factor, mode="nearest")


class UpsamplingBilinear2d(Upsample):
    """`Upsample(size, scale_factor, mode="bilinear", align_corners=True)`."""

    def __init__(self, size: Any = None, scale_factor: Any = None) -> None:
        super().__init__(size, scale_factor, mode="bilinear", align_corners=True)
