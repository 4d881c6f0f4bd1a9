"""Whether jaxstream runs inside a JAX trace (a `to_jax` function), where tensors hold tracers."""

from __future__ import annotations

import threading
from typing import Any

import jax


def _is_tracer(value: Any) -> bool:
    return isinstance(value, jax.core.Tracer)


class _TracingState(threading.local):
    depth = 0


_tracing = _TracingState()


class _TracingScope:
    """Marks that jaxstream runs inside a JAX trace, where tensors may hold tracers."""

    def __enter__(self) -> None:
        _tracing.depth += 1

    def __exit__(self, *exc_info: object) -> None:
        _tracing.depth -= 1
