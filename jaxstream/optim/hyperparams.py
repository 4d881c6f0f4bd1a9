"""The groups' hyperparameters on their way into the optax state: checked, and written
only where they changed (Note [Hyperparameters live in the state] in optimizer.py).

Note [Hyperparameters under js.compile]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
A parameter group is a `TracedEntries` dict whose traced entries are the
group's hyperparameters (`lr`, `momentum`, `betas`, `eps`, `weight_decay`, ...:
what `optax.inject_hyperparams` keeps as arrays in the state). So `js.compile`
lifts their numbers as traced inputs instead of keying them (Note [What
js.compile lifts] in compiling/discovery.py): a scheduler stepped every call,
or an `lr` edited by hand, reuses the program. The options the transformation is
built with (`nesterov`, `centered`, `initial_accumulator_value`) are not traced
entries: a change rebuilds the transformation and traces again. A scheduler is
stepped between calls; stepped inside the trace, it would compute the lrs from
tracers, so `LRScheduler.step` refuses. One that the function reaches (through an
object holding it) keys its epoch count as any Python number is keyed.

Inside the trace the state is traced too, and a step writes every group's
values into it, unconditionally: they are tracers, nothing can be compared, and
the writes cost nothing in the program. An eager step writes only what changed
since the last step (`HeldHyperparams`). That record says what the state holds
only while the state is the one the last eager step left: a compiled call
replaces the state with its own (written from that call's values), so an eager
step that finds another state writes every value again. The record is kept in
an object with `__slots__`, which the walk keys by identity without reading it,
so that the values it records do not enter the key either.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ..compiling.traced_entries import entry_shape, not_a_number


class HeldHyperparams:
    """Each group's hyperparameters as the state holds them (in its dtype), the group
    entries they were made from, and the state vectors that hold them."""

    __slots__ = ("applied", "seen", "vectors")

    def __init__(self, applied: list[dict[str, np.generic]], vectors: Any) -> None:
        self.reset(applied, vectors)

    def reset(self, applied: list[dict[str, np.generic]], vectors: Any) -> None:
        """Start over from `applied`, what the state in `vectors` holds (None: not known)."""
        self.applied = applied
        self.seen: list[tuple | None] = [None] * len(applied)
        self.vectors = None if holds_tracers(vectors) else vectors

    def changes(self, entries: list[tuple], values: Callable[[int], dict],
                vectors: Any) -> dict[int, dict[str, np.generic]]:
        """The values to write, by group: `values(i)` where group i's `entries` changed
        and make other values; every group's where the state in `vectors` is not the one
        recorded (Note [Hyperparameters under js.compile])."""
        stale = self.vectors is not vectors
        if stale:
            self.seen = [None] * len(entries)
        changed = {}
        for i, now in enumerate(entries):
            if now == self.seen[i]:
                continue
            self.seen[i] = now
            applied = self.applied[i]
            held = {name: type(applied[name])(value) for name, value in values(i).items()}
            if stale or held != applied:
                changed[i] = self.applied[i] = held
        return changed

    def synced(self, vectors: Any) -> None:
        """The state is now `vectors`, holding what was recorded (after an eager step)."""
        if not holds_tracers(vectors):
            self.vectors = vectors


def holds_tracers(arrays: Any) -> bool:
    """Whether `arrays` (the state's vectors) are traced: the step runs in a trace."""
    return isinstance(arrays, tuple) and any(isinstance(a, jax.core.Tracer) for a in arrays)


def held_hyperparams(state: Any) -> dict[str, np.generic]:
    """A group state's injected hyperparameters as host scalars of their dtype."""
    return {name: np.asarray(v)[()] for name, v in getattr(state, "hyperparams", {}).items()}


def write_hyperparams(states: list, values: dict[int, dict[str, Any]]) -> None:
    """Write `values[i]` into the injected hyperparameters of `states[i]`, in place, in
    their dtype and on their device."""
    for i, named in values.items():
        hyper = states[i].hyperparams
        for name, value in named.items():
            hyper[name] = jnp.full_like(hyper[name], value)


def check_hyperparam(value: Any, default: Any, where: str) -> None:
    """A group's hyperparameter is a real number, or a tuple of as many as its default."""
    shape = entry_shape(value)
    if shape is None:
        raise TypeError(not_a_number(value, where))
    expected = entry_shape(default)
    if shape != expected:
        wanted = "a real number" if expected == () else f"{expected[0]} real numbers"
        raise ValueError(
            f"{where} is {value!r}, where the optimizer takes {wanted} (as its default "
            f"{default!r}); set it to one of that form"
        )
