"""PyTorch's names for arithmetic, comparison, logical and bitwise ops, as functions and
Tensor methods: `add(x, y, alpha=2)`, `div(x, y, rounding_mode="floor")`, `eq`, `gt`,
`equal`, `allclose`, `logical_xor`, `bitwise_and`, `addcmul`, `addcdiv`, `reciprocal`, and
their in-place variants.

Each name is the op its operator already runs (`x.mul(y)` is `x * y`, `x.eq(y)` is
`x == y`): same op, same node, same promotion. Only what PyTorch adds on top has an op
here: the scaled second operand of `add`/`sub` (one `AddBackward0`/`SubBackward0` node, whose
gradient of `other` is scaled by `alpha`), division with a rounding mode (`DivBackward2`,
zero gradients), `reciprocal`, `addcmul`/`addcdiv`, `logical_xor` and the bitwise ops.
"""

from __future__ import annotations

import functools
import numbers
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from ..dtypes import get_default_dtype
from ..tensor import Tensor, is_floating
from . import functional as F
from . import pointwise as P
from .dispatch import apply
from .dtype_names import scalar_type
from .inplace import apply_inplace, div_, in_place_method, mul_, sub_
from .opdef import OpDef
from .operands import as_tensor, astype, floating, operands
from .promotion import category, needs_cast, promote_types, result_type
from .rules import XP, same, zeroed

# ------------------------------------------------------------------ ops PyTorch adds


def _divided(xp: Any, a: Any, b: Any, rounding_mode: str) -> Any:
    """`a / b` rounded toward minus infinity ("floor") or zero ("trunc"), in the operands'
    dtype: integers stay integers (a truncated quotient is the floored one plus one where
    that is negative and inexact)."""
    if rounding_mode == "floor":
        return xp.floor_divide(a, b)
    if xp.result_type(a, b).kind not in "biu":
        return xp.trunc(a / b)
    floor = xp.floor_divide(a, b)
    return xp.where((floor < 0) & (xp.remainder(a, b) != 0), floor + 1, floor)


# fmt: off
ADD_ALPHA = OpDef("add", "AddBackward0", lambda xp, a, b, alpha: a + alpha * b, same,
                  lambda g, ctx: g * ctx.params["alpha"])
SUB_ALPHA = OpDef("sub", "SubBackward0", lambda xp, a, b, alpha: a - alpha * b, same,
                  lambda g, ctx: -g * ctx.params["alpha"])
DIV_ROUNDED = OpDef("div", "DivBackward2", _divided, zeroed, zeroed)
RECIPROCAL = OpDef("reciprocal", "ReciprocalBackward0", lambda xp, a: 1 / a,
                   lambda g, ctx: -g * (ctx.output * ctx.output), save_output=True)
ADDCMUL = OpDef(
    "addcmul", "AddcmulBackward0", lambda xp, a, t1, t2, value: a + value * t1 * t2, same,
    lambda g, ctx: g * (ctx.inputs[2] * ctx.params["value"]),
    lambda g, ctx: g * (ctx.inputs[1] * ctx.params["value"]), save_for=((), (2,), (1,)),
)
ADDCDIV = OpDef(
    "addcdiv", "AddcdivBackward0", lambda xp, a, t1, t2, value: a + value * t1 / t2, same,
    lambda g, ctx: g * (ctx.params["value"] / ctx.inputs[2]),
    lambda g, ctx: -g * (ctx.params["value"] * ctx.inputs[1] / (ctx.inputs[2] * ctx.inputs[2])),
    save_for=((), (2,), (1, 2)),
)
COMPARED = OpDef("compare_", lambda args, params: params["node"],
                 lambda xp, old, value, node: value, zeroed, None)
"""An in-place comparison: the comparison's value, with PyTorch's zero gradient for the old."""
# Not differentiable: no node is recorded.
LOGICAL_XOR = OpDef("logical_xor", None, XP.logical_xor)
BITWISE_AND = OpDef("bitwise_and", None, XP.bitwise_and)
BITWISE_OR = OpDef("bitwise_or", None, XP.bitwise_or)
BITWISE_XOR = OpDef("bitwise_xor", None, XP.bitwise_xor)
BITWISE_NOT = OpDef("bitwise_not", None, XP.bitwise_invert)
# fmt: on


# ------------------------------------------------------------------ arithmetic
def _category(x: Any) -> int:
    """0 bool, 1 integer, 2 floating, 3 complex: of a tensor's dtype or a Python number's."""
    return category(x.dtype if isinstance(x, Tensor) else np.result_type(x))


def _scale(op: str, alpha: Any, a: Any, b: Any) -> Any:
    """`alpha` checked against the result's dtype as PyTorch checks it (a float scales
    floating results only, a bool bool results only); a bool result takes it as a bool."""
    alpha = alpha.item() if isinstance(alpha, np.generic) else alpha
    result = max(_category(a), _category(b))
    if isinstance(alpha, bool) and result:
        raise RuntimeError(
            f"Boolean alpha only supported for Boolean results. ({op} of {_described(a, b)} "
            f"with alpha={alpha}); give a number, e.g. alpha={int(alpha)}"
        )
    if isinstance(alpha, float) and result < 2:
        raise RuntimeError(
            f"For integral input tensors, argument alpha must not be a floating point number. "
            f"({op} of {_described(a, b)} with alpha={alpha}); give an integer alpha or cast "
            f"the tensors first, e.g. t.float()"
        )
    return bool(alpha) if result == 0 else alpha


def _is_bool(x: Any) -> bool:
    """Whether `x` (a tensor, array or number, before promotion) is bool."""
    return isinstance(x, bool) or getattr(getattr(x, "dtype", None), "kind", None) == "b"


def _described(*xs: Any) -> str:
    return " and ".join(f"{x.dtype} of shape {x.shape}" if isinstance(x, Tensor) else repr(x)
                        for x in xs)


def add(input: Any, other: Any, *, alpha: Any = 1) -> Tensor:
    """`input + alpha * other`, one `AddBackward0` node (the gradient of `other` scaled)."""
    if type(alpha) is int and alpha == 1:
        return F.add(input, other)
    a, b = operands(input, other)
    return apply(ADD_ALPHA, a, b, alpha=_scale("add", alpha, a, b))


def sub(input: Any, other: Any, *, alpha: Any = 1) -> Tensor:
    """`input - alpha * other`, one `SubBackward0` node; bool operands are refused as by `-`."""
    if (type(alpha) is int and alpha == 1) or _is_bool(input) or _is_bool(other):
        return F.sub(input, other)  # which refuses bool operands as `-` does, whatever alpha
    a, b = operands(input, other)
    return apply(SUB_ALPHA, a, b, alpha=_scale("sub", alpha, a, b))


def div(input: Any, other: Any, *, rounding_mode: str | None = None) -> Tensor:
    """True division (`/`; integers give the default floating dtype), or with
    `rounding_mode` "trunc" or "floor" the quotient rounded, in the operands' promoted
    dtype (integers stay integers), whose gradient is zero."""
    if rounding_mode is None:
        return F.div(input, other)
    if rounding_mode not in ("trunc", "floor"):
        raise RuntimeError(
            f"div expected rounding_mode to be one of None, 'trunc', or 'floor' but found "
            f"{rounding_mode!r} (div of {_described(input, other)})"
        )
    a, b = operands(input, other)
    if _category(a) == _category(b) == 0:
        raise NotImplementedError(
            f"\"div_{rounding_mode}_cpu\" not implemented for 'Bool' (div of "
            f"{_described(a, b)}); cast one operand to an integer dtype first, e.g. t.int()"
        )
    F.refuse_integer_division_by_zero(f"div (rounding_mode={rounding_mode!r})", a, b)
    return apply(DIV_ROUNDED, a, b, rounding_mode=rounding_mode)


def true_divide(input: Any, other: Any) -> Tensor:
    """`input / other`: integers give the default floating dtype."""
    return F.div(input, other)


def reciprocal(input: Tensor) -> Tensor:
    """`1 / input`; an integer or bool tensor becomes floating first."""
    return apply(RECIPROCAL, floating(input))


class _Operand(NamedTuple):
    """What `result_type` reads of a tensor."""

    ndim: int
    dtype: Any


def _tensors(*xs: Any) -> list[Tensor]:
    """The operands as tensors, arrays and numbers placed beside the first tensor."""
    like = next((x for x in xs if isinstance(x, Tensor)), None)
    return [as_tensor(x, like) for x in xs]


def _promoted3(op: str, *xs: Any) -> tuple[list[Tensor], np.dtype]:
    """Three operands as tensors, cast as PyTorch promotes them: the common dtype of those
    with dims, and of the 0-d ones, combined as `result_type` does."""
    tensors = _tensors(*xs)
    groups = [[t.dtype for t in tensors if bool(t.ndim) is dims] for dims in (True, False)]
    dtypes = [functools.reduce(promote_types, group) for group in groups if group]
    dtype = dtypes[0] if len(dtypes) == 1 else result_type(
        _Operand(1, dtypes[0]), _Operand(0, dtypes[1]))
    if dtype == np.bool_:
        raise NotImplementedError(
            f"\"{op}_cpu_out\" not implemented for 'Bool' ({op} of {_described(*tensors)}); "
            f"cast the tensors first, e.g. t.int()"
        )
    return [astype(t, dtype) if needs_cast(t.dtype, dtype) else t for t in tensors], dtype


def addcmul(input: Any, tensor1: Any, tensor2: Any, *, value: Any = 1) -> Tensor:
    """`input + value * tensor1 * tensor2`, one node; an integer result takes `value` as an
    integer, as PyTorch's does."""
    args, dtype = _promoted3("addcmul", input, tensor1, tensor2)
    return apply(ADDCMUL, *args, value=value if is_floating(dtype) else int(value))


def addcdiv(input: Any, tensor1: Any, tensor2: Any, *, value: Any = 1) -> Tensor:
    """`input + value * tensor1 / tensor2`, one node; PyTorch refuses two integer divisors."""
    input, t1, t2 = _tensors(input, tensor1, tensor2)
    if not is_floating(t1.dtype) and not is_floating(t2.dtype):
        raise RuntimeError(
            f"Integer division with addcdiv is no longer supported ({_described(t1, t2)}); "
            f"use (input + value * torch.trunc(tensor1 / tensor2)).to(input.dtype) for the old "
            f"integer behavior, or make tensor1 floating, e.g. tensor1.float()"
        )
    args, _ = _promoted3("addcdiv", input, t1, t2)
    return apply(ADDCDIV, *args, value=value)


# ------------------------------------------------------------------ comparisons
def equal(input: Tensor, other: Tensor) -> bool:
    """Whether the two tensors have one shape and equal values (NaN equals nothing)."""
    if not isinstance(other, Tensor):
        raise TypeError(
            f"equal(): argument 'other' (position 2) must be Tensor, not "
            f"{type(other).__name__}; wrap it first, e.g. js.tensor(other)"
        )
    return input.shape == other.shape and bool(P.all(F.equal(input, other)))


def allclose(input: Tensor, other: Any, rtol: float = 1e-05, atol: float = 1e-08,
             equal_nan: bool = False) -> bool:
    """Whether `isclose(input, other, ...)` holds everywhere (the two broadcast)."""
    return bool(P.all(P.isclose(input, other, rtol, atol, equal_nan)))


def logical_xor(input: Any, other: Any) -> Tensor:
    """Where exactly one of the two is nonzero, as a bool tensor."""
    return apply(LOGICAL_XOR, *operands(input, other))


# ------------------------------------------------------------------ bitwise
def _bitwise(op: OpDef) -> Callable[[Any, Any], Tensor]:
    """The function of a bitwise op of two integer or bool operands (promoted together)."""

    def fn(input: Any, other: Any) -> Tensor:
        a, b = operands(input, other)
        _refuse_floats(op.name, a, b)
        return apply(op, a, b)

    fn.__name__ = fn.__qualname__ = op.name
    fn.__doc__ = f"Elementwise {op.name} of integer or bool tensors."
    return fn


def _refuse_floats(op: str, *xs: Any) -> None:
    """PyTorch's error for a bitwise op on floating operands."""
    floats = [x for x in xs if _category(x) >= 2]
    if floats:
        dtype = next((x.dtype for x in floats if isinstance(x, Tensor)), get_default_dtype())
        raise NotImplementedError(
            f"\"{op}_cpu\" not implemented for '{scalar_type(dtype)}' ({op} of "
            f"{_described(*xs)}); bitwise ops take integer or bool tensors: cast first, e.g. "
            f"t.int(), or use logical_{op.removeprefix('bitwise_')} for truth values"
        )


bitwise_and = _bitwise(BITWISE_AND)
bitwise_or = _bitwise(BITWISE_OR)
bitwise_xor = _bitwise(BITWISE_XOR)


def bitwise_not(input: Tensor) -> Tensor:
    """Each bit flipped (of a bool tensor: `logical_not`)."""
    _refuse_floats("bitwise_not", input)
    return apply(BITWISE_NOT, input)


# ------------------------------------------------------------------ in place

def _compare_in_place(fn: Callable[[Any, Any], Tensor], node: str, name: str) -> Callable:
    """A comparison in place: 1 or 0 in the tensor's dtype, under PyTorch's node (`EqBackward0`
    for a number, `EqBackward1` for a tensor) whose gradient is zero."""

    def method(t: Tensor, other: Any) -> Tensor:
        overload = int(not isinstance(other, numbers.Number))
        return apply_inplace(t, lambda v: apply(
            COMPARED, v, astype(fn(v, other), v.dtype), node=f"{node}Backward{overload}"), name)

    method.__name__ = method.__qualname__ = name
    method.__doc__ = f"`{fn.__name__}` in place (1 where it holds, 0 elsewhere)."
    return method


mul = multiply = F.mul
neg = negative = F.neg
subtract, divide = sub, div
eq, ne, lt, le, gt, ge = (F.equal, F.not_equal, F.less, F.less_equal, F.greater,
                          F.greater_equal)
not_equal, less, less_equal, greater, greater_equal = ne, lt, le, gt, ge
logical_and, logical_or, logical_not = F.logical_and, F.logical_or, F.logical_not

_COMPARISONS = {"eq": (eq, "Eq"), "ne": (ne, "Ne"), "lt": (lt, "Lt"), "le": (le, "Le"),
                "gt": (gt, "Gt"), "ge": (ge, "Ge"), "not_equal": (ne, "Ne"), "less": (lt, "Lt"),
                "less_equal": (le, "Le"), "greater": (gt, "Gt"), "greater_equal": (ge, "Ge")}
_IN_PLACE = {"neg": neg, "negative": neg, "reciprocal": reciprocal, "clamp": F.clip,
             "clip": F.clip, "pow": F.pow, "logical_and": logical_and,
             "logical_or": logical_or, "logical_xor": logical_xor,
             "logical_not": logical_not, "bitwise_and": bitwise_and, "bitwise_or": bitwise_or,
             "bitwise_xor": bitwise_xor, "bitwise_not": bitwise_not, "addcmul": addcmul,
             "addcdiv": addcdiv}

METHODS: dict[str, Any] = {
    "add": add, "sub": sub, "subtract": subtract, "mul": mul, "multiply": multiply,
    "div": div, "divide": divide, "true_divide": true_divide, "neg": neg,
    "negative": negative, "reciprocal": reciprocal, "equal": equal, "allclose": allclose,
    **{name: fn for name, (fn, _) in _COMPARISONS.items()},
    "logical_and": logical_and, "logical_or": logical_or, "logical_xor": logical_xor,
    "logical_not": logical_not, "bitwise_and": bitwise_and, "bitwise_or": bitwise_or,
    "bitwise_xor": bitwise_xor, "bitwise_not": bitwise_not, "addcmul": addcmul,
    "addcdiv": addcdiv,
    **{f"{name}_": in_place_method(fn, f"{name}_", recorded=not name.startswith("logical_"))
       for name, fn in _IN_PLACE.items()},
    **{f"{name}_": _compare_in_place(fn, node, f"{name}_")
       for name, (fn, node) in _COMPARISONS.items()},
    "subtract_": sub_, "multiply_": mul_, "divide_": div_,
    "true_divide_": in_place_method(true_divide, "true_divide_"),
}
