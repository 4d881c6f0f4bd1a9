"""Automatic mixed precision: the autocast state that matmul-like ops consult."""

from __future__ import annotations

import threading

_state = threading.local()


def current_dtype():
    """The dtype matmul/linear compute in under autocast, or None when autocast is off."""
    return getattr(_state, "dtype", None)
