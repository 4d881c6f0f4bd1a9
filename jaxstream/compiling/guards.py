"""Cheap checks that what a compiled function reaches is still as its last walk found it.

Note [Reusing a walk]
~~~~~~~~~~~~~~~~~~~~~
The walk of Note [What js.compile lifts] visits every object, container and
tensor that `fn` reaches, on every call: tens of microseconds of Python for a
small model, as much as a small step's whole XLA program. Only the arguments
are new on each call; what `fn` reaches through its closure, globals and `self`
is mostly the same objects holding the same values. So the walk of `fn` (not
of the arguments) records, for every node it reads, a guard: the node and what
the walk read from it, held by identity:
- an object's attributes (names and values), a list's items, a dict's keys and
  values (a `TracedEntries` dict's traced entries by their shape only: their
  numbers are inputs, read on every call);
- a function's code, closure cells, defaults and the globals its code names
  (absent ones too: a global defined later is seen);
- a tensor's signature as keyed (shape, dtype, device, requires_grad, its
  hooks), its `.grad` and view, and that it is still a JAX leaf.
A later call reuses the walk, its key, lifted tensors and objects, while every
guard holds, and walks only its arguments; any failing guard walks everything
again, so a change the walk would see (a tensor newly reachable, a parameter
replaced, a `.grad` set, an attribute reassigned, a list mutated, a hook added)
is seen exactly as before, never served from a stale walk.

Identity is the test because it is exact and cheap: the guards keep every value
they compare alive, so no new object can take an old one's identity, and an
immutable value (a number, a string, a tuple) that is the same object has the
same contents. Two things change on every call without changing the key, and are
checked by what the key reads instead: a tensor's array (the effects rebind it;
its shape, dtype and device are compared), and the arrays an attribute holds
(optax state, rebound by the effects; its tree structure, shapes and dtypes are
compared). A third is a `.grad` that each call's effects set to a new tensor
(`zero_grad()` then `backward()` in the step): after such a call the walk takes
the new grad in place of the old one where its guard holds for the new one (the
same signature, so the same key), and is walked again where it does not
(`Walk.with_new_grads`).
"""

from __future__ import annotations

import types
from collections.abc import Callable
from itertools import repeat
from operator import is_
from typing import Any

import jax

from ..backends import get_backend
from ..tensor import Tensor
from .traced_entries import TracedEntries, entry_key

_JAX = get_backend("jax")
_ABSENT = object()

Guard = tuple[Callable[[Any, Any], bool], Any, Any]
"""(check, node, saved): holds while `check(node, saved)` is true."""


def all_hold(guards: list[Guard]) -> bool:
    """Whether every guard of a walk still holds (Note [Reusing a walk])."""
    for check, node, saved in guards:
        if not check(node, saved):
            return False
    return True


def _same(now: Any, saved: tuple) -> bool:
    """The same values, in order, by identity."""
    return len(now) == len(saved) and all(map(is_, now, saved))


def list_guard(items: list) -> Guard:
    return (_same, items, tuple(items))


def dict_guard(mapping: dict) -> Guard:
    return (_same_dict, mapping, (tuple(mapping), tuple(mapping.values())))


def _same_dict(mapping: dict, saved: tuple) -> bool:
    keys, values = saved
    return _same(mapping, keys) and all(map(is_, mapping.values(), values))


def traced_entries_guard(mapping: TracedEntries) -> Guard:
    """A `TracedEntries` dict: its traced entries by what the key reads of them (their
    numbers are read on every call), its other entries by identity."""
    traced = mapping.traced
    reads = {i: entry_key(v) for i, (k, v) in enumerate(mapping.items()) if k in traced}
    saved = (traced, tuple(mapping), tuple(mapping.values()), reads)
    return (_same_traced_entries, mapping, saved)


def _same_traced_entries(mapping: TracedEntries, saved: tuple) -> bool:
    traced, keys, values, reads = saved
    if mapping.traced is not traced or not _same(mapping, keys):
        return False
    if all(map(is_, mapping.values(), values)):
        return True  # nothing changed: the common case, tested first as it is cheap
    for i, (value, old) in enumerate(zip(mapping.values(), values, strict=True)):
        read = reads.get(i, _ABSENT)
        if read is _ABSENT:
            if value is not old:
                return False
        elif entry_key(value) != read:
            return False
    return True


def holder_key(value: Any) -> tuple | None:
    """The key of an attribute holding JAX arrays (optax state): its structure, shapes and
    dtypes; None where it holds anything else (then the walk goes into it)."""
    if not isinstance(value, jax.Array | tuple | list | dict):
        return None
    leaves, tree = jax.tree.flatten(value, is_leaf=_is_tensor)
    if not leaves or not all(isinstance(a, jax.Array) for a in leaves):
        return None
    return (tree, *((a.shape, a.dtype) for a in leaves))


def _is_tensor(value: Any) -> bool:
    return isinstance(value, Tensor)


def object_guard(obj: Any, holders: dict[int, tuple]) -> Guard:
    """An object's attributes; those at the positions in `holders` by their holder key."""
    namespace = vars(obj)
    return (_same_object, obj, (tuple(namespace), tuple(namespace.values()), holders))


def _same_object(obj: Any, saved: tuple) -> bool:
    keys, values, holders = saved
    namespace = vars(obj)
    if not _same(namespace, keys):
        return False
    if not holders:
        return all(map(is_, namespace.values(), values))
    for i, value in enumerate(namespace.values()):
        held = holders.get(i)
        if held is None:
            if value is not values[i]:
                return False
        elif holder_key(value) != held:
            return False
    return True


def function_guard(fn: types.FunctionType, names: tuple[str, ...]) -> Guard:
    """A function's code, cells, defaults and the globals named in its code."""
    return (_same_function, fn, (fn.__code__, _cells(fn), fn.__defaults__, fn.__kwdefaults__,
                                 names, tuple(_globals(fn, names))))


def _same_function(fn: types.FunctionType, saved: tuple) -> bool:
    code, cells, defaults, kwdefaults, names, values = saved
    return (
        fn.__code__ is code
        and fn.__defaults__ is defaults
        and fn.__kwdefaults__ is kwdefaults
        and _same(_cells(fn), cells)
        and all(map(is_, _globals(fn, names), values))
    )


def cell_contents(cell: types.CellType) -> Any:
    """What a closure cell holds; None for a cell not assigned yet."""
    try:
        return cell.cell_contents
    except ValueError:
        return None


def _cells(fn: types.FunctionType) -> tuple:
    return tuple(map(cell_contents, fn.__closure__ or ()))


def _globals(fn: types.FunctionType, names: tuple[str, ...]) -> map:
    return map(fn.__globals__.get, names, repeat(_ABSENT))


def attribute_guard(node: Any, name: str) -> Guard:
    """One attribute read by the walk (what a wrapper wraps)."""
    return (_same_attribute, node, (name, getattr(node, name)))


def _same_attribute(node: Any, saved: tuple) -> bool:
    name, value = saved
    return getattr(node, name, _ABSENT) is value


def tensor_signature(t: Tensor) -> tuple:
    """What the key reads of a lifted tensor, its hooks by identity kept apart."""
    array = t.array
    return (tuple(array.shape), array.dtype, t.device, t._requires_grad)


def tensor_hooks(t: Tensor) -> tuple:
    """A leaf's hooks, which a trace runs: its tensor hooks, then its post-accumulate ones."""
    tensor = () if t._leaf_hooks is None else tuple(h for _, h in t._leaf_hooks.values())
    post = t._post_accumulate_grad_hooks
    return tensor if post is None else (*tensor, *post.values())


def tensor_guard(t: Tensor) -> Guard:
    return (_same_tensor, t, (tensor_signature(t), tensor_hooks(t), t._grad, t._view))


def _same_tensor(t: Tensor, saved: tuple) -> bool:
    signature, hooks, grad, view = saved
    return (
        t._grad is grad
        and t._view is view
        and t._grad_fn is None
        and t.array_backend is _JAX
        and tensor_signature(t) == signature
        and (
            t._leaf_hooks is None and t._post_accumulate_grad_hooks is None and not hooks
            or _same(tensor_hooks(t), hooks)
        )
    )
