"""The default floating dtype, the dtypes of Python data, and which dtypes a backend can hold.

Python floats (and nested lists of them) become the default dtype, float32
unless `set_default_dtype` says otherwise, as in PyTorch; Python ints become
int64 and bools bool. Arrays keep their own dtype. JAX holds 64-bit dtypes
only with its x64 mode on; asking for one without it is an error that says
how to turn it on, never a silent narrowing. The one exception is Python
ints on JAX without x64: they become int32, JAX's widest integer there.
"""

from __future__ import annotations

from typing import Any

import jax
import numpy as np

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


def wide_dtype_unsupported(backend_name: str, dtype: Any) -> str | None:
    """Why `backend_name` cannot hold `dtype` (a 64-bit dtype on JAX without x64), or None."""
    if backend_name != "jax" or jax.config.x64_enabled:
        return None
    d = np.dtype(dtype)
    if d.itemsize == 8 and d.kind in "fiu" or d == np.complex128:
        return (
            f"{d} on the jax backend needs JAX's 64-bit mode, which is off; enable it with "
            "jax.config.update('jax_enable_x64', True) (or JAX_ENABLE_X64=1), or use a "
            "32-bit dtype"
        )
    return None


def python_dtype(kind: str, backend_name: str) -> np.dtype:
    """The dtype of Python data of NumPy dtype kind `kind` ("b", "i", "f" or "c") on a backend.

    As PyTorch: floats take the default dtype, complex numbers its complex
    counterpart, ints int64 (int32 on JAX without x64), bools bool.
    """
    if kind == "b":
        return np.dtype(bool)
    if kind in "iu":
        narrow = backend_name == "jax" and not jax.config.x64_enabled
        return np.dtype(np.int32 if narrow else np.int64)
    if kind == "f":
        return _default
    return _COMPLEX_OF[_default.itemsize]
