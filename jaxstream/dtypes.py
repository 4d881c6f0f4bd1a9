"""The default floating dtype and the dtypes of Python data.

Python floats (and nested lists of them) become the default dtype, float32
unless `set_default_dtype` says otherwise, as in PyTorch; Python ints become
int64 and bools bool. Arrays keep their own dtype. Which dtypes a backend can
hold is the backend's to say (`Backend.holds_64bit_dtypes`): JAX holds 64-bit
dtypes only with its x64 mode on, and asking for one without it is an error
that says how to turn it on, never a silent narrowing. The one exception is
integers there, Python's and arrays' alike: they become int32, the widest integer the
backend holds, where every value fits (Note [64-bit integer data on JAX]).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from .backends import Backend

_FLOATING = (np.dtype("float16"), np.dtype("float32"), np.dtype("float64"))
_COMPLEX_OF = {2: np.dtype("complex64"), 4: np.dtype("complex64"), 8: np.dtype("complex128")}
_default = np.dtype("float32")


def set_default_dtype(dtype: Any) -> None:
    """Make `dtype` (float16, float32 or float64) the dtype of Python floats."""
    global _default
    d = np.dtype(dtype)
    if d not in _FLOATING:
        raise TypeError(
            f"set_default_dtype: only floating dtypes can be the default, got {d}; "
            "use float32 or float64"
        )
    _default = d


def get_default_dtype() -> np.dtype:
    """The dtype that Python floats become (float32 unless set)."""
    return _default


def python_dtype(kind: str, backend: Backend) -> np.dtype:
    """The dtype of Python data of NumPy dtype kind `kind` ("b", "i", "f" or "c") on `backend`.

    As PyTorch: floats take the default dtype, complex numbers its complex
    counterpart, ints int64 (int32 where the backend holds no 64-bit dtypes now), bools bool.
    """
    if kind == "b":
        return np.dtype(bool)
    if kind in "iu":
        return np.dtype(np.int64 if backend.holds_64bit_dtypes() else np.int32)
    if kind == "f":
        return _default
    return _COMPLEX_OF[_default.itemsize]


# Note [64-bit integer data on JAX]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# Integer data is int64 wherever NumPy made it (np.arange, labels read from a file, a torch
# LongTensor), so refusing it on JAX without x64, as float64 is refused, would stop every
# dataset at its labels. Integer data there becomes int32 (uint64: uint32), as Python ints
# do, once every value is known to fit; a value that does not is an error naming it. Asking
# for int64 by name stays an error, as asking for float64 does: a float64 array cannot
# narrow without losing precision silently, an integer that fits loses nothing.
_NARROWER = {np.dtype(np.int64): np.dtype(np.int32), np.dtype(np.uint64): np.dtype(np.uint32)}


def data_dtype(dtype: np.dtype, values: Any, backend: Backend) -> np.dtype:
    """The dtype `backend` gives data of `dtype` (Note [64-bit integer data on JAX]): `dtype`,
    or where the backend holds no 64-bit dtypes now, the 32-bit integer once `values` fit."""
    narrow = _NARROWER.get(dtype)
    if narrow is None or backend.holds_64bit_dtypes():
        return dtype
    if math.prod(values.shape):
        info = np.iinfo(narrow)
        for value in (int(values.min()), int(values.max())):
            if not info.min <= value <= info.max:
                raise OverflowError(
                    f"tensor: the {dtype} value {value} does not fit in {narrow}, the widest "
                    f"integer the {backend.name} backend holds while JAX's 64-bit mode is off; "
                    "enable it with jax.config.update('jax_enable_x64', True) (or "
                    "JAX_ENABLE_X64=1), or keep these data on the numpy backend"
                )
    return narrow
