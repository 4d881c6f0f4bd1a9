"""Differentiable operators and factories: the public op functions.

Each function normalizes its arguments and calls `dispatch.apply` with an entry
of the op table (`rules`). Nothing here knows about a particular backend.
"""

from __future__ import annotations

import functools
import itertools
import math
import numbers
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .. import amp, sanitizer
from ..autograd.grad_mode import state as grad_state
from ..backends import Backend
from ..devices import Device
from ..dtypes import get_default_dtype
from ..streams import current_stream
from ..tensor import Tensor, tensor
from . import rules as R
from .dispatch import apply
from .opdef import OpContext, OpDef, record_node
from .shapes import normalize_axes, normalize_axis, parse_einsum, split_sizes


def _operand(x: Any, like: Tensor | None = None) -> Any:
    """Tensors and Python numbers pass through (NumPy scalars become Python numbers, weak
    in promotion); any other array is a constant on `like`'s backend and device."""
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, Tensor | numbers.Number):
        return x
    if like is None:
        return tensor(x)
    return tensor(x, backend=like.backend, device=like.device)


# Note [Result dtypes]
# ~~~~~~~~~~~~~~~~~~~~
# The result dtype of an op is PyTorch's and the same on every backend, which neither
# NumPy nor JAX gives alone: an integer or bool tensor meeting a float (a floating tensor,
# or a Python float, which takes the default dtype) becomes floating first (`_promoted`),
# and float-only ops (true division, exp, log, mean, ...) cast integer inputs to the
# default dtype (`_floating`). Python and NumPy scalars are weak: they never widen a
# floating tensor. Integer results are the backend's own (int32 on JAX without x64).
_PASS_THROUGH = (Tensor, float, int, bool)


def _integral(x: Any) -> bool:
    return type(x) is Tensor and x.dtype.kind in "biu"


def _floating(x: Any) -> Any:
    """`x`, with an integer or bool tensor cast to the default dtype (Note [Result dtypes])."""
    return astype(x, get_default_dtype()) if _integral(x) else x


def _promoted(*xs: Any) -> tuple:
    """`xs` with integer tensors cast to the floating dtype another operand brings, if any."""
    if not any(_integral(x) for x in xs):
        return xs
    floats = [x.dtype for x in xs if type(x) is Tensor and not _integral(x)]
    if not floats and any(isinstance(x, float) for x in xs):
        floats = [get_default_dtype()]
    if not floats:
        return xs
    return tuple(astype(x, floats[0]) if _integral(x) else x for x in xs)


def _operands(a: Any, b: Any) -> tuple:
    """Both operands of a binary op as Tensors or Python numbers, promoted."""
    if type(a) not in _PASS_THROUGH or type(b) not in _PASS_THROUGH:
        like = a if isinstance(a, Tensor) else b if isinstance(b, Tensor) else None
        a, b = _operand(a, like), _operand(b, like)
    return _promoted(a, b)


def _binary(op: OpDef, a: Any, b: Any) -> Tensor:
    return apply(op, *_operands(a, b))


_UNSET: Any = object()


def torch_spelling(fn: Callable) -> Callable:
    """Accept PyTorch's `dim=` and `keepdim=` as aliases of `axis=` and `keepdims=`."""

    @functools.wraps(fn)
    def accepting(*args: Any, dim: Any = _UNSET, keepdim: Any = _UNSET, **kwargs: Any) -> Any:
        for alias, name, value in (("dim", "axis", dim), ("keepdim", "keepdims", keepdim)):
            if value is _UNSET:
                continue
            if name in kwargs:
                raise TypeError(f"{fn.__name__}() got both {name}= and its alias {alias}=")
            kwargs[name] = value
        return fn(*args, **kwargs)

    return accepting


# ------------------------------------------------------------------ arithmetic
def add(a: Any, b: Any) -> Tensor:
    return _binary(R.ADD, a, b)


def sub(a: Any, b: Any) -> Tensor:
    return _binary(R.SUB, a, b)


def mul(a: Any, b: Any) -> Tensor:
    return _binary(R.MUL, a, b)


def div(a: Any, b: Any) -> Tensor:
    """True division: integer tensors give the default floating dtype."""
    return apply(R.DIV, *map(_floating, _operands(a, b)))


def pow(a: Any, b: Any) -> Tensor:  # noqa: A001  (NumPy's name)
    a, b = _operands(a, b)
    if not isinstance(a, Tensor):
        return apply(R.RPOW, a, b)
    if isinstance(b, numbers.Number) and not isinstance(b, bool):
        return apply(R.POW_SCALAR, a, b)
    return apply(R.POW, a, b)


def maximum(a: Any, b: Any) -> Tensor:
    """Elementwise maximum; on ties each input gets half the gradient (PyTorch's rule)."""
    return _binary(R.MAXIMUM, a, b)


def minimum(a: Any, b: Any) -> Tensor:
    """Elementwise minimum; on ties each input gets half the gradient (PyTorch's rule)."""
    return _binary(R.MINIMUM, a, b)


def floor_divide(a: Any, b: Any) -> Tensor:
    """`a // b` rounded toward minus infinity (not differentiable)."""
    return _binary(R.FLOOR_DIVIDE, a, b)


def remainder(a: Any, b: Any) -> Tensor:
    """`a % b` with the sign of `b` (Python's and PyTorch's); its gradient wrt b is -(a // b)."""
    return _binary(R.REMAINDER, a, b)


def neg(a: Tensor) -> Tensor:
    return apply(R.NEG, a)


def where(condition: Any, a: Any, b: Any) -> Tensor:
    """Elementwise `a` where `condition` else `b` (condition gets no gradient)."""
    like = next((x for x in (condition, a, b) if isinstance(x, Tensor)), None)
    cond = _operand(condition, like)
    if not isinstance(cond, Tensor):
        raise TypeError("where: condition must be a boolean tensor or array")
    return apply(R.WHERE, cond, *_promoted(_operand(a, like), _operand(b, like)))


def _unary(op: OpDef, *, float_only: bool = False) -> Callable[[Tensor], Tensor]:
    """The function of an elementwise op; a float-only one casts integer tensors first."""
    if float_only:

        def fn(x: Tensor) -> Tensor:
            return apply(op, _floating(x))
    else:

        def fn(x: Tensor) -> Tensor:
            return apply(op, x)

    fn.__name__ = op.name
    fn.__doc__ = f"Elementwise {op.name} (backward: {op.node_name})."
    return fn


exp = _unary(R.EXP, float_only=True)
log = _unary(R.LOG, float_only=True)
sin = _unary(R.SIN, float_only=True)
cos = _unary(R.COS, float_only=True)
tanh = _unary(R.TANH, float_only=True)
sigmoid = _unary(R.SIGMOID, float_only=True)
softplus = _unary(R.SOFTPLUS, float_only=True)
sqrt = _unary(R.SQRT, float_only=True)
log1p = _unary(R.LOG1P, float_only=True)
expm1 = _unary(R.EXPM1, float_only=True)
erf = _unary(R.ERF, float_only=True)
silu = _unary(R.SILU, float_only=True)
relu = _unary(R.RELU)
abs = _unary(R.ABS)  # noqa: A001
square = _unary(R.SQUARE)
sign = _unary(R.SIGN)
clone = _unary(R.CLONE)
zero_grad_to_history = _unary(R.ZERO)


def gelu(x: Tensor, approximate: str = "none") -> Tensor:
    """x * Phi(x), exact (erf) or with PyTorch's tanh approximation."""
    if approximate not in ("none", "tanh"):
        raise ValueError(
            f"gelu: approximate argument must be either none or tanh, got {approximate!r}"
        )
    return apply(R.GELU, _floating(x), approximate=approximate)


def leaky_relu(x: Tensor, negative_slope: float = 0.01) -> Tensor:
    return apply(R.LEAKY_RELU, _floating(x), negative_slope=float(negative_slope))


def clip(x: Tensor, min: Any = None, max: Any = None) -> Tensor:  # noqa: A002
    """`x` limited to [min, max]; the gradient passes where min <= x <= max (PyTorch's rule).

    Tensor bounds receive the gradient where they are the result.
    """
    if min is None and max is None:
        raise ValueError(
            f"clip: At least one of 'min' or 'max' must not be None (tensor of shape {x.shape})"
        )
    if isinstance(min, Tensor) or isinstance(max, Tensor):
        y = x if min is None else where(x < min, min, x)
        return y if max is None else where(y > max, max, y)
    x = _promoted(x, *(float(b) for b in (min, max) if isinstance(b, float)))[0]
    return apply(R.CLIP, x, min=min, max=max)


clamp = clip


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
def _reduce(op: OpDef, x: Tensor, axis: Any, keepdims: bool, **params: Any) -> Tensor:
    return apply(op, x, axis=normalize_axes(op.name, axis, x.shape), keepdims=keepdims, **params)


@torch_spelling
def sum(x: Tensor, axis: Any = None, keepdims: bool = False) -> Tensor:  # noqa: A001
    return _reduce(R.SUM, x, axis, keepdims)


@torch_spelling
def mean(x: Tensor, axis: Any = None, keepdims: bool = False) -> Tensor:
    return _reduce(R.MEAN, _floating(x), axis, keepdims)


@torch_spelling
def max(x: Tensor, axis: Any = None, keepdims: bool = False) -> Tensor:  # noqa: A001
    """Maximum values (like torch.amax): ties share the gradient evenly."""
    return _reduce(R.AMAX, x, axis, keepdims)


@torch_spelling
def min(x: Tensor, axis: Any = None, keepdims: bool = False) -> Tensor:  # noqa: A001
    """Minimum values (like torch.amin): ties share the gradient evenly."""
    return _reduce(R.AMIN, x, axis, keepdims)


@torch_spelling
def prod(x: Tensor, axis: Any = None, keepdims: bool = False) -> Tensor:
    """The product; its gradient is right where elements are 0 (PyTorch's rule)."""
    return _reduce(R.PROD, x, axis, keepdims)


@torch_spelling
def var(x: Tensor, axis: Any = None, correction: float = 0, keepdims: bool = False) -> Tensor:
    """The variance, dividing by the element count less `correction` (1: unbiased)."""
    return _reduce(R.VAR, _floating(x), axis, keepdims, correction=correction)


@torch_spelling
def std(x: Tensor, axis: Any = None, correction: float = 0, keepdims: bool = False) -> Tensor:
    """The standard deviation, `sqrt(var(x, axis, correction))`."""
    return _reduce(R.STD, _floating(x), axis, keepdims, correction=correction)


@torch_spelling
def vector_norm(x: Tensor, ord: float = 2, axis: Any = None, keepdims: bool = False) -> Tensor:  # noqa: A002
    """The `ord`-norm (ord >= 1 or inf) of the elements over `axis` (all axes by default)."""
    if not ord >= 1:
        raise ValueError(f"vector_norm: ord must be >= 1 or inf, got {ord!r}")
    return _reduce(R.VECTOR_NORM, _floating(x), axis, keepdims, ord=ord)


@torch_spelling
def cumsum(x: Tensor, axis: int | None = None) -> Tensor:
    """Running sums along `axis` (which may be left out for a 1-d tensor)."""
    if axis is None and x.ndim > 1:
        raise ValueError(f"cumsum: give an axis for a tensor of shape {x.shape}")
    return apply(R.CUMSUM, x, axis=normalize_axis("cumsum", axis or 0, x.shape))


def _arg_extremum(op: OpDef, x: Tensor, axis: int | None, keepdims: bool) -> Tensor:
    if axis is not None:
        axis = normalize_axis(op.name, axis, x.shape)
    return apply(op, x, axis=axis, keepdims=keepdims)


@torch_spelling
def argmax(x: Tensor, axis: int | None = None, keepdims: bool = False) -> Tensor:
    """Index of the (first) maximum over `axis`, or of the flattened tensor (not differentiable)."""
    return _arg_extremum(R.ARGMAX, x, axis, keepdims)


@torch_spelling
def argmin(x: Tensor, axis: int | None = None, keepdims: bool = False) -> Tensor:
    """Index of the (first) minimum over `axis`, or of the flattened tensor (not differentiable)."""
    return _arg_extremum(R.ARGMIN, x, axis, keepdims)


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


@torch_spelling
def concat(tensors: Sequence[Tensor], axis: int = 0) -> Tensor:
    tensors = list(tensors)
    if not tensors:
        raise ValueError("concat needs at least one tensor")
    return apply(R.CONCAT, *tensors, axis=normalize_axis("concat", axis, tensors[0].shape))


concatenate = cat = concat


@torch_spelling
def stack(tensors: Sequence[Tensor], axis: int = 0) -> Tensor:
    tensors = list(tensors)
    if not tensors:
        raise ValueError("stack needs at least one tensor")
    axis = normalize_axis("stack", axis, tensors[0].shape, inserting=True)
    return apply(R.STACK, *tensors, axis=axis)


@torch_spelling
def split(x: Tensor, sizes_or_sections: int | Sequence[int], axis: int = 0) -> tuple:
    """Pieces of `x` along `axis`: an int is a number of equal sections (the array API's
    meaning), a list the pieces' sizes (PyTorch's split_with_sizes). Pieces are views."""
    axis = normalize_axis("split", axis, x.shape)
    lead = (slice(None),) * axis
    stops = np.cumsum(split_sizes(sizes_or_sections, x.shape[axis])).tolist()
    return tuple(getitem(x, (*lead, slice(*bounds))) for bounds in itertools.pairwise([0, *stops]))


def squeeze(x: Tensor, axis: int | Sequence[int] | None = None) -> Tensor:
    """Drop axes of length 1: the given ones (which must have length 1), or all of them."""
    if axis is not None:
        axis = normalize_axes("squeeze", axis, x.shape)
        for a in (axis,) if isinstance(axis, int) else axis or ():
            if x.shape[a] != 1:
                raise ValueError(
                    f"squeeze: axis {a} of a tensor of shape {x.shape} has length "
                    f"{x.shape[a]}, not 1"
                )
    return apply(R.SQUEEZE, x, axis=axis)


def expand_dims(x: Tensor, axis: int) -> Tensor:
    """A new axis of length 1 at `axis` (a view)."""
    axis = normalize_axis("expand_dims", axis, x.shape, inserting=True)
    return apply(R.EXPAND_DIMS, x, axis=axis)


unsqueeze = expand_dims


def flatten(x: Tensor, start_axis: int = 0, end_axis: int = -1) -> Tensor:
    """Axes `start_axis` to `end_axis` (inclusive) merged into one (a view)."""
    if x.ndim == 0:
        return reshape(x, (1,))
    start = normalize_axis("flatten", start_axis, x.shape)
    end = normalize_axis("flatten", end_axis, x.shape)
    if start > end:
        raise ValueError(
            f"flatten: start_axis {start_axis} comes after end_axis {end_axis} "
            f"(tensor of shape {x.shape})"
        )
    merged = math.prod(x.shape[start : end + 1])
    return reshape(x, (*x.shape[:start], merged, *x.shape[end + 1 :]))


def permute_dims(x: Tensor, axes: Sequence[int]) -> Tensor:
    """The axes of `x` in the order `axes` (a view)."""
    return transpose(x, axes)


@torch_spelling
def flip(x: Tensor, axis: int | Sequence[int] | None = None) -> Tensor:
    """`x` reversed along `axis` (all axes by default); a copy, as in PyTorch."""
    return apply(R.FLIP, x, axis=normalize_axes("flip", axis, x.shape))


@torch_spelling
def take_along_axis(x: Tensor, indices: Any, axis: int = -1) -> Tensor:
    """`x`'s elements at `indices` along `axis` (PyTorch's gather, NumPy's take_along_axis)."""
    axis = normalize_axis("take_along_axis", axis, x.shape)
    index = indices.array if isinstance(indices, Tensor) else np.asarray(indices)
    if index.dtype.kind not in "iu" or index.ndim != x.ndim:
        raise IndexError(
            f"take_along_axis: indices must be an integer tensor with as many axes as the "
            f"input, got {index.dtype} of shape {index.shape} for an input of shape {x.shape}"
        )
    grid = np.ix_(*(np.arange(n) for n in index.shape))
    return apply(R.TAKE_ALONG, x, index=(*grid[:axis], index, *grid[axis + 1 :]))


def einsum(subscripts: str, *operands: Tensor) -> Tensor:
    """Einstein summation (explicit or implicit output, no ellipsis), differentiable to any
    order: each operand's gradient is an einsum of the output's with the others."""
    if len(operands) == 1 and isinstance(operands[0], list | tuple):
        operands = tuple(operands[0])
    inputs, output = parse_einsum(subscripts, [tuple(t.shape) for t in operands])
    return apply(R.EINSUM, *operands, subscripts=",".join(inputs) + "->" + output)


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
