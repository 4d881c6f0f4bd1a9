"""Differentiable operators and factories: the public op functions.

Each function normalizes its arguments and calls `dispatch.apply` with an entry
of the op table (`rules`). Nothing here knows about a particular backend.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import amp, sanitizer
from ..autograd.grad_mode import state as grad_state
from ..backends import Backend, backend_of
from ..devices import Device
from ..streams import current_stream
from ..tensor import Tensor, tensor
from . import rules as R
from .dispatch import apply
from .opdef import OpContext, OpDef, record_node


def _operand(x: Any, like: Tensor | None = None) -> Any:
    """Tensors and Python numbers pass through; arrays become tensors (zero-copy)."""
    if isinstance(x, Tensor | bool | int | float):
        return x
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, numbers.Number):
        return x
    foreign = backend_of(x) is not None or hasattr(x, "__dlpack__")
    return tensor(x, backend=None if foreign or like is None else like.backend)


_PASS_THROUGH = (Tensor, float, int, bool)


def _binary(op: OpDef, a: Any, b: Any) -> Tensor:
    if type(a) in _PASS_THROUGH and type(b) in _PASS_THROUGH:
        return apply(op, a, b)
    like = a if isinstance(a, Tensor) else b if isinstance(b, Tensor) else None
    return apply(op, _operand(a, like), _operand(b, like))


# ------------------------------------------------------------------ arithmetic
def add(a: Any, b: Any) -> Tensor:
    return _binary(R.ADD, a, b)


def sub(a: Any, b: Any) -> Tensor:
    return _binary(R.SUB, a, b)


def mul(a: Any, b: Any) -> Tensor:
    return _binary(R.MUL, a, b)


def div(a: Any, b: Any) -> Tensor:
    return _binary(R.DIV, a, b)


def pow(a: Any, b: Any) -> Tensor:  # noqa: A001  (NumPy's name)
    if not isinstance(a, Tensor):
        return apply(R.RPOW, _operand(a, b), b)
    if isinstance(b, numbers.Number) and not isinstance(b, bool):
        return apply(R.POW_SCALAR, a, b)
    return _binary(R.POW, a, b)


def neg(a: Tensor) -> Tensor:
    return apply(R.NEG, a)


def where(condition: Any, a: Any, b: Any) -> Tensor:
    """Elementwise `a` where `condition` else `b` (condition gets no gradient)."""
    like = next((x for x in (condition, a, b) if isinstance(x, Tensor)), None)
    cond = _operand(condition, like)
    if not isinstance(cond, Tensor):
        raise TypeError("where: condition must be a boolean tensor or array")
    return apply(R.WHERE, cond, _operand(a, like), _operand(b, like))


def _unary(op: OpDef):
    def fn(x: Tensor) -> Tensor:
        return apply(op, x)

    fn.__name__ = op.name
    fn.__doc__ = f"Elementwise {op.name} (backward: {op.node_name})."
    return fn


exp = _unary(R.EXP)
log = _unary(R.LOG)
sin = _unary(R.SIN)
cos = _unary(R.COS)
tanh = _unary(R.TANH)
sigmoid = _unary(R.SIGMOID)
relu = _unary(R.RELU)
softplus = _unary(R.SOFTPLUS)
sqrt = _unary(R.SQRT)
abs = _unary(R.ABS)  # noqa: A001
sign = _unary(R.SIGN)
clone = _unary(R.CLONE)
zero_grad_to_history = _unary(R.ZERO)


def isnan_any(x: Tensor) -> Tensor:
    """Whether any element is NaN (a 0-d boolean tensor; what anomaly mode checks)."""
    return apply(R.ISNAN_ANY, x)


def tanh_backward(g: Tensor, y: Tensor) -> Tensor:
    """`g * (1 - y**2)` in one node (and one fused kernel on JAX), as PyTorch's tanh_backward."""
    return apply(R.TANH_BW, g, y)


def sigmoid_backward(g: Tensor, y: Tensor) -> Tensor:
    """`g * y * (1 - y)` in one node (and one fused kernel on JAX)."""
    return apply(R.SIGMOID_BW, g, y)


def astype(x: Tensor, dtype: Any) -> Tensor:
    dtype = x.array_backend.dtype(dtype)
    if dtype == x.dtype:
        return x
    return apply(R.ASTYPE, x, dtype=dtype)


def copy_into(dst: Tensor, src: Any) -> Tensor:
    """The value of `dst.copy_(src)`: `src` broadcast to `dst`'s shape and dtype."""
    if isinstance(src, numbers.Number):
        src = tensor(src, backend=dst.backend, dtype=dst.dtype)
    return apply(R.COPY, dst, _operand(src, dst))


# ------------------------------------------------------------------ comparisons
def equal(a: Any, b: Any) -> Tensor:
    return _binary(R.EQUAL, a, b)


def not_equal(a: Any, b: Any) -> Tensor:
    return _binary(R.NOT_EQUAL, a, b)


def less(a: Any, b: Any) -> Tensor:
    return _binary(R.LESS, a, b)


def less_equal(a: Any, b: Any) -> Tensor:
    return _binary(R.LESS_EQUAL, a, b)


def greater(a: Any, b: Any) -> Tensor:
    return _binary(R.GREATER, a, b)


def greater_equal(a: Any, b: Any) -> Tensor:
    return _binary(R.GREATER_EQUAL, a, b)


def logical_and(a: Any, b: Any) -> Tensor:
    return _binary(R.LOGICAL_AND, a, b)


def logical_or(a: Any, b: Any) -> Tensor:
    return _binary(R.LOGICAL_OR, a, b)


def logical_not(a: Tensor) -> Tensor:
    return apply(R.LOGICAL_NOT, a)


# ------------------------------------------------------------------ reductions
def _axis(axis: Any, ndim: int) -> int | tuple | None:
    if axis is None:
        return None
    if isinstance(axis, Sequence):
        return tuple(a % ndim if ndim else a for a in axis)
    return axis % ndim if ndim else axis


def sum(x: Tensor, axis: Any = None, keepdims: bool = False) -> Tensor:  # noqa: A001
    return apply(R.SUM, x, axis=_axis(axis, x.ndim), keepdims=keepdims)


def mean(x: Tensor, axis: Any = None, keepdims: bool = False) -> Tensor:
    return apply(R.MEAN, x, axis=_axis(axis, x.ndim), keepdims=keepdims)


def max(x: Tensor, axis: Any = None, keepdims: bool = False) -> Tensor:  # noqa: A001
    """Maximum values (like torch.amax): ties share the gradient evenly."""
    return apply(R.AMAX, x, axis=_axis(axis, x.ndim), keepdims=keepdims)


def sum_to(x: Tensor, shape: tuple) -> Tensor:
    """Sum a broadcast `x` back to `shape` (the reduction of broadcasting gradients)."""
    if tuple(x.shape) == tuple(shape):
        return x
    return apply(R.SUM_TO, x, shape=tuple(shape))


# ------------------------------------------------------------------ shapes
def reshape(x: Tensor, shape: Any) -> Tensor:
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    return apply(R.RESHAPE, x, shape=shape)


def transpose(x: Tensor, axes: Any = None) -> Tensor:
    """Permute axes (NumPy semantics: no axes reverses them)."""
    if axes is None:
        axes = tuple(reversed(range(x.ndim)))
    axes = tuple(a % x.ndim for a in axes)
    if sorted(axes) != list(range(x.ndim)):
        raise ValueError(f"transpose: axes {axes} are not a permutation of a {x.ndim}-d tensor")
    return apply(R.PERMUTE, x, axes=axes)


def swapaxes(x: Tensor, axis1: int, axis2: int) -> Tensor:
    return apply(R.SWAPAXES, x, axis1=axis1 % x.ndim, axis2=axis2 % x.ndim)


def broadcast_to(x: Tensor, shape: Any) -> Tensor:
    return apply(R.EXPAND, x, shape=tuple(shape))


def _index(index: Any) -> Any:
    """Turn tensors and lists inside an index into arrays the kernels accept."""
    if isinstance(index, tuple):
        return tuple(_index(i) for i in index)
    if isinstance(index, Tensor):
        return index.array
    if isinstance(index, list):
        return np.asarray(index)
    return index


def getitem(x: Tensor, index: Any) -> Tensor:
    """Basic (ints, slices, None, ...) and integer-array indexing, NumPy semantics."""
    return apply(R.INDEX, x, index=_index(index))


def index_add_zeros(g: Tensor, index: Any, shape: tuple) -> Tensor:
    """zeros(shape) with `g` added at `index`: the adjoint of `x[index]`."""
    return apply(R.INDEX_ADD, g, index=index, shape=tuple(shape))


def concatenate(tensors: Sequence[Tensor], axis: int = 0) -> Tensor:
    tensors = list(tensors)
    if not tensors:
        raise ValueError("concatenate needs at least one tensor")
    return apply(R.CONCAT, *tensors, axis=axis)


def stack(tensors: Sequence[Tensor], axis: int = 0) -> Tensor:
    tensors = list(tensors)
    if not tensors:
        raise ValueError("stack needs at least one tensor")
    return apply(R.STACK, *tensors, axis=axis)


# ------------------------------------------------------------------ linear algebra
def _autocast(*xs: Any) -> tuple:
    dtype = amp.current_dtype()
    if dtype is None:
        return xs
    return tuple(
        astype(x, dtype) if isinstance(x, Tensor) and np.issubdtype(x.dtype, np.floating) else x
        for x in xs
    )


def matmul(a: Any, b: Any) -> Tensor:
    like = a if isinstance(a, Tensor) else b
    a, b = _autocast(_operand(a, like), _operand(b, like))
    if not isinstance(a, Tensor) or not isinstance(b, Tensor) or a.ndim == 0 or b.ndim == 0:
        raise ValueError("matmul: both operands must be tensors with at least one dimension")
    return apply(R.MATMUL, a, b)


def linear(x: Tensor, w: Tensor, b: Tensor | None = None) -> Tensor:
    """`x @ w.T + b`, one node; under trimming it skips gradients no path needs."""
    if w.ndim != 2:
        raise ValueError(f"linear: weight must be 2-d (out_features, in_features), got {w.shape}")
    if x.shape[-1] != w.shape[1]:
        raise ValueError(
            f"linear: input has {x.shape[-1]} features (shape {x.shape}) but the weight "
            f"expects {w.shape[1]} (shape {w.shape})"
        )
    args = _autocast(x, w) if b is None else _autocast(x, w, b)
    return apply(R.LINEAR, *args)


# ------------------------------------------------------------------ conversion
def convert(x: Tensor, backend: Backend, device: Device) -> Tensor:
    """A differentiable copy of `x` on another backend (zero-copy through DLPack where it can)."""
    source = x.device
    if not (device.kind.host_memory and source.kind.host_memory):
        raise NotImplementedError(
            f"moving a {x.backend} tensor from {source} to {device} needs the CUDA backend"
        )
    if device != source:
        data = backend.asarray(np.array(x.array_backend.to_host(x.array)))
    else:
        try:
            data = backend.from_dlpack(x.array)
        except (TypeError, ValueError, RuntimeError, BufferError):
            data = backend.asarray(x.array_backend.to_host(x.array))
    data = backend.normalize(data)
    if source.is_accelerator or device.is_accelerator:
        _order_copy(x.array, source, data, device)
    out = Tensor.wrap(data, backend, device)
    if x.requires_grad and grad_state.grad_enabled:
        record_node(_CONVERT, (x,), {"source": x.array_backend, "device": x.device}, out)
    return out


def _order_copy(src: Any, source: Device, dst: Any, device: Device) -> None:
    """Tell the stream sanitizer about a copy between devices.

    The copy reads `src` on the source device's current stream and writes `dst`
    on the destination's current stream, which first waits for the source's
    (a copy to the host is a host read: it waits for the source stream).
    """
    src_stream = current_stream(source) if source.is_accelerator else None
    dst_stream = current_stream(device) if device.is_accelerator else None
    if dst_stream is None:
        sanitizer.host_read(src, src_stream, "to")
        return
    if src_stream is not None:
        sanitizer.on_kernel(src_stream, op="to", reads=(src,))
        dst_stream.wait_stream(src_stream)
    sanitizer.on_kernel(dst_stream, op="to", allocs=(dst,))


def _convert_back(g: Tensor, ctx: OpContext) -> Tensor:
    """A conversion's vjp: the gradient goes back to the source backend and device."""
    return convert(g, ctx.params["source"], ctx.params["device"])


_CONVERT = OpDef("to", "ToCopyBackward0", None, _convert_back)
