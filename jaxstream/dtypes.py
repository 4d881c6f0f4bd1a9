"""The default floating dtype and the dtypes of Python data.

Python floats (and nested lists of them) become the default dtype, float32
unless `set_default_dtype` says otherwise, as in PyTorch; Python ints become
int64 and bools bool. Arrays keep their own dtype. Which dtypes a backend can
hold is the backend's to say (`Backend.holds_64bit_dtypes`): JAX holds 64-bit
dtypes only with its x64 mode on, and asking for one without it is an error
that says how to turn it on, never a silent narrowing. The one exception is
Python ints there: they become int32, the widest integer the backend holds.
"""

from __future__ import annotations

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
