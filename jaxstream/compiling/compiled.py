"""`js.compile`: a function of jaxstream code, traced once per signature into one XLA program.

Note [Compiling a define-by-run step]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
A compiled call walks what `fn` reads (Note [What js.compile lifts]), reusing
the walk of `fn` itself while nothing it read has changed (Note [Reusing a
walk]); the walk's key picks a `_Program`, one `jax.jit` each. Its first call runs `fn` under the
jit trace with tracers swapped into the lifted tensors and attributes
(Note [Effects of a compiled call]): the tape is recorded over tracers, the
engine runs every backward there with all its semantics (exec_info trimming,
hooks and their order, reentrant Functions, create_graph), optimizers step,
and what XLA receives is the whole step. Later calls with the same key run the
compiled program and only apply its effects.

The engine runs the trace on the calling thread (multithreading off): JAX
tracers belong to the thread that traces, so no worker thread may touch them.
A reentrant backward nested deeper than `js.autograd.get_max_reentrant_depth()`
would move to a pool thread and fails there; raise the depth to compile one.

What runs at trace time only: hooks (they see tracers), Python side effects.
A call needing a value on the host (`item()`, `bool(t)`, `numpy()`) raises,
naming the call. The results come back as new leaves without a graph: the graph
lived inside the program; so does a `.grad` that a `create_graph=True` backward
left with one (its values are exact, its graph is gone).

Draws without `key=` are not frozen into the program: the generator state is
one of its inputs (Note [Where a draw takes its key] in randomness/sources.py).
The first call traces before it runs (`jax.jit(...).trace`), to learn how many
draws the program makes; every call then reserves that many draws from the
current source and passes the state they start from, and the program derives
their keys from it. Each call draws anew, and after `js.manual_seed(s)` compiled
call n draws the keys eager call n would have drawn, so the same values, bit for
bit (what is computed from them may differ in rounding, as any compiled op may).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

import jax
import numpy as np

from .. import device_events
from ..autograd.engine import get_max_reentrant_depth
from ..autograd.grad_mode import set_multithreading_enabled
from ..conversions import HostReadWhileTracing
from ..jax_interop.tracing import TracingScope
from ..randomness.sources import Threaded, as_words, current_source, drawing_from
from ..streams import xla_stream
from .discovery import (
    Discovery,
    Walk,
    argument_arrays,
    discover,
    walk_function,
    with_argument_arrays,
)
from .effects import Effects, TraceSession
from .guards import all_hold
from .traced_entries import EntryInputs

_NO_STATE = np.zeros(4, np.uint32)
"""The generator state a first call traces with, before it knows how many draws to reserve."""

_TRACE_ERRORS = (
    jax.errors.ConcretizationTypeError,
    jax.errors.TracerArrayConversionError,
    jax.errors.TracerBoolConversionError,
    jax.errors.TracerIntegerConversionError,
)


class Compiled:
    """`fn` traced once per signature and run as one XLA program (see `compile`)."""

    def __init__(self, fn: Callable) -> None:
        if not callable(fn):
            raise TypeError(f"js.compile needs a callable, got {type(fn).__name__}")
        self.fn = fn
        self.name = getattr(fn, "__qualname__", None) or type(fn).__name__
        self._programs: dict[tuple, _Program] = {}
        self._walk: tuple[Walk, int] | None = None
        self._walk_keys: dict[tuple, int] = {}
        """A small number for each key of `fn`'s walk, so that a call hashes no long key."""
        functools.update_wrapper(self, fn, updated=())

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        walk, walk_key = self._current_walk()
        found = discover(walk, args, kwargs)
        key = (walk_key, tuple(found.key))
        program = self._programs.get(key)
        if program is None:
            program = self._programs.setdefault(key, _Program(self.fn, self.name))
        try:
            result = program(found, args, kwargs)
        except BaseException:
            if program.effects is None:  # the trace failed: nothing was compiled
                self._programs.pop(key, None)
            raise
        if program.effects.grads:
            self._keep_walk(walk, walk_key, [found.tensors[i] for i, _ in program.effects.grads])
        return result

    def _current_walk(self) -> tuple[Walk, int]:
        """The last walk of `fn` while its guards hold, else a new one (Note [Reusing a walk])."""
        cached = self._walk
        if cached is not None and all_hold(cached[0].guards):
            return cached
        walk = walk_function(self.fn)
        cached = self._walk = (walk, self._walk_keys.setdefault(walk.key, len(self._walk_keys)))
        return cached

    def _keep_walk(self, walk: Walk, walk_key: int, regraded: list) -> None:
        """Keep the walk valid through the new `.grad` tensors that effects gave `regraded`."""
        kept = walk.with_new_grads(regraded)
        if kept is not walk and self._walk is not None and self._walk[0] is walk:
            self._walk = None if kept is None else (kept, walk_key)

    def cache_size(self) -> int:
        """How many programs were traced: one per signature and structure seen."""
        return len(self._programs)

    def __repr__(self) -> str:
        return f"<js.compile of {self.name}, {self.cache_size()} program(s)>"


class _Pending(threading.local):
    call: tuple[Discovery, tuple, dict] | None = None


class _Program:
    """One traced signature: its jitted program and the effects plan its trace made."""

    def __init__(self, fn: Callable, name: str) -> None:
        self.fn = fn
        self.name = name
        self.effects: Effects | None = None
        self.draws = 0
        """How many draws without `key=` the trace made: each call reserves as many."""
        self._pending = _Pending()
        self._entries = EntryInputs()
        self._jitted = jax.jit(self._trace)

    def __call__(self, found: Discovery, args: tuple, kwargs: dict) -> Any:
        inputs = [t.array for t in found.tensors]
        for obj, name in found.holders:
            inputs.extend(jax.tree.leaves(getattr(obj, name)))
        if found.entries:
            inputs.append(self._entries(found.entries))
        if found.argument_arrays:
            inputs.extend(argument_arrays(args, kwargs))
        self._pending.call = (found, args, kwargs)
        try:
            if self.effects is None:  # Note [Compiling a define-by-run step]: trace, then draw
                self._jitted.trace(inputs, _NO_STATE)
            state = as_words(current_source().reserve(self.draws)) if self.draws else _NO_STATE
            outputs = self._jitted(inputs, state)
        finally:
            self._pending.call = None
        self._launched(found, inputs, outputs)
        return self.effects.apply(outputs, found)

    def _launched(self, found: Discovery, inputs: list, outputs: list) -> None:
        """The call ran as one program on XLA's stream of its accelerator, if it has one:
        its watchers are told so (Note [The watchers' bus] in device_events.py)."""
        dev = next((t.device for t in found.tensors if t.device.is_accelerator), None)
        if dev is None:
            return
        with dev.kind.guard(dev.index):
            device_events.program_launched(
                xla_stream(dev), self.name, [a for a in inputs if isinstance(a, jax.Array)],
                [a for a in jax.tree.leaves(outputs) if isinstance(a, jax.Array)])

    def _trace(self, inputs: list, rng_state: jax.Array) -> list:
        """Run `fn` over tracers (Note [Compiling a define-by-run step]); runs while tracing.
        Its draws without `key=` take their keys from `rng_state`."""
        found, args, kwargs = self._pending.call
        session = TraceSession(found, inputs)
        try:
            args, kwargs = with_argument_arrays(args, kwargs, session.rest)
            with TracingScope(), set_multithreading_enabled(False), \
                    drawing_from(Threaded(rng_state)) as draws:
                result = self._run(args, kwargs)
            self.effects, outputs = session.finish(result)
            self.draws = draws.used
        finally:
            session.restore()
        return outputs

    def _run(self, args: tuple, kwargs: dict) -> Any:
        try:
            return self.fn(*args, **kwargs)
        except HostReadWhileTracing as exc:
            raise HostReadWhileTracing(f"js.compile '{self.name}': {exc}") from exc
        except jax.errors.UnexpectedTracerError as exc:
            raise RuntimeError(
                f"js.compile '{self.name}': a traced value reached another thread or outlived the "
                f"trace. The engine runs a compiled step's backward on the calling thread, but a "
                f"reentrant backward nested deeper than js.autograd.get_max_reentrant_depth() "
                f"({get_max_reentrant_depth()}) moves to a pool thread, where JAX tracers cannot "
                f"go: raise the limit with js.autograd.set_max_reentrant_depth(), or run such a "
                f"step eagerly. A value kept in a global from an earlier trace fails the same way"
            ) from exc
        except _TRACE_ERRORS as exc:
            raise HostReadWhileTracing(
                f"js.compile '{self.name}': the function needs the concrete value of a traced "
                f"array ({type(exc).__name__}); inside a compiled function values are not known "
                f"until the program runs. Use tensor ops (js.where for a branch), or pass the "
                f"value in as an argument"
            ) from exc


def compile(fn: Callable) -> Compiled:  # noqa: A001
    """`fn`, traced once per signature (shapes, dtypes, devices, requires_grad, module
    structure) and run as one XLA program, its effects on outside tensors applied after
    each call. See Note [Compiling a define-by-run step]."""
    return Compiled(fn)
