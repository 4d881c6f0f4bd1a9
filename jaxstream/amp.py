"""Automatic mixed precision: the autocast state that matmul-like ops consult.

The state is per thread, like PyTorch's: an autocast region entered on one thread
does not change what another thread computes. A graph task takes the caller's
`current_dtype()` when a backward starts, and the engine sets it with
`set_current_dtype` on whichever thread runs a node, so a backward run inside
`autocast` sees the caller's state.
"""

from __future__ import annotations

import functools
import threading
from dataclasses import dataclass

import numpy as np

# JAX primitives whose floating operands autocast casts (the matmul-like ones,
# the same family PyTorch's autocast runs in lower precision).
CAST_PRIMITIVES = frozenset({"dot_general", "conv_general_dilated"})

class _State(threading.local):
    dtype: np.dtype | None = None  # a class default: reading it never misses (this is hot)


_state = _State()


@dataclass(frozen=True)
class AutocastState:
    """What `autocast` decided for the current thread: the compute dtype, or None."""

    dtype: np.dtype | None


def current_dtype() -> np.dtype | None:
    """The dtype matmul/linear compute in under autocast, or None when autocast is off."""
    return _state.dtype


def is_autocast_enabled() -> bool:
    """Whether an enabled autocast region is active on this thread."""
    return current_dtype() is not None


def resolve_dtype(dtype: object, *, caller: str = "autocast") -> np.dtype:
    """The NumPy dtype named by `dtype` ("bfloat16", np.float16, jnp.bfloat16, ...).

    Autocast only lowers the precision of floating-point math, so integer,
    boolean and complex dtypes are refused with an error naming the caller.
    """
    try:
        resolved = np.dtype(_dtype_by_name(dtype) if isinstance(dtype, str) else dtype)
    except TypeError as exc:
        raise TypeError(
            f"{caller}: dtype {dtype!r} is not a dtype; pass a floating dtype such as "
            f"'bfloat16' or 'float16'"
        ) from exc
    if resolved.kind != "f" and resolved.name != "bfloat16":
        raise ValueError(
            f"{caller}: autocast computes in a floating dtype, got {resolved.name}; "
            f"pass 'bfloat16', 'float16' or 'float32'"
        )
    return resolved


def _dtype_by_name(name: str) -> object:
    if name == "bfloat16":
        import ml_dtypes

        return ml_dtypes.bfloat16
    return name


class autocast:
    """Run matmul-like ops in `dtype` inside the block (thread-local, nestable).

    Built-in `matmul`/`linear` cast their floating operands to `dtype` and return
    that dtype, as PyTorch's autocast does; a `jax_function` traced inside the block
    has the operands of its `dot_general` and convolution primitives cast.
    `enabled=False` turns autocast off inside an enclosing region. Usable as a
    decorator too.
    """

    def __init__(self, dtype: object = "bfloat16", enabled: bool = True) -> None:
        if not isinstance(enabled, bool):
            raise TypeError(f"autocast: enabled must be a bool, got {type(enabled).__name__}")
        self.dtype = resolve_dtype(dtype)
        self.enabled = enabled
        self._saved: list[np.dtype | None] = []

    def __enter__(self) -> autocast:
        self._saved.append(current_dtype())
        _state.dtype = self.dtype if self.enabled else None
        return self

    def __exit__(self, *exc_info: object) -> None:
        _state.dtype = self._saved.pop()

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with autocast(self.dtype, self.enabled):
                return fn(*args, **kwargs)

        return wrapper


def set_current_dtype(dtype: np.dtype | None) -> None:
    """Set this thread's autocast dtype directly (the engine carries it to its workers)."""
    _state.dtype = dtype
