"""Static arguments: hashed into the compilation caches, held out of what JAX traces."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any


def _static_positions(static_argnums: int | Sequence[int]) -> tuple[int, ...]:
    """`static_argnums` as sorted, distinct positions."""
    if isinstance(static_argnums, int):
        static_argnums = (static_argnums,)
    return tuple(sorted({int(i) for i in static_argnums}))


def _static_arguments(
    args: tuple, positions: Iterable[int], caller: str, hint: str
) -> tuple[tuple[int, Any], ...]:
    """`(index, value)` of each static argument of `args`, checked hashable in turn.

    `caller` and `hint` begin and end the error for an unhashable one.
    """
    statics = []
    for position in positions:
        index = position if position >= 0 else len(args) + position
        value = args[index]
        try:
            hash(value)
        except TypeError as exc:
            raise TypeError(
                f"{caller}: static argument {index} is an unhashable {type(value).__name__}; {hint}"
            ) from exc
        statics.append((index, value))
    return tuple(statics)


def _without_statics(args: tuple, statics: Sequence[tuple[int, Any]]) -> tuple:
    """`args` with None for each static argument."""
    positions = {i for i, _ in statics}
    return tuple(None if i in positions else a for i, a in enumerate(args))


def _with_statics(args: Sequence, statics: Sequence[tuple[int, Any]]) -> list:
    """`args` from `_without_statics` with the static arguments put back."""
    args = list(args)
    for position, value in statics:
        args[position] = value
    return args
