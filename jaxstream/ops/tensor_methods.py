"""Tensor's operators and op methods, attached to the class when `jaxstream.ops` is imported.

Tensor sits below the ops in the import graph and never names them; this
table is where the ops layer registers itself on it (one line per method).
"""

from __future__ import annotations

from typing import Any

from ..tensor import Tensor
from . import arithmetic_names as A
from . import (
    casting,
    indexing,
    inplace,
    matrices,
    neural,
    pointwise,
    sampling,
    statistics,
    structure,
)
from . import decompositions as DEC
from . import extrema as E
from . import folding as FO
from . import functional as F
from . import index_writes as IW
from . import inplace_methods as IM
from . import integer_math as IMA
from . import linalg as L
from . import math_functions as MF
from . import more_products as MP
from . import more_random as MR
from . import more_statistics as MS
from . import nonzero as NZ
from . import reductions as Q
from . import shape_ops as S
from . import tensor_utilities as TU
from . import tensor_utility_shapes as TS
from . import top_level_names as TN
from . import top_level_nn as TNN
from .operands import astype, torch_spelling
from .return_types import Size
from .shapes import flat_sizes, normalize_axis


def reshape(t: Tensor, *shape: Any) -> Tensor:
    return S.reshape(t, flat_sizes(shape))


def view(t: Tensor, *shape_or_dtype: Any) -> Tensor:
    """PyTorch's `view(*shape)` (as `reshape`) or `view(dtype)` (the bytes reinterpreted)."""
    if len(shape_or_dtype) == 1 and not isinstance(shape_or_dtype[0], int | tuple | list):
        return S.view_as_dtype(t, shape_or_dtype[0])
    return S.reshape(t, flat_sizes(shape_or_dtype))


def permute(t: Tensor, *dims: Any) -> Tensor:
    return S.permute_dims(t, flat_sizes(dims))


def flip(t: Tensor, *args: Any, dims: Any = None, axis: Any = None) -> Tensor:
    """`t.flip(0, 1)`, `t.flip((0, 1))` and `t.flip(dims=...)` as PyTorch's; no dims (or
    None) flips every dim, as the array API's `flip`."""
    args = flat_sizes(args)
    return S.flip(t, dims if args in ((), (None,)) else args, axis=axis)


def size(t: Tensor, dim: int | None = None) -> Size | int:
    """PyTorch's `size()`: the shape as a `Size` (a tuple), or the length of dim `dim`."""
    if dim is None:
        return Size(t.shape)
    if not t.ndim:
        raise IndexError(f"size: Dimension specified as {dim} but tensor has no dimensions")
    return t.shape[normalize_axis("size", dim, t.shape)]


@torch_spelling
def norm(t: Tensor, p: float | str | None = "fro", axis: Any = None,
         keepdims: bool = False) -> Tensor:
    """PyTorch's `t.norm()`: the vector `p`-norm; "fro" (the default) and None are the
    2-norm of the elements, as PyTorch's."""
    if p == "nuc":
        raise NotImplementedError(
            f"norm: p='nuc' (the nuclear norm of a matrix, shape {t.shape}) is not supported; "
            f"the vector norms are (p a number, or 'fro')"
        )
    return Q.vector_norm(t, 2 if p in ("fro", None) else p, axis, keepdims)


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
    "__and__": A.bitwise_and,  # PyTorch's `&` is bitwise: logical only on bools
    "__rand__": _reflected(A.bitwise_and),
    "__or__": A.bitwise_or,
    "__ror__": _reflected(A.bitwise_or),
    "__xor__": A.bitwise_xor,
    "__rxor__": _reflected(A.bitwise_xor),
    "__invert__": A.bitwise_not,
    "sum": Q.sum,
    "mean": Q.mean,
    "max": E.max,
    "min": E.min,
    "amax": E.amax,
    "amin": E.amin,
    "prod": Q.prod,
    "var": Q.var,
    "std": Q.std,
    "norm": norm,
    "cumsum": Q.cumsum,
    "cumprod": Q.cumprod,
    "logcumsumexp": Q.logcumsumexp,
    "argmax": Q.argmax,
    "argmin": Q.argmin,
    "nonzero": NZ.nonzero,
    "argwhere": NZ.argwhere,
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
    "size": size,
    "dim": lambda t: t.ndim,
    "ndimension": lambda t: t.ndim,
    "reshape": reshape,
    "view": view,
    "squeeze": S.squeeze,
    "unsqueeze": S.unsqueeze,
    "expand_dims": S.expand_dims,
    "flatten": S.flatten,
    "permute": permute,
    "flip": flip,
    "split": S.split,
    "chunk": S.chunk,
    "unbind": S.unbind,
    "transpose": S.transpose,
    "swapaxes": S.swapaxes,
    "broadcast_to": S.broadcast_to,
    "expand": S.expand,
    "expand_as": S.expand_as,
    "repeat": S.repeat,
    "matmul": L.matmul,
    "bmm": L.bmm,
    "addmm": L.addmm,
    "baddbmm": L.baddbmm,
    "astype": astype,
    "clone": F.clone,
    "T": property(S.reversed_dims),
}


# Each ops module that adds methods keeps its own table; a name belongs to one table.
TABLES = (
    METHODS, casting.METHODS, inplace.METHODS, neural.METHODS, pointwise.METHODS,
    structure.METHODS, indexing.METHODS, matrices.METHODS, sampling.METHODS,
    A.METHODS,
    TU.METHODS, TS.METHODS,
    MF.METHODS,
    IW.METHODS,
    statistics.METHODS,
    IM.METHODS, TN.METHODS, TNN.METHODS,
    FO.METHODS,
    MP.METHODS, MS.METHODS, IMA.METHODS, MR.METHODS, DEC.METHODS,
)


def attach() -> None:
    """Register every entry of every table on Tensor (idempotent)."""
    for table in TABLES:
        for name, method in table.items():
            setattr(Tensor, name, method)


attach()
