"""Process-wide options, validated when they are set.

`backward_pass_autocast` decides under which autocast state the backward of a
`jax_function` node is traced. That backward is fixed when the forward runs, so
an autocast region entered around `backward()` later cannot reach it:

- `"same_as_forward"` (default): the backward runs under the autocast state the
  forward ran under;
- `"off"`: the backward runs without autocast;
- a dict of `js.amp.autocast` keyword arguments (`{"dtype": "bfloat16"}`): the
  backward runs under `autocast(**kwargs)`, whatever the forward ran under.

Set it for the whole process (`js.config.backward_pass_autocast = "off"`) or for
a block with `js.config.patch(backward_pass_autocast="off")`. Options are global,
not per thread. Built-in ops are unaffected: their backward runs under the
autocast state around `backward()`, as in eager PyTorch.

`autograd_shutdown_wait_s` bounds how long stopping the engine's threads (at
interpreter exit, or `js.autograd.shutdown_engine_threads()`) waits for them;
threads still running then are named in a warning and left as daemons. The
default is 10 seconds, as PyTorch's, or the value of the environment variable
`JAXSTREAM_AUTOGRAD_SHUTDOWN_WAIT_LIMIT`; it is set like any option, e.g.
`js.config.patch(autograd_shutdown_wait_s=1.0)`.

`autograd_pool_idle_s` is how long an idle reentrant pool thread waits for work
before it exits, beyond the few the engine keeps (Note [Reentrant backward] in
autograd/threads.py); the default is 60 seconds.
"""

from __future__ import annotations

import os
import sys
import threading
import types
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from . import amp

BACKWARD_PASS_AUTOCAST_CHOICES = ("same_as_forward", "off")

backward_pass_autocast: str | dict[str, Any] = "same_as_forward"

SHUTDOWN_WAIT_ENV = "JAXSTREAM_AUTOGRAD_SHUTDOWN_WAIT_LIMIT"


def _validate_backward_pass_autocast(value: object) -> str | dict[str, Any]:
    if isinstance(value, str):
        if value not in BACKWARD_PASS_AUTOCAST_CHOICES:
            raise ValueError(
                f"config.backward_pass_autocast: {value!r} is not an option; use "
                f"'same_as_forward', 'off' or a dict of autocast kwargs such as "
                f"{{'dtype': 'bfloat16'}}"
            )
        return value
    if isinstance(value, Mapping):
        kwargs = dict(value)
        unknown = set(kwargs) - {"dtype", "enabled"}
        if unknown:
            raise ValueError(
                f"config.backward_pass_autocast: unknown autocast kwargs {sorted(unknown)}; "
                f"js.amp.autocast takes 'dtype' and 'enabled'"
            )
        amp.autocast(**kwargs)
        return kwargs
    raise TypeError(
        f"config.backward_pass_autocast: expected 'same_as_forward', 'off' or a dict of "
        f"autocast kwargs, got {type(value).__name__}"
    )


def _seconds(name: str) -> Callable[[object], float]:
    """The validator of option `name`, a finite number of seconds >= 0 (a numeric string
    too)."""

    def validate(value: object) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            raise TypeError(
                f"config.{name}: expected a number of seconds, got {type(value).__name__}"
            )
        try:
            seconds = float(value)
        except ValueError:
            seconds = -1.0
        if not 0.0 <= seconds <= threading.TIMEOUT_MAX:  # a longer wait overflows the timer
            raise ValueError(
                f"config.{name}: expected a finite number of seconds >= 0 (at most "
                f"{threading.TIMEOUT_MAX:.0f}), got {value!r}"
            )
        return seconds

    return validate


_VALIDATORS = {
    "backward_pass_autocast": _validate_backward_pass_autocast,
    "autograd_shutdown_wait_s": _seconds("autograd_shutdown_wait_s"),
    "autograd_pool_idle_s": _seconds("autograd_pool_idle_s"),
}

autograd_shutdown_wait_s: float = _VALIDATORS["autograd_shutdown_wait_s"](
    os.environ.get(SHUTDOWN_WAIT_ENV, 10.0)
)

autograd_pool_idle_s: float = 60.0


def _validated(name: str, value: object) -> object:
    if name not in _VALIDATORS:
        raise AttributeError(
            f"config: there is no option {name!r}; options are {sorted(_VALIDATORS)}"
        )
    return _VALIDATORS[name](value)


@contextmanager
def patch(**overrides: object) -> Iterator[None]:
    """Set options for the duration of a block (or a decorated function), then restore them."""
    validated = {name: _validated(name, value) for name, value in overrides.items()}
    module = sys.modules[__name__]
    saved = {name: getattr(module, name) for name in validated}
    for name, value in validated.items():
        setattr(module, name, value)
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(module, name, value)


def backward_autocast_state(forward: amp.AutocastState) -> amp.AutocastState:
    """The autocast state a node's backward is traced under, given its forward's."""
    option = backward_pass_autocast
    if option == "same_as_forward":
        return forward
    if option == "off":
        return amp.AutocastState(None)
    region = amp.autocast(**option)
    return amp.AutocastState(region.dtype if region.enabled else None)


class _ConfigModule(types.ModuleType):
    """Checks every assignment to an option, so a typo fails where it is made."""

    def __setattr__(self, name: str, value: object) -> None:
        if name in _VALIDATORS:
            value = _validated(name, value)
        elif not name.startswith("_") and not hasattr(self, name):
            raise AttributeError(
                f"config: there is no option {name!r}; options are {sorted(_VALIDATORS)}"
            )
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _ConfigModule
