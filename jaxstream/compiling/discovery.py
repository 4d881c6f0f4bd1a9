"""What a compiled function reads: the tensors, arrays and Python structure it reaches.

Note [What js.compile lifts]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~
Before each call, `discover` walks everything the function can reach without
running it: its arguments, its closure cells, the globals its code names, the
`self` of a bound method, the parts of a `functools.partial`, and, through
them, containers and the attributes of plain objects (Modules, optimizers,
user classes). Functions of libraries (jaxstream, JAX, NumPy, optax, ...),
modules and classes are opaque: they are keyed by identity, not walked.

What it finds falls in four kinds:
- outside tensors (a tensor's `.grad` and its view base count too): each becomes
  a traced input, swapped into the tensor for the trace (`effects.py`);
- JAX arrays held by an object's attribute (an optimizer's optax state) or
  passed as arguments: traced inputs too, swapped in the same way;
- the numbers in the traced entries of a `TracedEntries` dict (an optimizer's
  parameter groups: `lr`, `betas`, `weight_decay`, ...): traced inputs too, all
  of a call's in one vector, swapped into the dict for the trace and put back
  after (traced_entries.py). They are keyed by shape only (a number, or a tuple
  of n), so a scheduler stepped every call or an `lr` edited by hand reuses the
  program, and each call reads the values as they are then. An entry there that
  is not a real number is refused, with its place;
- everything else: Python values that are keyed (the hash of the structure),
  a group's other entries included (`nesterov`, `centered`: the transformation
  is built from them, so a change traces again).

Why lift group entries, rather than have the optimizer copy them into its optax
state before each call, outside the trace: either way they must leave the key,
and only the walk knows what is keyed; lifted at the walk, any code that reads
`group["lr"]` inside the trace reads this call's value, and nothing has to run
outside the trace (Note [Hyperparameters under js.compile] in
optim/hyperparams.py says what the optimizer does with them).

The key is the structure in walk order: each tensor's signature (shape, dtype,
device, backend, requires_grad, hooks), each object's type and attribute
names, each Python scalar's value, and where the same object is reached twice.
Identities are not keyed: a new batch tensor of the same signature reuses the
program, and effects go to whichever tensors this call found at that position.
A Python scalar that `fn` changes (a step counter) changes the key, so the
next call traces again: slow, but it does what the eager run does.

The walk runs before the trace, so the key is known before anything runs; a
registry filled while tracing would know the tensors only afterwards. The part
reached from `fn` itself is walked again only when something it read has
changed (Note [Reusing a walk]); the arguments are walked on every call. What it
cannot see: class attributes, objects with `__slots__` or without a `__dict__`,
and tensors reached only through library code. Such tensors enter the program
as constants (their value at trace time); writing one in place inside `fn` is
not supported (its tracer would outlive the trace).

Only tensors of the JAX backend can hold tracers: a NumPy tensor (the `cpu`
or a `sim` device) is refused with the place it was found and the fix
(`.to(backend="jax")`, `model.to("jax")`). Converting it silently would change
its backend inside `fn` and its dtype rules.
"""

from __future__ import annotations

import functools
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import jax
import numpy as np

from ..amp import current_dtype
from ..autograd.anomaly import is_anomaly_enabled
from ..autograd.grad_mode import state as grad_state
from ..autograd.graph_task import is_trimming_enabled
from ..backends import get_backend
from ..precision import get_float32_matmul_precision
from ..tensor import Tensor
from .guards import (
    Guard,
    attribute_guard,
    cell_contents,
    dict_guard,
    function_guard,
    holder_key,
    list_guard,
    object_guard,
    tensor_guard,
    tensor_hooks,
    tensor_signature,
    traced_entries_guard,
)
from .traced_entries import TracedEntries, entry_key, not_a_number

_JAX = get_backend("jax")
_SCALARS = (bool, int, float, complex, str, bytes, type(None), np.dtype, np.generic)
_SCALAR_TYPES = frozenset({bool, int, float, str, type(None)})
"""The common scalars, found by their exact type before the slower isinstance test."""
_CONTAINER_TYPES = frozenset({tuple, list, dict})
"""The plain containers, walked by `_structure` without the tests for other kinds."""
_OPAQUE = (type, types.ModuleType, types.BuiltinFunctionType, types.CodeType, jax.Device)
_LIBRARIES = frozenset(
    {"jaxstream", "jax", "jaxlib", "numpy", "optax", "builtins", "functools", "threading",
     "typing", "collections", "contextlib", "torch", "abc", "weakref", "ml_dtypes"}
)


@dataclass
class Discovery:
    """One walk's findings: the lifted tensors and array holders, and the key."""

    tensors: list[Tensor] = field(default_factory=list)
    holders: list[tuple[Any, str]] = field(default_factory=list)
    """(object, attribute) whose value is a pytree of JAX arrays."""
    objects: list[Any] = field(default_factory=list)
    """Every walked object with a `__dict__`, for the attribute effects of a trace."""
    containers: list[list | dict] = field(default_factory=list)
    entries: list[tuple[TracedEntries, Any]] = field(default_factory=list)
    """(dict, name) of each traced entry of a `TracedEntries` dict, in walk order."""
    constants: list[Any] = field(default_factory=list)
    where: dict[int, tuple] = field(default_factory=dict)
    """Where each tensor, object and container was found, by identity, for errors."""
    key: list = field(default_factory=list)
    argument_arrays: int = 0
    """How many raw arrays the arguments hold (`argument_arrays`)."""

    def extended(self, key: list | None = None) -> Discovery:
        """A copy whose lists a walk can extend, with `key` (else an empty one)."""
        return Discovery(list(self.tensors), list(self.holders), list(self.objects),
                         list(self.containers), list(self.entries), list(self.constants),
                         dict(self.where), [] if key is None else key)


@dataclass
class Walk:
    """The walk of what `fn` reaches, reusable while its guards hold (Note [Reusing a walk])."""

    found: Discovery
    key: tuple
    guards: list[Guard]
    seen: dict[int, int]
    """The index of every value reached, by identity, for the key's "same" entries."""
    reached: list[Any]
    """Every value reached, kept alive so that no new object takes an identity in `seen`."""
    tensor_guards: dict[int, int]
    """The position of each lifted tensor's guard, by identity."""
    shared: set[int]
    """The values reached more than once, by identity."""

    def with_new_grads(self, tensors: list[Tensor]) -> Walk | None:
        """This walk with the `.grad` that a call's effects gave `tensors` in place of the
        ones it found, where that leaves the key as it is: a new grad like the old one
        (Note [Reusing a walk]). None where the walk must be done again; `self` where
        nothing changed."""
        changed = [t for t in tensors
                   if id(t) in self.tensor_guards and t._grad is not self._guard_of(t)[2]]
        if not changed:
            return self
        walk = Walk(self.found.extended(self.found.key), self.key, list(self.guards),
                    dict(self.seen), list(self.reached), dict(self.tensor_guards), self.shared)
        for t in changed:
            if not walk._replace_grad(t):
                return None
        return walk

    def _guard_of(self, t: Tensor) -> tuple:
        return self.guards[self.tensor_guards[id(t)]][2]

    def _replace_grad(self, t: Tensor) -> bool:
        old, new = self._guard_of(t)[2], t._grad
        if old is None or id(old) in self.shared or not isinstance(new, Tensor) \
                or id(new) in self.seen:
            return False  # the old grad is read elsewhere too, or the new one already is
        check, _, saved = self.guards[self.tensor_guards[id(old)]]
        if not check(new, saved):
            return False
        position = self.seen.pop(id(old))
        self.seen[id(new)] = position
        self.reached[position] = new
        tensors = self.found.tensors
        tensors[next(i for i, lifted in enumerate(tensors) if lifted is old)] = new
        self.found.where[id(new)] = self.found.where.pop(id(old))
        # Only the grads change: what else the key read of `t` is still checked as it was.
        signature, hooks, _, view = self._guard_of(t)
        self.guards[self.tensor_guards[id(t)]] = (check, t, (signature, hooks, new, view))
        self.tensor_guards[id(new)] = self.tensor_guards.pop(id(old))
        self.guards[self.tensor_guards[id(new)]] = (check, new, saved)
        return True


def walk_function(fn: Callable) -> Walk:
    """Walk what `fn` reaches through its closure, globals and `self`, recording guards."""
    walker = _Walker(Discovery(), {}, [], guards=[])
    walker.walk(fn, ("the function",))
    found = walker.found
    return Walk(found, tuple(found.key), walker.guards, walker.seen, walker.reached,
                walker.tensor_guards, walker.shared)


def discover(walk: Walk, args: tuple, kwargs: dict) -> Discovery:
    """This call's findings: `walk`'s, then its arguments' (Note [What js.compile lifts]);
    the key of the result is the arguments' part and the modes the trace runs under."""
    walker = _Walker(walk.found.extended(), dict(walk.seen), [], guards=None)
    walker.in_arguments = True
    walker.walk(args, ("argument",))
    walker.walk(kwargs, ("keyword argument",))
    found = walker.found
    found.key.append((grad_state.grad_enabled, is_trimming_enabled(), is_anomaly_enabled(),
                      current_dtype(), get_float32_matmul_precision()))
    return found


def is_array(value: Any) -> bool:
    """A raw array (JAX or NumPy): traced where it sits in the arguments' containers."""
    return isinstance(value, jax.Array | np.ndarray)


def _is_argument_leaf(value: Any) -> bool:
    return not isinstance(value, list | tuple | dict)


def argument_arrays(args: tuple, kwargs: dict) -> list:
    """The arrays in the arguments' lists, tuples and dicts, the traced ones."""
    leaves = jax.tree.leaves((args, kwargs), is_leaf=_is_argument_leaf)
    return [leaf for leaf in leaves if is_array(leaf)]


def with_argument_arrays(args: tuple, kwargs: dict, arrays: list) -> tuple[tuple, dict]:
    """`args` and `kwargs` with `argument_arrays` replaced by `arrays`, in order."""
    replacement = iter(arrays)
    leaves, tree = jax.tree.flatten((args, kwargs), is_leaf=_is_argument_leaf)
    leaves = [next(replacement) if is_array(leaf) else leaf for leaf in leaves]
    return jax.tree.unflatten(tree, leaves)


def _library_function(value: Any) -> bool:
    """A function of a library: keyed by identity (its globals are the library's own).
    Instances of library classes (a Module, an optimizer) are walked like any object."""
    if not isinstance(value, types.FunctionType):
        return False
    module = getattr(value, "__module__", None) or "builtins"
    return module.partition(".")[0] in _LIBRARIES


class _Walker:
    """Walks values; records guards where `guards` is a list (the walk of `fn`)."""

    def __init__(self, found: Discovery, seen: dict[int, int], reached: list,
                 guards: list[Guard] | None) -> None:
        self.found = found
        self.seen = seen
        self.reached = reached
        self.guards = guards
        self.tensor_guards: dict[int, int] = {}
        self.shared: set[int] = set()
        self.in_arguments = False

    def walk(self, value: Any, where: tuple) -> None:
        key = self.found.key
        kind = type(value)  # exact types first: this runs for every argument of every call
        if kind in _SCALAR_TYPES or (
            kind is not Tensor and kind not in _CONTAINER_TYPES and isinstance(value, _SCALARS)
        ):
            # Typed: 1, 1.0 and True are equal keys, but not the same trace.
            key.append((kind, value))
            return
        if id(value) in self.seen:
            key.append(("same", self.seen[id(value)]))
            self.shared.add(id(value))
            return
        self.seen[id(value)] = len(self.seen)
        self.reached.append(value)
        self.found.where[id(value)] = where
        if kind is Tensor or isinstance(value, Tensor):
            self._tensor(value, where)
        elif kind in _CONTAINER_TYPES:
            self._structure(value, where)
        elif is_array(value):
            self._array(value, where)
        elif isinstance(value, _OPAQUE) or _library_function(value):
            key.append(("opaque", id(value)))
        else:
            self._structure(value, where)

    def _array(self, array: Any, where: tuple) -> None:
        """An array in the arguments' containers is a traced input (`argument_arrays`); any
        other is a constant of the program, keyed by identity (and kept alive, so that the
        identity stays its own)."""
        if self.in_arguments:
            self.found.argument_arrays += 1
            self.found.key.append(("array", array.shape, array.dtype))
        else:
            self.found.constants.append(array)
            self.found.key.append(("constant", id(array)))

    def _structure(self, value: Any, where: tuple) -> None:
        key = self.found.key
        key.append(type(value))
        if not isinstance(value, list | tuple | dict):
            self.in_arguments, outer = False, self.in_arguments
            try:
                self._callable_or_object(value, where)
            finally:
                self.in_arguments = outer
        elif isinstance(value, list | tuple):
            key.append(len(value))
            if isinstance(value, list):
                self.found.containers.append(value)
                self._guard(list_guard, value)
            for i, item in enumerate(value):
                self.walk(item, (*where, i))
        elif isinstance(value, dict):
            self._dict(value, where)

    def _dict(self, mapping: dict, where: tuple) -> None:
        """A dict's entries; those named traced by a `TracedEntries` dict are inputs."""
        key = self.found.key
        self.found.containers.append(mapping)
        traced = mapping.traced if isinstance(mapping, TracedEntries) else ()
        if traced:
            key.append(traced)
            self._guard(traced_entries_guard, mapping)
        else:
            self._guard(dict_guard, mapping)
        for name, item in mapping.items():
            key.append(name if isinstance(name, _SCALARS) else id(name))
            if name in traced:
                self._entry(mapping, name, item, (*where, name))
            else:
                self.walk(item, (*where, name))

    def _entry(self, mapping: TracedEntries, name: Any, value: Any, where: tuple) -> None:
        """A traced entry: an input, keyed by its shape (Note [What js.compile lifts])."""
        read = entry_key(value)
        if read is None:
            raise TypeError(f"js.compile: {not_a_number(value, describe(where))}")
        self.found.entries.append((mapping, name))
        self.found.key.append(("entry", read))

    def _callable_or_object(self, value: Any, where: tuple) -> None:
        key = self.found.key
        if isinstance(value, types.FunctionType):
            self._function(value, where)
        elif isinstance(value, types.MethodType):
            self.walk(value.__self__, where)
            self.walk(value.__func__, where)
        elif isinstance(value, functools.partial):
            self.walk((value.func, value.args, value.keywords), where)
        elif hasattr(value, "__wrapped__"):
            # A wrapper object (another js.compile, a jax.jit): what it wraps is what it reads.
            self._guard(attribute_guard, value, "__wrapped__")
            self.walk(value.__wrapped__, where)
        elif hasattr(value, "__dict__"):
            self._object(value, where)
        else:
            key.append(id(value))

    def _function(self, fn: types.FunctionType, where: tuple) -> None:
        self.found.key.append(id(fn.__code__))
        names = _global_names(fn.__code__)
        self._guard(function_guard, fn, names)
        for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or (), strict=True):
            self.walk(cell_contents(cell), (f"{describe(where)}'s variable '{name}'",))
        self.walk(fn.__defaults__, where)
        self.walk(fn.__kwdefaults__, where)
        namespace = fn.__globals__
        for name in names:
            if name in namespace:
                self.walk(namespace[name], (f"the global '{name}'",))

    def _object(self, obj: Any, where: tuple) -> None:
        self.found.objects.append(obj)
        key = self.found.key
        holders = {}
        for i, (name, value) in enumerate(vars(obj).items()):
            key.append(name)
            held = holder_key(value)
            if held is not None:
                self.found.holders.append((obj, name))
                key.append(held)
                holders[i] = held
            else:
                self.walk(value, (*where, name))
        self._guard(object_guard, obj, holders)

    def _guard(self, make: Callable[..., Guard], *args: Any) -> None:
        """Record `make(*args)`, in the walk of `fn` only: an argument walk keeps no guards,
        so it builds none (each copies what it guards)."""
        if self.guards is not None:
            self.guards.append(make(*args))

    def _tensor(self, t: Tensor, where: tuple) -> None:
        if t.array_backend is not _JAX:
            raise TypeError(
                f"js.compile: {describe(where)} is a {t.backend} tensor (shape {t.shape}, "
                f"dtype {t.dtype}, device {t.device}); a compiled function runs as one XLA "
                f"program, so the tensors it reads must be JAX tensors: move it first with "
                f".to(backend='jax') (a Module with model.to('jax'))"
            )
        if t._grad_fn is not None:
            raise TypeError(
                f"js.compile: {describe(where)} (shape {t.shape}, dtype {t.dtype}) was made by "
                f"{t._grad_fn.name()} outside the compiled function; its graph cannot be "
                f"traced into the program. Build the graph inside the function, or pass "
                f"t.detach() if only its value is needed"
            )
        index = len(self.found.tensors)
        self.found.tensors.append(t)
        if self.guards is not None:
            self.tensor_guards[id(t)] = len(self.guards)
            self.guards.append(tensor_guard(t))
        hooks = tuple(map(id, tensor_hooks(t)))
        self.found.key.append(("tensor", index, *tensor_signature(t), hooks))
        self.walk(t._grad, (*where, "grad"))
        info = t._view
        self.walk(None if info is None else info.base, (*where, "base"))


@functools.lru_cache(maxsize=4096)
def _global_names(code: types.CodeType) -> tuple[str, ...]:
    """The globals a code object (and the functions and lambdas defined in it) may read."""
    names = list(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names.extend(_global_names(const))
    return tuple(dict.fromkeys(names))


def describe(where: tuple) -> str:
    """A place found by the walk, in words: `argument[0]`, `the global 'model'.fc.weight`."""
    head, *rest = where
    text = str(head)
    for part in rest:
        text += f"[{part}]" if isinstance(part, int) else f".{part}"
    return text
