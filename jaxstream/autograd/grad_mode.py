"""Thread-local autograd state: grad mode and multithreading, like PyTorch's TLS.

A GraphTask captures the caller's state when a backward starts; the engine sets
grad mode to `create_graph` while it runs nodes, on whichever thread runs them.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any


class _AutogradState(threading.local):
    grad_enabled: bool = True
    multithreading_enabled: bool = True


state = _AutogradState()


def is_grad_enabled() -> bool:
    return state.grad_enabled


class _GradModeGuard:
    """Sets grad mode on enter, restores it on exit; also usable as a decorator."""

    mode: bool = True

    def __enter__(self) -> None:
        self._prev = state.grad_enabled
        state.grad_enabled = self.mode

    def __exit__(self, *exc: object) -> None:
        state.grad_enabled = self._prev

    def __call__(self, fn: Callable) -> Callable:
        mode = self.mode

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with set_grad_enabled(mode):
                return fn(*args, **kwargs)

        return wrapper


class no_grad(_GradModeGuard):
    """Disables gradient recording inside the block (or the decorated function)."""

    mode = False


class enable_grad(_GradModeGuard):
    """Enables gradient recording inside the block (or the decorated function)."""

    mode = True


class set_grad_enabled(_GradModeGuard):
    """Sets grad mode to `mode` immediately; as a context manager, restores it on exit."""

    def __init__(self, mode: bool) -> None:
        self.mode = bool(mode)
        self._prev = state.grad_enabled
        state.grad_enabled = self.mode

    def __enter__(self) -> None:
        state.grad_enabled = self.mode

    def __exit__(self, *exc: object) -> None:
        state.grad_enabled = self._prev

    def __call__(self, fn: Callable) -> Callable:
        state.grad_enabled = self._prev
        return super().__call__(fn)


class set_multithreading_enabled:
    """Turns the engine's device threads on or off for backward calls on this thread."""

    def __init__(self, mode: bool) -> None:
        self._prev = state.multithreading_enabled
        state.multithreading_enabled = bool(mode)

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        state.multithreading_enabled = self._prev


def is_multithreading_enabled() -> bool:
    return state.multithreading_enabled
