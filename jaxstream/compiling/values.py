"""Values that cross a compiled program's boundary: tensors and arrays out, tensors back.

A value that the trace leaves behind (the function's result, a new `.grad`, an
attribute rebound to a new tensor) is split into a static plan, made once per
trace, and the arrays the program returns; after each call the plan puts the
arrays back into tensors. An outside tensor stays itself: its position among
the lifted tensors is planned, not its array.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import jax

from ..backends import Backend
from ..devices import Device
from ..tensor import Tensor


@dataclass(frozen=True)
class Outside:
    """The lifted tensor at `index`."""

    index: int


@dataclass(frozen=True)
class NewTensor:
    """A tensor made inside the trace: a new leaf around the next returned array."""

    backend: Backend
    device: Device


class NewArray:
    """A JAX array: the next returned array as it is."""


@dataclass(frozen=True)
class Static:
    """A Python value made at trace time, the same after every call."""

    value: Any


Leaf = Outside | NewTensor | NewArray | Static


def is_traced(value: Any) -> bool:
    """Whether `value` holds a tracer: a traced array, or a tensor (or its grad) over one."""
    for leaf in jax.tree.leaves(value, is_leaf=_is_tensor):
        if isinstance(leaf, jax.core.Tracer):
            return True
        if isinstance(leaf, Tensor) and (
            isinstance(leaf.array, jax.core.Tracer) or is_traced(leaf._grad)
        ):
            return True
    return False


@dataclass(frozen=True)
class Plan:
    """How to rebuild one value from the program's returned arrays."""

    tree: Any
    leaves: tuple[Leaf, ...]

    def rebuild(self, arrays: Iterator[Any], tensors: Sequence[Tensor]) -> Any:
        leaves = [_rebuild(leaf, arrays, tensors) for leaf in self.leaves]
        return jax.tree.unflatten(self.tree, leaves)


def _rebuild(leaf: Leaf, arrays: Iterator[Any], tensors: Sequence[Tensor]) -> Any:
    if isinstance(leaf, Outside):
        return tensors[leaf.index]
    if isinstance(leaf, NewTensor):
        return Tensor.wrap(next(arrays), leaf.backend, leaf.device)
    if isinstance(leaf, NewArray):
        return next(arrays)
    return leaf.value


def _is_tensor(value: Any) -> bool:
    return isinstance(value, Tensor)


class Splitter:
    """Splits values at trace time into plans and the arrays the program returns."""

    def __init__(self, tensors: Sequence[Tensor], outside_objects: set[int]) -> None:
        self.positions = {id(t): i for i, t in enumerate(tensors)}
        self.outside_objects = outside_objects
        self.arrays: list[Any] = []

    def split(self, value: Any, where: str) -> Plan:
        """The plan of `value`; its arrays are appended to `self.arrays`."""
        leaves, tree = jax.tree.flatten(value, is_leaf=self._is_leaf)
        return Plan(tree, tuple(self._leaf(leaf, where) for leaf in leaves))

    def _is_leaf(self, value: Any) -> bool:
        return isinstance(value, Tensor) or id(value) in self.outside_objects

    def _leaf(self, leaf: Any, where: str) -> Leaf:
        if isinstance(leaf, Tensor):
            position = self.positions.get(id(leaf))
            if position is not None:
                return Outside(position)
            self.arrays.append(leaf.array)
            return NewTensor(leaf.array_backend, leaf.device)
        if isinstance(leaf, jax.Array):
            self.arrays.append(leaf)
            return NewArray()
        if is_traced(leaf) and id(leaf) not in self.outside_objects:
            raise TypeError(
                f"js.compile: {where} holds a {type(leaf).__name__} that holds traced values; "
                f"a compiled function can hand back tensors, JAX arrays and pytrees of them, "
                f"not other objects made while tracing. Return its tensors instead"
            )
        return Static(leaf)
