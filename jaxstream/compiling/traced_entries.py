"""`TracedEntries`: a dict whose named numeric entries enter a compiled program as inputs.

An optimizer's parameter groups are such dicts: their hyperparameters (`lr`,
`betas`, ...) change between calls, and keying them would trace again on every
call (Note [What js.compile lifts] in discovery.py). Here: what such an entry may
hold, its part of the key, and its values on the way in and out of a trace.
"""

from __future__ import annotations

import numbers
from typing import Any

import jax
import numpy as np

from .values import is_traced


class TracedEntries(dict):
    """A dict whose entries named in `traced` are traced inputs of `js.compile`, read
    before each call, not part of its key: each a real number or a tuple (or list) of
    them. Its other entries are walked as a dict's are."""

    __slots__ = ("traced",)

    def __init__(self, entries: Any = (), traced: tuple[str, ...] = ()) -> None:
        super().__init__(entries)
        self.traced = tuple(traced)


_FLOATS = frozenset({float, int})
"""The common numbers, found by their exact type before the slower isinstance test."""


def entry_shape(value: Any) -> tuple[int, ...] | None:
    """`()` for a real number, `(n,)` for a tuple or list of `n` of them, else None."""
    if type(value) in _FLOATS or isinstance(value, numbers.Real):
        return ()
    if isinstance(value, tuple | list) and all(
        type(v) in _FLOATS or isinstance(v, numbers.Real) for v in value
    ):
        return (len(value),)
    return None


def entry_key(value: Any) -> tuple | None:
    """What the key reads of a traced entry: its shape, and whether it is a list."""
    shape = entry_shape(value)
    return None if shape is None else (shape, type(value) is list)


def not_a_number(value: Any, where: str) -> str:
    """The complaint about `value`, found at `where` where a real number was expected."""
    return (f"{where} is a {type(value).__name__} ({value!r}); it holds a hyperparameter, "
            f"a real number (or a tuple of them, as betas): set it to a float, e.g. 0.01 "
            f"(from a tensor or an array: float(x))")


class EntryInputs:
    """The numbers the entries hold, in order, as one input of the program (a jitted call
    pays per argument), the last one reused while they are the same (it pays for a host
    array too)."""

    def __init__(self) -> None:
        self.last: tuple[list, Any] = ([], None)

    def __call__(self, entries: list[tuple[dict, Any]]) -> Any:
        values: list = []
        for mapping, name in entries:
            value = mapping[name]
            if isinstance(value, tuple | list):
                values.extend(value)
            else:
                values.append(value)
        if values != self.last[0]:
            self.last = (values, jax.device_put(np.array(values, dtype=np.float64)))
        return self.last[1]


class SwappedEntries:
    """Entries holding the traced numbers of one trace, and what they held before."""

    def __init__(self, entries: list[tuple[dict, Any]], traced: Any) -> None:
        numbers_in = iter(traced)
        self.originals = []
        for mapping, name in entries:
            value = mapping[name]
            self.originals.append((mapping, name, value))
            if isinstance(value, tuple | list):
                mapping[name] = type(value)(next(numbers_in) for _ in value)
            else:
                mapping[name] = next(numbers_in)

    def restore(self) -> None:
        """Put back what an entry held where it still holds a traced value; a plain value
        that the function set there stays, as the Python effects of a trace do."""
        for mapping, name, original in self.originals:
            if is_traced(mapping.get(name)):
                mapping[name] = original
