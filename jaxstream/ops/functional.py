"""The public elementwise op functions: arithmetic, unary functions, comparisons, casts,
indexing and `linear`, and the conversion between backends.

Each function normalizes its arguments (`operands.py`) and calls `dispatch.apply`
with an entry of an op table. Nothing here knows about a particular backend.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable
from typing import Any

import numpy as np

from .. import transfer
from ..autograd.grad_mode import state as grad_state
from ..backends import Backend
from ..devices import Device
from ..streams import stream_for
from ..tensor import Tensor, is_floating, tensor
from . import linalg_rules as L
from . import rules as R
from .boolean_masks import refuse_traced_masks
from .dispatch import apply
from .opdef import OpContext, OpDef, record_node
from .operands import (
    as_tensor,
    autocast,
    floating,
    host_values,
    operand,
    operands,
    promoted,
    torch_spelling,
)
from .products import check_linear
from .shapes import normalize_axis


def _binary(op: OpDef, doc: str = "") -> Callable[[Any, Any], Tensor]:
    """The function of a two-operand op (tensors, arrays or numbers, promoted together)."""

    def fn(a: Any, b: Any) -> Tensor:
        return apply(op, *operands(a, b))

    fn.__name__ = op.name
    fn.__doc__ = doc or f"Elementwise {op.name}."
    return fn


def _is_bool(x: Any) -> bool:
    """Whether `x` (a tensor, array or number, before promotion) is bool."""
    if type(x) is Tensor:
        return x.array.dtype.kind == "b"
    return type(x) is bool or getattr(getattr(x, "dtype", None), "kind", None) == "b"


def _described(a: Any, b: Any) -> str:
    return " and ".join(f"{x.dtype} of shape {tuple(x.shape)}" if hasattr(x, "shape")
                        else repr(x) for x in (a, b))


# ------------------------------------------------------------------ arithmetic
add = _binary(R.ADD)
mul = _binary(R.MUL)


def sub(a: Any, b: Any) -> Tensor:
    """`a - b`; PyTorch refuses it for bool operands (a mask is inverted with `~`)."""
    if _is_bool(a) or _is_bool(b):
        torch_says = (
            "Subtraction, the `-` operator, with two bool tensors is not supported. Use the `^` "
            "or `logical_xor()` operator instead." if _is_bool(a) and _is_bool(b) else
            "Subtraction, the `-` operator, with a bool tensor is not supported. If you are "
            "trying to invert a mask, use the `~` or `logical_not()` operator instead."
        )
        raise RuntimeError(f"{torch_says} (sub of {_described(a, b)})")
    return apply(R.SUB, *operands(a, b))


def div(a: Any, b: Any) -> Tensor:
    """True division: integer tensors give the default floating dtype."""
    return apply(R.DIV, *map(floating, operands(a, b)))


def pow(a: Any, b: Any) -> Tensor:  # noqa: A001  (NumPy's name)
    a, b = operands(a, b)
    if not isinstance(a, Tensor):
        _refuse_bools("pow", "pow", a, b)
        return apply(R.RPOW, a, b)
    if isinstance(b, numbers.Number):
        if isinstance(b, int) and b < 0 and not is_floating(a.dtype):
            raise RuntimeError(
                f"Integers to negative integer powers are not allowed: a {a.dtype} tensor "
                f"(shape {a.shape}) to the power {b}; cast it first, e.g. t.float() ** {b}"
            )
        if _is_bool(a) and isinstance(b, bool):  # bool (torch's), where NumPy's is int8
            return clone(a) if b else logical_or(a, True)
        return apply(R.POW_SCALAR, a, b)
    _refuse_bools("pow", "pow", a, b)
    return apply(R.POW, a, b)


# On ties maximum and minimum give each input half the gradient (PyTorch's rule).
maximum = _binary(R.MAXIMUM, "Elementwise maximum; ties share the gradient.")
minimum = _binary(R.MINIMUM, "Elementwise minimum; ties share the gradient.")


def _refuse_bools(op: str, kernel: str, a: Any, b: Any) -> None:
    """PyTorch's error for an op it has no bool kernel for, given two bool operands."""
    if _is_bool(a) and _is_bool(b):
        raise NotImplementedError(
            f"\"{kernel}\" not implemented for 'Bool' ({op} of {_described(a, b)}); cast one "
            f"operand to an integer dtype first, e.g. t.int()"
        )


def _is_integral(x: Any) -> bool:
    if isinstance(x, Tensor):
        return np.dtype(x.dtype).kind in "iub"
    return isinstance(x, numbers.Integral)


def refuse_integer_division_by_zero(op: str, a: Any, b: Any) -> None:
    """PyTorch's error for an integer division by zero on the CPU, where NumPy would warn
    and return 0. A divisor tensor on an accelerator is not read, as PyTorch's CUDA kernels
    do not check (they return an unspecified value, as XLA's do) and reading it would wait
    for the device; nor is one inside a trace, whose values are not known. A Python number
    is checked everywhere: it costs nothing to read."""
    if not (_is_integral(a) and _is_integral(b)):
        return
    if not isinstance(b, Tensor):
        values = np.asarray(b)
    elif b.device.is_accelerator:
        return
    else:
        values = host_values(b)
    if values is not None and not values.all():
        raise RuntimeError(
            f"ZeroDivisionError: integer {op} by zero ({op} of {_described(a, b)}); PyTorch "
            f"refuses it on the CPU. Mask the zero divisors first, e.g. with js.where"
        )


def floor_divide(a: Any, b: Any) -> Tensor:
    """`a // b` toward minus infinity (not differentiable)."""
    _refuse_bools("floor_divide", "div_floor_cpu", a, b)
    a, b = operands(a, b)
    refuse_integer_division_by_zero("floor_divide", a, b)
    return apply(R.FLOOR_DIVIDE, a, b)


def remainder(a: Any, b: Any) -> Tensor:
    """`a % b` with the sign of `b`; d/db is -(a // b)."""
    _refuse_bools("remainder", "remainder_cpu", a, b)
    a, b = operands(a, b)
    refuse_integer_division_by_zero("remainder", a, b)
    return apply(R.REMAINDER, a, b)


def neg(a: Tensor) -> Tensor:
    if a.array.dtype.kind == "b":
        raise RuntimeError(
            "Negation, the `-` operator, on a bool tensor is not supported. If you are trying "
            f"to invert a mask, use the `~` or `logical_not()` operator instead (shape {a.shape})"
        )
    return apply(R.NEG, a)


def where(condition: Any, a: Any = None, b: Any = None) -> Tensor | tuple[Tensor, ...]:
    """Elementwise `a` where `condition` else `b` (condition gets no gradient). The condition
    alone gives the indices of its nonzero elements, `condition.nonzero(as_tuple=True)`, as
    PyTorch's `where(condition)` (a method call: the ops that read values import this one)."""
    if a is None and b is None:
        return as_tensor(condition).nonzero(as_tuple=True)
    if a is None or b is None:
        raise TypeError(
            f"where(): give the condition alone (for the indices of its nonzero elements) or "
            f"with both values, input and other; got the condition and "
            f"{'other' if a is None else 'input'} alone"
        )
    like = next((x for x in (condition, a, b) if isinstance(x, Tensor)), None)
    cond = operand(condition, like)
    if not isinstance(cond, Tensor):
        raise TypeError("where: condition must be a boolean tensor or array")
    return apply(R.WHERE, cond, *promoted(operand(a, like), operand(b, like)))


def _unary(op: OpDef, *, float_only: bool = False) -> Callable[[Tensor], Tensor]:
    """The function of an elementwise op; a float-only one casts integer tensors first."""

    def fn(x: Tensor) -> Tensor:
        return apply(op, floating(x) if float_only else x)

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
clone = _unary(R.CLONE)
zero_grad_to_history = _unary(R.ZERO)


def gelu(x: Tensor, approximate: str = "none") -> Tensor:
    """x * Phi(x), exact (erf) or with PyTorch's tanh approximation."""
    if approximate not in ("none", "tanh"):
        raise ValueError(
            f"gelu: approximate argument must be either none or tanh, got {approximate!r}"
        )
    return apply(R.GELU, floating(x), approximate=approximate)


def leaky_relu(x: Tensor, negative_slope: float = 0.01) -> Tensor:
    return apply(R.LEAKY_RELU, floating(x), negative_slope=float(negative_slope))


def clip(x: Tensor, min: Any = None, max: Any = None) -> Tensor:  # noqa: A002
    """`x` limited to [min, max]; the gradient passes where min <= x <= max (PyTorch's rule).

    Tensor bounds receive the gradient where they are the result.
    """
    if min is None and max is None:
        raise ValueError(
            f"clip: At least one of 'min' or 'max' must not be None (tensor of shape {x.shape})"
        )
    min, max = (v if v is None or isinstance(v, numbers.Number) else operand(v, x)
                for v in (min, max))
    if isinstance(min, Tensor) or isinstance(max, Tensor):
        y = x if min is None else where(x < min, min, x)
        return y if max is None else where(y > max, max, y)
    x = promoted(x, *(float(b) for b in (min, max) if isinstance(b, float)))[0]
    return apply(R.CLIP, x, min=min, max=max)


clamp = clip


def tanh_backward(g: Tensor, y: Tensor) -> Tensor:
    """`g * (1 - y**2)` in one node (and one fused kernel on JAX), as PyTorch's tanh_backward
    (Note [The form of tanh's backward] in ops/rules.py)."""
    return apply(R.TANH_BW, g, y)


def sigmoid_backward(g: Tensor, y: Tensor) -> Tensor:
    """`g * y * (1 - y)` in one node (and one fused kernel on JAX)."""
    return apply(R.SIGMOID_BW, g, y)


def copy_into(dst: Tensor, src: Any) -> Tensor:
    """The value of `dst.copy_(src)`: `src` broadcast to `dst`'s shape and dtype."""
    if isinstance(src, numbers.Number):
        src = tensor(src, backend=dst.backend, dtype=dst.dtype)
    return apply(R.COPY, dst, operand(src, dst))


# ------------------------------------------------------------------ comparisons
equal = _binary(R.EQUAL)
not_equal = _binary(R.NOT_EQUAL)
less = _binary(R.LESS)
less_equal = _binary(R.LESS_EQUAL)
greater = _binary(R.GREATER)
greater_equal = _binary(R.GREATER_EQUAL)
logical_and = _binary(R.LOGICAL_AND)
logical_or = _binary(R.LOGICAL_OR)


def logical_not(a: Tensor) -> Tensor:
    return apply(R.LOGICAL_NOT, a)


# ------------------------------------------------------------------ indexing
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
    index = _index(index)
    refuse_traced_masks("getitem", x.shape, index)
    return apply(R.INDEX, x, index=index)


def index_add_zeros(g: Tensor, index: Any, shape: tuple) -> Tensor:
    """zeros(shape) with `g` added at `index`: the adjoint of `x[index]`."""
    return apply(R.INDEX_ADD, g, index=index, shape=tuple(shape))


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


def linear(x: Any, w: Any, b: Any = None) -> Tensor:
    """`x @ w.T + b`, one node; under trimming it skips gradients no path needs. Like PyTorch's
    it promotes nothing (Note [Matrix products do not promote] in products.py); arrays join
    the tensors' backend and device."""
    like = next((t for t in (x, w, b) if isinstance(t, Tensor)), None)
    x, w = operand(x, like), operand(w, like)
    args = autocast(x, w) if b is None else autocast(x, w, operand(b, like))
    check_linear(*args[:2], args[2] if b is not None else None)
    return apply(L.LINEAR, *args)


# ------------------------------------------------------------------ conversion
def convert(x: Tensor, backend: Backend, device: Device) -> Tensor:
    """A differentiable copy of `x` on another backend and/or device (PyTorch's
    ToCopyBackward0); the data moves as transfer.py says (zero-copy where it can)."""
    data = transfer.move(x.array, x.array_backend, x.device, backend, device)
    out = Tensor.wrap(data, backend, device)
    if x.requires_grad and grad_state.grad_enabled:
        params = {"source": x.array_backend, "device": x.device}
        record_node(_CONVERT, (x,), params, out, stream_for(device, backend))
    return out


def _convert_back(g: Tensor, ctx: OpContext) -> Tensor:
    """A conversion's vjp: the gradient goes back to the source backend and device."""
    return convert(g, ctx.params["source"], ctx.params["device"])


_CONVERT = OpDef("to", "ToCopyBackward0", None, _convert_back)
