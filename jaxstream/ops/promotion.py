"""PyTorch's type promotion between two tensors (`torch.result_type`), on every backend.

Note [Type promotion]
~~~~~~~~~~~~~~~~~~~~~
The result dtype of an elementwise op is PyTorch's, which neither NumPy nor JAX gives alone.
dtypes fall in four categories, bool < integer < floating < complex. Two tensors of one
weight give their common dtype (`promote_types`): within a category the wider (uint8 and
int8 make int16, float16 and bfloat16 float32), across categories the higher one's dtype
(int64 and float16 make float16; complex64 and float64 make complex128). A zero-dim tensor
weighs less than one with dimensions: it decides the result only where its category is
higher (float32[n] + float64[] is float32, int32[n] + float64[] is float64), as a Python
number does, which weighs least of all (Note [Result dtypes] in operands.py).

An operand is cast to the result before the kernel runs (`needs_cast`) where the backend
would promote differently: a lower category (int64 + float32 is float64 in NumPy), or a
dtype as wide as the result or wider (the zero-dim float64 above). A narrower dtype of the
result's category is left to the backend, which widens it as PyTorch does without a cast
node between the operand and the op. Operands of one dtype never come here (Note [The op
fast path]). Matrix products promote nothing (Note [Matrix products do not promote] in
products.py), and an in-place op may cast its result back only as PyTorch's `can_cast`
allows.
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import numpy as np

from ..tensor import Tensor
from .dtype_names import scalar_type

_CATEGORIES = {"b": 0, "u": 1, "i": 1, "f": 2, "c": 3}
_COMPLEX = 3


def category(dtype: Any) -> int:
    """0 bool, 1 integer, 2 floating, 3 complex (bfloat16 and JAX's other float kinds: 2)."""
    return _CATEGORIES.get(dtype.kind, 2)


def promote_types(a: Any, b: Any) -> np.dtype:
    """PyTorch's `promote_types`: the dtype two tensors of one weight give."""
    if a == b:
        return a
    ca, cb = category(a), category(b)
    if ca != cb and min(ca, cb) < 2:
        return a if ca > cb else b
    if "V" in (a.kind, b.kind):  # bfloat16: JAX's lattice knows it, and agrees with torch's
        return np.dtype(jnp.promote_types(a, b))
    return np.promote_types(a, b)


def result_type(a: Tensor, b: Tensor) -> np.dtype:
    """The dtype PyTorch gives an elementwise op of `a` and `b` (Note [Type promotion])."""
    if (a.ndim == 0) == (b.ndim == 0):
        return promote_types(a.dtype, b.dtype)
    dim, zero = (b.dtype, a.dtype) if a.ndim == 0 else (a.dtype, b.dtype)
    if category(zero) <= category(dim):
        return dim
    if category(zero) == _COMPLEX and category(dim) == 2:  # the floating tensor's precision
        return np.dtype(np.complex128 if dim.itemsize == 8 else np.complex64)
    return zero


def needs_cast(dtype: Any, result: Any) -> bool:
    """Whether an operand of `dtype` must be cast to `result` before the kernel runs, rather
    than be widened by the backend's own promotion (Note [Type promotion])."""
    if dtype == result:
        return False
    return category(dtype) != category(result) or dtype.itemsize >= result.itemsize


def can_cast(source: Any, target: Any) -> bool:
    """PyTorch's `can_cast`: whether an in-place op may store a result of `source` in a tensor
    of `target` (never complex to real, floating to integer, or anything but bool to bool)."""
    return category(source) <= category(target)


def check_can_cast(op: str, source: Any, target: Any, shape: tuple) -> None:
    """PyTorch's error for an in-place op whose result it would not cast back."""
    if can_cast(source, target):
        return
    raise RuntimeError(
        f"result type {scalar_type(source)} can't be cast to the desired output type "
        f"{scalar_type(target)}: {op} on a {target} tensor of shape {shape} gives {source}; "
        f"keep the result in a new tensor (the out-of-place op), or cast the tensor first, "
        f"e.g. t = t.to('{source}')"
    )
