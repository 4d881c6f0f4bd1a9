"""A seeded random layered DAG of elementwise ops, written once for every framework.

Layer 0 holds the leaves; each node of a later layer applies one op to one or
two random nodes of the layer before. Ops are picked at random, except that a
squashing op (tanh or cos) is forced wherever the result could exceed
``_BOUND`` in magnitude, so values stay finite at any depth. The loss adds up
the last layer and sums to a scalar.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

_BOUND = 4.0
_BINARY = ("add", "sub", "mul")
_UNARY = ("tanh", "cos", "scale")
_SQUASHING = ("tanh", "cos")
_SCALE = 0.5


@dataclass(frozen=True)
class Step:
    op: str
    args: tuple[int, ...]


@dataclass(frozen=True)
class DagPlan:
    width: int
    layers: tuple[tuple[Step, ...], ...]

    def backward_node_count(self) -> int:
        """Ops the backward pass runs: those the loss depends on, plus the loss's own."""
        needed = set(range(self.width))
        count = 0
        for layer in reversed(self.layers):
            count += len(needed)
            needed = {arg for index in needed for arg in layer[index].args}
        return count + (self.width - 1) + 1


def make_plan(layers: int, width: int, seed: int = 0) -> DagPlan:
    """``layers`` layers of ``width`` op nodes above ``width`` leaves, from ``seed``."""
    rng = np.random.default_rng(seed)
    bounds = [1.0] * width
    plan = []
    for _ in range(layers):
        layer, next_bounds = [], []
        for _ in range(width):
            op = str(rng.choice(_BINARY + _UNARY))
            arity = 2 if op in _BINARY else 1
            args = tuple(int(a) for a in rng.choice(width, size=arity, replace=False))
            bound = _result_bound(op, [bounds[a] for a in args])
            if bound > _BOUND:
                op, args = str(rng.choice(_SQUASHING)), args[:1]
                bound = 1.0
            layer.append(Step(op, args))
            next_bounds.append(bound)
        plan.append(tuple(layer))
        bounds = next_bounds
    return DagPlan(width, tuple(plan))


def _result_bound(op: str, bounds: Sequence[float]) -> float:
    if op in _SQUASHING:
        return 1.0
    if op == "scale":
        return _SCALE * bounds[0]
    if op == "mul":
        return bounds[0] * bounds[1]
    return bounds[0] + bounds[1]


@dataclass(frozen=True)
class Unary:
    """The framework's tanh and cos (arithmetic goes through the operators)."""

    tanh: Callable[[Any], Any]
    cos: Callable[[Any], Any]


def evaluate(plan: DagPlan, leaves: Sequence[Any], unary: Unary) -> Any:
    """The scalar loss of ``plan`` on ``leaves`` (one per node of layer 0)."""
    values = list(leaves)
    for layer in plan.layers:
        values = [_apply(step, values, unary) for step in layer]
    total = values[0]
    for value in values[1:]:
        total = total + value
    return total.sum()


def _apply(step: Step, values: Sequence[Any], unary: Unary) -> Any:
    a = values[step.args[0]]
    if step.op == "tanh":
        return unary.tanh(a)
    if step.op == "cos":
        return unary.cos(a)
    if step.op == "scale":
        return a * _SCALE
    b = values[step.args[1]]
    if step.op == "add":
        return a + b
    if step.op == "sub":
        return a - b
    return a * b
