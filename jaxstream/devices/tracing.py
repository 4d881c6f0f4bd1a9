"""Whether this thread runs jaxstream code inside a JAX trace (`js.compile`, `to_jax`).

Inside a trace tensors hold tracers, and one XLA program is ordered by its data
flow: there is no stream to order and nothing on a device to wait for (Note
[XLA's stream] in xla.py). It lives with the devices, the lowest layer, because
the streams ask it.
"""

from __future__ import annotations

import threading


class _TracingState(threading.local):
    depth = 0


_tracing = _TracingState()


def inside_trace() -> bool:
    """Whether this thread runs jaxstream code inside a JAX trace."""
    return _tracing.depth > 0


class TracingScope:
    """Marks that jaxstream runs inside a JAX trace, where tensors may hold tracers."""

    def __enter__(self) -> None:
        _tracing.depth += 1

    def __exit__(self, *exc_info: object) -> None:
        _tracing.depth -= 1
