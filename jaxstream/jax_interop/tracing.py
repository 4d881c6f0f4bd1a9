"""Whether a value is a tracer; the trace state itself is the devices' (devices/tracing.py)."""

from __future__ import annotations

from typing import Any

import jax

from ..devices.tracing import TracingScope, inside_trace

__all__ = ["TracingScope", "inside_trace", "is_tracer"]


def is_tracer(value: Any) -> bool:
    """Whether `value` is an abstract JAX value: it has no data to check, share or keep."""
    return isinstance(value, jax.core.Tracer)
