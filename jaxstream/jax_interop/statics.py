"""Static arguments: hashed into the compilation caches, held out of what JAX traces.

`to_jax` and `jax_function` both take `static_argnums`, so both use these helpers.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any


def static_positions(static_argnums: int | Sequence[int]) -> tuple[int, ...]:
    """`static_argnums` as sorted, distinct positions, the one form the callers store."""
    if isinstance(static_argnums, int):
        static_argnums = (static_argnums,)
    return tuple(sorted({int(i) for i in static_argnums}))


def static_arguments(
    args: tuple, positions: Iterable[int], caller: str, hint: str
) -> tuple[tuple[int, Any], ...]:
    """`(index, value)` of each static argument of `args`, checked hashable in turn.

    They key compilation caches, hence the check; `caller` and `hint` begin and
    end the error for an unhashable one.
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


def without_statics(args: tuple, statics: Sequence[tuple[int, Any]]) -> tuple:
    """`args` with None for each static argument, so that JAX traces only the others."""
    positions = {i for i, _ in statics}
    return tuple(None if i in positions else a for i, a in enumerate(args))


def with_statics(args: Sequence, statics: Sequence[tuple[int, Any]]) -> list:
    """`args` from `without_statics` with the static arguments put back, to call the function."""
    args = list(args)
    for position, value in statics:
        args[position] = value
    return args
