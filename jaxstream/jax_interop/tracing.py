"""Whether jaxstream runs inside a JAX trace (a `to_jax` function), where tensors hold tracers."""

from __future__ import annotations

import threading
from typing import Any

import jax


def is_tracer(value: Any) -> bool:
    """Whether `value` is an abstract JAX value: it has no data to check, share or keep."""
    return isinstance(value, jax.core.Tracer)


class _TracingState(threading.local):
    depth = 0


_tracing = _TracingState()


def inside_trace() -> bool:
    """Whether this thread runs a `to_jax` function, the one place tensors may hold tracers."""
    return _tracing.depth > 0


class TracingScope:
    """Marks that jaxstream runs inside a JAX trace, where tensors may hold tracers."""

    def __enter__(self) -> None:
        _tracing.depth += 1

    def __exit__(self, *exc_info: object) -> None:
        _tracing.depth -= 1
