"""max_unpool1d/2d/3d with PyTorch's arguments, checks and messages: each value put at
the flat index in its plane that `max_pool*d(return_indices=True)` gave it, zeros
elsewhere (`MaxUnpool2DBackward0`, `MaxUnpool3DBackward0`; the 1-d one runs as a 2-d one
on a width of one, as PyTorch's).

Where two values name one place (windows that overlap), the later one in row-major order
is written, as PyTorch's loop writes it; the gradient of every value is the output's
gradient at its index. The indices are checked on the host where their values are known
(not inside a `js.compile` trace); the int32 indices of JAX's max pools are taken too.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from ..tensor import Tensor
from . import rules as R
from . import shape_ops as S
from .dispatch import apply
from .indexing import index_along
from .opdef import OpContext, OpDef
from .operands import as_tensor, host_values

Ints = int | Sequence[int]


def _unpool(backend: Any, values: Any, indices: Any, output_size: tuple) -> Any:
    """Zeros of `lead + output_size` with each plane's values at their indices: the last
    value that names a place wins (the largest position among those naming it)."""
    xp = backend.xp
    n = len(output_size)
    lead = values.shape[:-n]
    rows, count, plane = math.prod(lead), math.prod(values.shape[-n:]), math.prod(output_size)
    row_starts = xp.reshape(xp.arange(rows, dtype=indices.dtype) * plane, (rows, 1))
    places = xp.reshape(xp.reshape(indices, (rows, count)) + row_starts, (-1,))
    nobody = xp.full((rows * plane,), -1, dtype=indices.dtype)
    winners = backend.combine_at(nobody, places, xp.arange(rows * count, dtype=indices.dtype),
                                 "max")
    flat = xp.concat([xp.reshape(values, (-1,)), xp.zeros((1,), dtype=values.dtype)])
    picked = xp.take(flat, xp.where(winners < 0, rows * count, winners))
    return xp.reshape(picked, lead + output_size)


def _dunpool(g: Tensor, ctx: OpContext) -> Tensor:
    """The output's gradient at each value's index."""
    indices, sizes = ctx.inputs[1], ctx.params["output_size"]
    n = len(sizes)
    planes = g.reshape(tuple(g.shape[:-n]) + (math.prod(sizes),))
    flat = indices.array_backend.xp.reshape(
        indices.array, tuple(indices.shape[:-n]) + (math.prod(indices.shape[-n:]),))
    picked = apply(R.TAKE_ALONG, planes, index=index_along(flat, planes.ndim - 1))
    return picked.reshape(ctx.shapes[0])


def _node(args: tuple, params: dict) -> str:
    return f"MaxUnpool{len(params['output_size'])}DBackward0"


MAX_UNPOOL = OpDef("max_unpool", _node, _unpool, _dunpool, None, save_inputs=(1,),
                   backend_kernel=True)


def _ints(value: Ints, n: int) -> tuple:
    values = (value,) if isinstance(value, int) else tuple(value)
    return values * n if len(values) == 1 else values


def _output_size(x: Tensor, kernel: tuple, stride: tuple, padding: tuple,
                 output_size: Ints | None) -> tuple:
    """PyTorch's `_unpool_output_size`: the pooled input's size, or `output_size` (its
    spatial sizes, or all of them) where it is within a stride of that."""
    n = len(kernel)
    default = tuple((size - 1) * s + k - 2 * p for size, k, s, p in
                    zip(x.shape[-n:], kernel, stride, padding, strict=True))
    if output_size is None:
        sizes = default
    else:
        given = output_size
        sizes = _ints(output_size, n) if isinstance(output_size, int) else tuple(output_size)
        if len(sizes) == n + 2:
            sizes = sizes[2:]
        if len(sizes) != n:
            raise ValueError(f"output_size should be a sequence containing {n} or {n + 2} "
                             f"elements, but it has a length of '{len(sizes)}'")
        for d, (size, s, near) in enumerate(zip(sizes, stride, default, strict=True)):
            if not near - s < size < near + s:
                raise ValueError(f'invalid output_size "{given}" (dim {d} must be between '
                                 f'{near - s} and {near + s})')
    for d, size in enumerate(sizes):
        if size < 0:
            raise ValueError(f"max_unpooling: output_size must contain non-negative spatial "
                             f"dimensions, but got output_size[{d}]={size}")
    return tuple(int(size) for size in sizes)


def _check(n: int, x: Tensor, indices: Tensor, sizes: tuple) -> None:
    """PyTorch's checks of the values and their indices."""
    if x.ndim not in (n + 1, n + 2):
        raise RuntimeError(f"Input to max_unpooling{n}d should be a {n + 1}d or {n + 2}d "
                           f"Tensor, but got a tensor with {x.ndim} dimensions.")
    if indices.dtype.kind != "i":  # JAX's int32 indices too
        raise RuntimeError(f"elements in indices should be type int64 but got: "
                           f"{indices.dtype}; cast them first, e.g. indices.long()")
    if tuple(indices.shape) != tuple(x.shape):
        raise RuntimeError(f"Expected shape of indices to be same as that of the input tensor "
                           f"({list(x.shape)}) but got indices tensor with shape: "
                           f"{list(indices.shape)}")
    known = host_values(indices)
    if known is not None and known.size:
        wrong = known[(known < 0) | (known >= math.prod(sizes))]
        if wrong.size:
            raise RuntimeError(f"Found an invalid max index: {wrong.flat[0]} (output volumes "
                               f"are of size {'x'.join(map(str, sizes))})")


def _max_unpool(n: int, input: Tensor, indices: Any, kernel_size: Ints,  # noqa: A002
                stride: Ints | None, padding: Ints, output_size: Ints | None) -> Tensor:
    x = as_tensor(input)
    indices = as_tensor(indices, x)
    kernel = _ints(kernel_size, n)
    strides = kernel if stride is None else _ints(stride, n)
    sizes = _output_size(x, kernel, strides, _ints(padding, n), output_size)
    if n == 1:  # as a 2-d one on a width of one (PyTorch's SqueezeBackward1)
        _check(2, S.unsqueeze(x, -1), S.unsqueeze(indices, -1), sizes + (1,))
        out = apply(MAX_UNPOOL, S.unsqueeze(x, -1), S.unsqueeze(indices, -1),
                    output_size=sizes + (1,))
        return S.squeeze(out, -1)
    _check(n, x, indices, sizes)
    return apply(MAX_UNPOOL, x, indices, output_size=sizes)


def max_unpool1d(input: Tensor, indices: Any, kernel_size: Ints,  # noqa: A002
                 stride: Ints | None = None, padding: Ints = 0,
                 output_size: Ints | None = None) -> Tensor:
    """The values of a (N, C, L) or (C, L) max pool put back at their indices along L."""
    return _max_unpool(1, input, indices, kernel_size, stride, padding, output_size)


def max_unpool2d(input: Tensor, indices: Any, kernel_size: Ints,  # noqa: A002
                 stride: Ints | None = None, padding: Ints = 0,
                 output_size: Ints | None = None) -> Tensor:
    """The values of a (N, C, H, W) or (C, H, W) max pool put back at their flat indices
    in each plane."""
    return _max_unpool(2, input, indices, kernel_size, stride, padding, output_size)


def max_unpool3d(input: Tensor, indices: Any, kernel_size: Ints,  # noqa: A002
                 stride: Ints | None = None, padding: Ints = 0,
                 output_size: Ints | None = None) -> Tensor:
    """The values of a (N, C, D, H, W) or (C, D, H, W) max pool put back at their flat
    indices in each volume."""
    return _max_unpool(3, input, indices, kernel_size, stride, padding, output_size)

