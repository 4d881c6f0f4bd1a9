"""PyTorch's functionals made of the pools, composed as PyTorch composes them (so the
values, gradients and nodes are its): the power-average pools `lp_pool1d/2d/3d`,
`local_response_norm`, and the `_with_indices` spellings of the max pools, which always
return `(values, indices)`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from ..tensor import Tensor
from . import functional as F
from . import more_functional as M
from . import pooling as P
from . import shape_ops as S
from .functional_3d import adaptive_max_pool3d
from .operands import as_tensor
from .padding import pad
from .pointwise import sign

Ints = int | Sequence[int]


def _lp_pool(n: int, max_pool: Callable, avg_pool: Callable, input: Tensor,  # noqa: A002
             norm_type: float, kernel_size: Ints, stride: Ints | None,
             ceil_mode: bool) -> Tensor:
    """`(sum over each window of x ** p) ** (1 / p)`: the window mean of `x ** p` times the
    window's size; p = inf is the max pool of |x|, p = -inf minus that of -|x|."""
    x = as_tensor(input)
    if norm_type == math.inf:
        return max_pool(F.abs(x), kernel_size, stride, 0, 1, ceil_mode)
    if norm_type == -math.inf:
        return -max_pool(-F.abs(x), kernel_size, stride, 0, 1, ceil_mode)
    out = avg_pool(x ** norm_type, kernel_size, stride, 0, ceil_mode)
    taps = kernel_size ** n if isinstance(kernel_size, int) else math.prod(kernel_size)
    return ((sign(out) * F.relu(F.abs(out))) * taps) ** (1.0 / norm_type)


def lp_pool1d(input: Tensor, norm_type: float, kernel_size: Ints,  # noqa: A002
              stride: Ints | None = None, ceil_mode: bool = False) -> Tensor:
    """The `norm_type`-norm of each window along the last axis."""
    return _lp_pool(1, P.max_pool1d, P.avg_pool1d, input, norm_type, kernel_size, stride,
                    ceil_mode)


def lp_pool2d(input: Tensor, norm_type: float, kernel_size: Ints,  # noqa: A002
              stride: Ints | None = None, ceil_mode: bool = False) -> Tensor:
    """The `norm_type`-norm of each window of the last two axes."""
    return _lp_pool(2, P.max_pool2d, P.avg_pool2d, input, norm_type, kernel_size, stride,
                    ceil_mode)


def lp_pool3d(input: Tensor, norm_type: float, kernel_size: Ints,  # noqa: A002
              stride: Ints | None = None, ceil_mode: bool = False) -> Tensor:
    """The `norm_type`-norm of each window of the last three axes."""
    return _lp_pool(3, P.max_pool3d, P.avg_pool3d, input, norm_type, kernel_size, stride,
                    ceil_mode)


def local_response_norm(input: Tensor, size: int, alpha: float = 1e-4,  # noqa: A002
                        beta: float = 0.75, k: float = 1.0) -> Tensor:
    """Each element divided by `(k + alpha * mean of the squares of the `size` channels
    around it) ** beta`: a window over the channel axis, zero past its ends."""
    x = as_tensor(input)
    if x.ndim < 3:
        raise ValueError(f"Expected 3D or higher dimensionality                          "
                         f"input (got {x.ndim} dimensions)")
    if x.numel() == 0:
        return x
    reach = (size // 2, (size - 1) // 2)
    squares = x * x
    if x.ndim == 3:
        padded = pad(S.unsqueeze(squares, 1), (0, 0, *reach))
        div = S.squeeze(P.avg_pool2d(padded, (size, 1), stride=1), 1)
    else:
        volumes = S.reshape(squares, (x.shape[0], 1, x.shape[1], x.shape[2], -1))
        padded = pad(volumes, (0, 0, 0, 0, *reach))
        div = S.reshape(S.squeeze(P.avg_pool3d(padded, (size, 1, 1), stride=1), 1), x.shape)
    return x / (div * alpha + k) ** beta


# ------------------------------------------------------------------ the `_with_indices` names
def max_pool1d_with_indices(input: Tensor, kernel_size: Ints,  # noqa: A002
                            stride: Ints | None = None, padding: Ints = 0, dilation: Ints = 1,
                            ceil_mode: bool = False,
                            return_indices: bool = False) -> tuple[Tensor, Tensor]:
    """`max_pool1d(..., return_indices=True)`; `return_indices` is ignored, as PyTorch's."""
    return P.max_pool1d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def max_pool2d_with_indices(input: Tensor, kernel_size: Ints,  # noqa: A002
                            stride: Ints | None = None, padding: Ints = 0, dilation: Ints = 1,
                            ceil_mode: bool = False,
                            return_indices: bool = False) -> tuple[Tensor, Tensor]:
    """`max_pool2d(..., return_indices=True)`; `return_indices` is ignored, as PyTorch's."""
    return P.max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def max_pool3d_with_indices(input: Tensor, kernel_size: Ints,  # noqa: A002
                            stride: Ints | None = None, padding: Ints = 0, dilation: Ints = 1,
                            ceil_mode: bool = False,
                            return_indices: bool = False) -> tuple[Tensor, Tensor]:
    """`max_pool3d(..., return_indices=True)`; `return_indices` is ignored, as PyTorch's."""
    return P.max_pool3d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def adaptive_max_pool1d_with_indices(input: Tensor, output_size: Any,  # noqa: A002
                                     return_indices: bool = False) -> tuple[Tensor, Tensor]:
    """`adaptive_max_pool1d(..., return_indices=True)` (`return_indices` is ignored)."""
    return M.adaptive_max_pool1d(input, output_size, True)


def adaptive_max_pool2d_with_indices(input: Tensor, output_size: Any,  # noqa: A002
                                     return_indices: bool = False) -> tuple[Tensor, Tensor]:
    """`adaptive_max_pool2d(..., return_indices=True)` (`return_indices` is ignored)."""
    return M.adaptive_max_pool2d(input, output_size, True)


def adaptive_max_pool3d_with_indices(input: Tensor, output_size: Any,  # noqa: A002
                                     return_indices: bool = False) -> tuple[Tensor, Tensor]:
    """`adaptive_max_pool3d(..., return_indices=True)` (`return_indices` is ignored)."""
    return adaptive_max_pool3d(input, output_size, True)
