"""Tensor's operators and op methods, attached to the class when `jaxstream.ops` is imported.

Tensor sits below the ops in the import graph and never names them; this
table is where the ops layer registers itself on it (one line per method).
"""

from __future__ import annotations

from typing import Any

from ..tensor import Tensor
from . import casting, inplace, neural
from . import functional as F
from . import linalg as L
from . import reductions as Q
from . import shape_ops as S
from .operands import astype, torch_spelling


def _flat(args: tuple) -> tuple:
    """`t.reshape(2, 3)` and `t.reshape((2, 3))` mean the same."""
    return tuple(args[0]) if len(args) == 1 and isinstance(args[0], tuple | list) else args


def reshape(t: Tensor, *shape: Any) -> Tensor:
    return S.reshape(t, _flat(shape))


def transpose(t: Tensor, *axes: Any) -> Tensor:
    return S.transpose(t, _flat(axes) or None)


def permute(t: Tensor, *axes: Any) -> Tensor:
    return S.permute_dims(t, _flat(axes))


@torch_spelling
def norm(t: Tensor, p: float = 2, axis: Any = None, keepdims: bool = False) -> Tensor:
    """PyTorch's `t.norm()`: the vector `p`-norm."""
    return Q.vector_norm(t, p, axis, keepdims)


def _reflected(fn: Any) -> Any:
    """The reflected operator of `fn` (`2 - t` is `t.__rsub__(2)`, i.e. `fn(2, t)`)."""
    return lambda t, other: fn(other, t)


METHODS = {
    "__add__": F.add,
    "__radd__": _reflected(F.add),
    "__sub__": F.sub,
    "__rsub__": _reflected(F.sub),
    "__mul__": F.mul,
    "__rmul__": _reflected(F.mul),
    "__truediv__": F.div,
    "__rtruediv__": _reflected(F.div),
    "__pow__": F.pow,
    "__rpow__": _reflected(F.pow),
    "__matmul__": L.matmul,
    "__rmatmul__": _reflected(L.matmul),
    "__floordiv__": F.floor_divide,
    "__rfloordiv__": _reflected(F.floor_divide),
    "__mod__": F.remainder,
    "__rmod__": _reflected(F.remainder),
    "__neg__": F.neg,
    "__pos__": lambda t: t,
    "__getitem__": F.getitem,
    "__eq__": F.equal,
    "__ne__": F.not_equal,
    "__lt__": F.less,
    "__le__": F.less_equal,
    "__gt__": F.greater,
    "__ge__": F.greater_equal,
    "__and__": F.logical_and,
    "__or__": F.logical_or,
    "__invert__": F.logical_not,
    "sum": Q.sum,
    "mean": Q.mean,
    "max": Q.max,
    "min": Q.min,
    "prod": Q.prod,
    "var": Q.var,
    "std": Q.std,
    "norm": norm,
    "cumsum": Q.cumsum,
    "argmax": Q.argmax,
    "argmin": Q.argmin,
    "square": F.square,
    "log1p": F.log1p,
    "expm1": F.expm1,
    "erf": F.erf,
    "maximum": F.maximum,
    "minimum": F.minimum,
    "clip": F.clip,
    "clamp": F.clip,
    "remainder": F.remainder,
    "floor_divide": F.floor_divide,
    "exp": F.exp,
    "log": F.log,
    "sin": F.sin,
    "cos": F.cos,
    "tanh": F.tanh,
    "sigmoid": F.sigmoid,
    "relu": F.relu,
    "softplus": F.softplus,
    "sqrt": F.sqrt,
    "abs": F.abs,
    "pow": F.pow,
    "reshape": reshape,
    "view": reshape,
    "squeeze": S.squeeze,
    "unsqueeze": S.expand_dims,
    "expand_dims": S.expand_dims,
    "flatten": S.flatten,
    "permute": permute,
    "flip": S.flip,
    "split": S.split,
    "transpose": transpose,
    "swapaxes": S.swapaxes,
    "broadcast_to": S.broadcast_to,
    "matmul": L.matmul,
    "astype": astype,
    "clone": F.clone,
    "T": property(S.transpose),
}


# Each ops module that adds methods keeps its own table; a name belongs to one table.
TABLES = (METHODS, casting.METHODS, inplace.METHODS, neural.METHODS)


def attach() -> None:
    """Register every entry of every table on Tensor (idempotent)."""
    for table in TABLES:
        for name, method in table.items():
            setattr(Tensor, name, method)


attach()
