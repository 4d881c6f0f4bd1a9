"""Effects of a compiled function on what it did not create, traced once and applied each call.

Note [Effects of a compiled call]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
While tracing, every lifted tensor (Note [What js.compile lifts]) holds a
tracer in place of its array, every lifted attribute a pytree of tracers, and
every traced entry of a `TracedEntries` dict its traced numbers.
`fn` then runs as it would eagerly, and leaves behind effects on them:
- a tensor's array rebound by an in-place op (an optimizer step, `p -= lr * g`,
  a view written through) and its version counter bumped;
- a tensor's `.grad` set, accumulated (in place into the same tensor), replaced
  or cleared; its `requires_grad` flag changed;
- an object's attribute rebound to a new tensor or JAX arrays (optax state).
`TraceSession.finish` turns them into an `Effects` plan and the arrays the
program returns, then puts every original back, so that no tracer outlives the
trace (a traced entry gets back what it held, unless the function set a plain
value there). `Effects.apply` writes the returned arrays where the eager run would
have left its values, after this call and every cached one.

Refused, with the place named: an outside tensor left with a graph recorded
inside (an in-place op under grad mode on a tensor that did not require grad),
and a traced value stored in an outside list or dict (it cannot be returned).
Python effects without traced values (a hook appending its name to a list)
happen at trace time only, as the hooks themselves do.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import Any

import jax

from ..tensor import Tensor
from .discovery import Discovery, describe
from .traced_entries import SwappedEntries, TracedEntries
from .values import Plan, Splitter, is_traced

_ABSENT = object()


@dataclass(frozen=True)
class Effects:
    """What a traced call leaves on lifted state, as positions and plans."""

    rebinds: tuple[int, ...]
    versions: tuple[tuple[int, int], ...]
    requires_grad: tuple[tuple[int, bool], ...]
    grads: tuple[tuple[int, Plan], ...]
    attributes: tuple[tuple[int, str, Plan], ...]
    result: Plan

    def apply(self, outputs: list, found: Discovery) -> Any:
        """Write the program's `outputs` into this call's lifted state; returns the result."""
        tensors = found.tensors
        arrays = iter(outputs)
        for index in self.rebinds:
            tensors[index].array = next(arrays)
        for index, delta in self.versions:
            tensors[index].version_counter[0] += delta
        for index, flag in self.requires_grad:
            tensors[index]._requires_grad = flag
        for index, plan in self.grads:
            tensors[index]._grad = plan.rebuild(arrays, tensors)
        for index, name, plan in self.attributes:
            setattr(found.objects[index], name, plan.rebuild(arrays, tensors))
        return self.result.rebuild(arrays, tensors)


class _TensorState:
    """A lifted tensor's fields that a trace may change, as they were before it."""

    __slots__ = ("array", "grad", "requires_grad", "version", "accumulator", "views")

    def __init__(self, t: Tensor) -> None:
        self.array = t.array
        self.grad = t._grad
        self.requires_grad = t._requires_grad
        self.version = t.version_counter[0]
        self.accumulator = t._grad_accumulator
        self.views = None if t._views is None else list(t._views)

    def restore(self, t: Tensor) -> None:
        t.array = self.array
        t._grad = self.grad
        t._requires_grad = self.requires_grad
        t.version_counter[0] = self.version
        t._grad_accumulator = self.accumulator
        if t._views is not None and len(t._views) != len(self.views or ()):
            t._views = None if self.views is None else weakref.WeakSet(self.views)


class TraceSession:
    """Lifted state swapped for tracers during one trace (Note [Effects of a compiled call])."""

    def __init__(self, found: Discovery, tracers: list) -> None:
        self.found = found
        self.before = [_TensorState(t) for t in found.tensors]
        self.originals = [dict(vars(obj)) for obj in found.objects]
        traced = iter(tracers)
        for t in found.tensors:
            t.array = next(traced)
        for obj, name in found.holders:
            value = getattr(obj, name)
            leaves = [next(traced) for _ in jax.tree.leaves(value)]
            object.__setattr__(obj, name, jax.tree.unflatten(jax.tree.structure(value), leaves))
        self.entries = SwappedEntries(found.entries, next(traced) if found.entries else ())
        self.contents = [_contents(c) for c in found.containers]
        self.swapped = [dict(vars(obj)) for obj in found.objects]
        self.inputs = [t.array for t in found.tensors]
        self.rest = list(traced)

    def finish(self, result: Any) -> tuple[Effects, list]:
        """The effects plan and the arrays to return, from the state `fn` left."""
        found = self.found
        outside = {id(obj) for obj in found.objects}
        splitter = Splitter(found.tensors, outside)
        rebinds = []
        for i, t in enumerate(found.tensors):
            self._check_history(t)
            if t.array is not self.inputs[i]:
                rebinds.append(i)
                splitter.arrays.append(t.array)
        self._check_containers()
        effects = Effects(
            rebinds=tuple(rebinds),
            versions=self._versions(),
            requires_grad=tuple(
                (i, t._requires_grad)
                for i, (t, old) in enumerate(zip(found.tensors, self.before, strict=True))
                if t._requires_grad != old.requires_grad
            ),
            grads=self._grads(splitter),
            attributes=self._attributes(splitter),
            result=splitter.split(result, "the function's result"),
        )
        return effects, splitter.arrays

    def restore(self) -> None:
        """Put every lifted tensor and attribute back as it was before the trace."""
        for t, state in zip(self.found.tensors, self.before, strict=True):
            state.restore(t)
        self.entries.restore()
        for obj, original in zip(self.found.objects, self.originals, strict=True):
            namespace = vars(obj)
            for name, value in list(namespace.items()):
                if not is_traced(value):
                    continue
                if name in original:
                    namespace[name] = original[name]
                else:
                    del namespace[name]

    def _where(self, value: Any) -> str:
        return describe(self.found.where.get(id(value), ("an object the function reads",)))

    def _check_history(self, t: Tensor) -> None:
        if t._grad_fn is not None:
            raise RuntimeError(
                f"js.compile: {self._where(t)} (shape {t.shape}, dtype {t.dtype}) was given a "
                f"graph inside the compiled function ({t._grad_fn.name()}), by an in-place op "
                f"under grad mode; a graph cannot outlive the trace. Update it under "
                f"js.no_grad(), or return the result instead of writing it into this tensor"
            )

    def _check_containers(self) -> None:
        """Refuse traced values put into outside lists and dicts (outside tensors may go in:
        they are restored, and hold their own values again after the trace)."""
        lifted = {id(t) for t in self.found.tensors}
        for container, before in zip(self.found.containers, self.contents, strict=True):
            added = [v for key, v in _items(container) if (key, id(v)) not in before]
            if any(id(v) not in lifted and is_traced(v) for v in added):
                if isinstance(container, TracedEntries):
                    raise RuntimeError(self._traced_entry_refusal(container))
                raise RuntimeError(
                    f"js.compile: the function stored a traced value in {self._where(container)} "
                    f"(a {type(container).__name__} it does not own); a compiled function "
                    f"cannot leave values in outside lists or dicts. Return the value, or "
                    f"assign it to an attribute of an object the function reads"
                )

    def _traced_entry_refusal(self, container: TracedEntries) -> str:
        """Why a traced value cannot be left in a `TracedEntries` dict, and what to do."""
        return (
            f"js.compile: the function set a traced value in {self._where(container)}, "
            f"whose entries {', '.join(container.traced)} are inputs of the program, read "
            f"before each call: a value computed inside cannot stay there. Step the "
            f"scheduler, or set the value, outside the compiled function, between calls"
        )

    def _versions(self) -> tuple[tuple[int, int], ...]:
        """Each version counter's bump, once per shared counter (views share their base's)."""
        bumps: dict[int, tuple[int, int]] = {}
        for i, (t, old) in enumerate(zip(self.found.tensors, self.before, strict=True)):
            delta = t.version_counter[0] - old.version
            if delta and id(t.version_counter) not in bumps:
                bumps[id(t.version_counter)] = (i, delta)
        return tuple(bumps.values())

    def _grads(self, splitter: Splitter) -> tuple[tuple[int, Plan], ...]:
        changed = []
        for i, (t, old) in enumerate(zip(self.found.tensors, self.before, strict=True)):
            if t._grad is not old.grad:
                changed.append((i, splitter.split(t._grad, f"{self._where(t)}.grad")))
        return tuple(changed)

    def _attributes(self, splitter: Splitter) -> tuple[tuple[int, str, Plan], ...]:
        changed = []
        for i, (obj, swapped) in enumerate(zip(self.found.objects, self.swapped, strict=True)):
            for name, value in vars(obj).items():
                if value is not swapped.get(name, _ABSENT) and is_traced(value):
                    where = f"{self._where(obj)}.{name}"
                    changed.append((i, name, splitter.split(value, where)))
        return tuple(changed)


def _items(container: list | dict) -> Any:
    return container.items() if isinstance(container, dict) else enumerate(container)


def _contents(container: list | dict) -> set:
    """A container's items by identity, to tell what a trace put in."""
    return {(key, id(value)) for key, value in _items(container)}
