"""How the public op functions read their arguments: operands, result dtypes, aliases.

Every module of public op functions (`functional`, `reductions`, `shape_ops`,
`linalg`, `neural`) normalizes its arguments with these before `dispatch.apply`.
"""

from __future__ import annotations

import functools
import numbers
from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from .. import amp
from ..dtypes import get_default_dtype
from ..tensor import Tensor, is_floating, tensor
from . import rules as R
from .dispatch import apply
from .promotion import needs_cast, result_type


def operand(x: Any, like: Tensor | None = None) -> Any:
    """Tensors and Python numbers pass through (NumPy scalars become Python numbers, weak
    in promotion); any other array is a constant on `like`'s backend and device."""
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, Tensor | numbers.Number):
        return x
    if like is None:
        return tensor(x)
    return tensor(x, backend=like.backend, device=like.device)


def as_tensor(x: Any, like: Tensor | None = None) -> Tensor:
    """`x` as a Tensor: itself, or an array, nested list or number placed on `like`'s backend
    and device (without `like`, where `js.tensor` puts it): a target, labels or a mask may
    be any array."""
    if isinstance(x, Tensor):
        return x
    if like is None:
        return tensor(x)
    return tensor(x, backend=like.backend, device=like.device)


# Note [Result dtypes]
# ~~~~~~~~~~~~~~~~~~~~
# The result dtype of an op is PyTorch's and the same on every backend, which neither
# NumPy nor JAX gives alone: an integer or bool tensor meeting a float (a floating tensor,
# or a Python float, which takes the default dtype) becomes floating first (`promoted`),
# and float-only ops (true division, exp, log, mean, softmax, the losses, ...) cast integer
# inputs to the default dtype (`floating`). Python and NumPy scalars are weak: they never
# widen a floating tensor. Integer results are the backend's own (int32 on JAX without x64).
# Between two tensors of different dtypes PyTorch's rule decides (Note [Type promotion] in
# promotion.py).
_PASS_THROUGH = (Tensor, float, int, bool)


def _integral(x: Any) -> bool:
    return type(x) is Tensor and x.array.dtype.kind in "biu"


def astype(x: Tensor, dtype: Any) -> Tensor:
    """`x` as `dtype`; a cast to a non-floating dtype has no gradient (PyTorch's rule)."""
    dtype = x.array_backend.dtype(dtype)
    if dtype == x.dtype:
        return x
    return apply(R.ASTYPE if is_floating(dtype) else R.CAST_NO_GRAD, x, dtype=dtype)


def floating(x: Any) -> Any:
    """`x`, with an integer or bool tensor cast to the default dtype (Note [Result dtypes])."""
    return astype(x, get_default_dtype()) if _integral(x) else x


def promoted(*xs: Any) -> tuple:
    """`xs` cast as PyTorch's promotion says: two tensors of different dtypes to their result
    type (Note [Type promotion] in promotion.py), then integer tensors to the floating dtype
    another operand brings, if any (Note [Result dtypes])."""
    tensors = [x for x in xs if type(x) is Tensor]
    if len(tensors) == 2 and tensors[0].dtype != tensors[1].dtype:
        result = result_type(*tensors)
        xs = tuple(astype(x, result) if type(x) is Tensor and needs_cast(x.dtype, result) else x
                   for x in xs)
    for x in xs:  # a loop, not any(): this runs for every binary op
        if _integral(x):
            break
    else:
        return xs
    floats = [x.dtype for x in xs if type(x) is Tensor and not _integral(x)]
    if not floats and any(isinstance(x, float) for x in xs):
        floats = [get_default_dtype()]
    if not floats:
        return xs
    return tuple(astype(x, floats[0]) if _integral(x) else x for x in xs)


def operands(a: Any, b: Any) -> tuple:
    """Both operands of a binary op as Tensors or Python numbers, promoted."""
    if type(a) not in _PASS_THROUGH or type(b) not in _PASS_THROUGH:
        like = a if isinstance(a, Tensor) else b if isinstance(b, Tensor) else None
        a, b = operand(a, like), operand(b, like)
    # Spelled out: this runs for every binary op, and two tensors of one dtype (the same
    # dtype object, for NumPy's and JAX's built-in dtypes) need nothing (Note [The op fast
    # path]).
    if type(a) is Tensor:
        if type(b) is Tensor:
            if a.array.dtype is b.array.dtype:
                return a, b
            return promoted(a, b)
        if a.array.dtype.kind in "biu":
            return promoted(a, b)
    elif type(b) is Tensor and b.array.dtype.kind in "biu":
        return promoted(a, b)
    return a, b


def autocast(*xs: Any) -> tuple:
    """`xs` with floating tensors cast to the autocast dtype, inside `amp.autocast`."""
    dtype = amp.current_dtype()
    if dtype is None:
        return xs
    return tuple(
        astype(x, dtype) if isinstance(x, Tensor) and np.issubdtype(x.dtype, np.floating) else x
        for x in xs
    )


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


def host_values(t: Tensor) -> np.ndarray | None:
    """`t`'s values on the host (to read, not to write), or None while JAX traces it
    (nothing to check then)."""
    array = t.array
    if type(array) is np.ndarray and not t.device.is_accelerator:
        return array  # already the host's: no view to make, no stream to read on
    if isinstance(array, jax.core.Tracer):
        return None
    return np.asarray(t.numpy())
