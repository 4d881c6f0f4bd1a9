"""JAX functions as jaxstream ops (`jax_function`), jaxstream code as JAX functions (`to_jax`).

Note [How a jax_function node runs]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
The forward runs `jax.vjp` of the function under `jax.jit`, compiled once per
input signature, per pattern of which inputs need a gradient and per autocast
state. Inputs that need no gradient are closed over, so the VJP has no
cotangent for them. The residuals of the VJP returned by the forward (the
saved activations) become saved tensors of the node, so the engine frees them
after a backward that does not retain the graph; the backward rebuilds the VJP
and runs it under a second `jax.jit`, compiled once per pattern of which
gradients the engine asks for (`ctx.needs_input_grad`), and XLA drops the
cotangents nobody asked for.

Under `create_graph=True` the backward is itself a `jax_function`: it recomputes
`jax.vjp` from the saved inputs, so its node is differentiable in turn and
gradients of any order flow through.

Both programs are traced when they are first needed, but the autocast state
the backward is traced under is fixed at forward time by
`js.config.backward_pass_autocast` (see `jaxstream/config.py`).

Note [Multi-device and multi-host]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
A `jax_function` may be a `jax.jit` with shardings over a `jax.sharding.Mesh`
(or use `with_sharding_constraint` inside); the engine schedules it as one
node. Gradients are constrained to the sharding of their input. Several hosts
run the same program under JAX's own runtime: each process calls
`jax.distributed.initialize(coordinator_address, num_processes, process_id)`
before creating arrays, builds the `Mesh` over `jax.devices()` (all hosts'
devices) and feeds global arrays (`jax.make_array_from_process_local_data`);
jaxstream adds no communication of its own.

Note [What to_jax cannot trace]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
Under `jax.jit`, `jax.grad` and `jax.vmap` the tensors a `to_jax` function sees
hold JAX tracers. Anything that needs a concrete value fails with a TypeError
naming the function: `.item()`, `.numpy()`, `bool(t)` and Python control flow
on tensor values, data-dependent shapes; so do NumPy or CuPy tensors created
inside (they cannot hold tracers). Tensors made during tracing must not outlive
it: a `jax_function` that receives one outside `to_jax` raises.
"""

from __future__ import annotations

import functools
import threading
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import jax
import jax.extend.core as jex
import jax.numpy as jnp
import numpy as np

from . import amp, config

# XLA's CPU client adopts a host buffer without copying only at this alignment.
_XLA_CPU_ALIGNMENT = 64

_JAX_TRACE_ERRORS = (
    jax.errors.ConcretizationTypeError,
    jax.errors.TracerArrayConversionError,
    jax.errors.TracerBoolConversionError,
    jax.errors.TracerIntegerConversionError,
)


# --------------------------------------------------------------------- autocast
# Note [Autocast inside a jax_function]
# A jaxpr interpreter re-binds every primitive of the function; for the
# matmul-like ones (`amp.CAST_PRIMITIVES`) it casts floating operands to the
# autocast dtype, computes in it, and casts the result back to the dtype the
# jaxpr declares, so the rest of the program keeps its types. It descends into
# jit, scan, while, cond, remat and the primal of custom_jvp/custom_vjp
# functions; the differentiation rules of custom_jvp/custom_vjp functions and
# shard_map bodies run as written.
def autocast_function(fn: Callable, dtype: np.dtype) -> Callable:
    """`fn` with the operands of its matmuls and convolutions cast to `dtype`."""

    @functools.wraps(fn)
    def cast_fn(*args: Any) -> Any:
        flat_args, in_tree = jax.tree.flatten(args)

        def flat_fn(*flat: Any) -> Any:
            return fn(*jax.tree.unflatten(in_tree, flat))

        closed, out_shape = jax.make_jaxpr(flat_fn, return_shape=True)(*flat_args)
        outs = _eval_autocast(closed.jaxpr, closed.consts, flat_args, dtype)
        return jax.tree.unflatten(jax.tree.structure(out_shape), outs)

    return cast_fn


def _eval_autocast(jaxpr: jex.Jaxpr, consts: Sequence, args: Sequence, dtype: np.dtype) -> list:
    env: dict = {}

    def read(atom: Any) -> Any:
        return atom.val if isinstance(atom, jex.Literal) else env[atom]

    env.update(zip(jaxpr.constvars, consts, strict=True))
    env.update(zip(jaxpr.invars, args, strict=True))
    for eqn in jaxpr.eqns:
        invals = [read(v) for v in eqn.invars]
        with eqn.ctx.manager:
            if eqn.primitive.name in amp.CAST_PRIMITIVES:
                outs = [_cast_matmul(eqn, invals, dtype)]
            else:
                params = {k: _autocast_param(v, dtype) for k, v in eqn.params.items()}
                outs = eqn.primitive.bind(*invals, **eqn.primitive.get_bind_params(params))
                if not eqn.primitive.multiple_results:
                    outs = [outs]
        env.update(zip(eqn.outvars, outs, strict=True))
    return [read(v) for v in jaxpr.outvars]


def _cast_matmul(eqn: jex.JaxprEqn, invals: list, dtype: np.dtype) -> Any:
    declared = eqn.outvars[0].aval.dtype
    if not all(jnp.issubdtype(jnp.result_type(x), jnp.floating) for x in invals):
        return eqn.primitive.bind(*invals, **eqn.params)
    cast = [jax.lax.convert_element_type(x, dtype) for x in invals]
    params = dict(eqn.params)
    if "preferred_element_type" in params:
        params["preferred_element_type"] = dtype
    out = eqn.primitive.bind(*cast, **params)
    return jax.lax.convert_element_type(out, declared)


def _autocast_param(value: Any, dtype: np.dtype) -> Any:
    if isinstance(value, jex.ClosedJaxpr):
        return _autocast_closed(value, dtype)
    if isinstance(value, jex.Jaxpr):
        return _autocast_open(value, dtype)
    if isinstance(value, tuple) and value and all(isinstance(v, jex.ClosedJaxpr) for v in value):
        return tuple(_autocast_closed(v, dtype) for v in value)
    return value


def _casts_something(jaxpr: jex.Jaxpr) -> bool:
    for eqn in jaxpr.eqns:
        if eqn.primitive.name in amp.CAST_PRIMITIVES:
            return True
        for value in eqn.params.values():
            for sub in value if isinstance(value, tuple) else (value,):
                if isinstance(sub, jex.ClosedJaxpr) and _casts_something(sub.jaxpr):
                    return True
                if isinstance(sub, jex.Jaxpr) and _casts_something(sub):
                    return True
    return False


def _autocast_closed(closed: jex.ClosedJaxpr, dtype: np.dtype) -> jex.ClosedJaxpr:
    if not _casts_something(closed.jaxpr):
        return closed
    return jax.make_jaxpr(lambda *a: _eval_autocast(closed.jaxpr, closed.consts, a, dtype))(
        *_abstract(closed.in_avals)
    )


def _autocast_open(jaxpr: jex.Jaxpr, dtype: np.dtype) -> jex.Jaxpr:
    if jaxpr.constvars or not _casts_something(jaxpr):
        return jaxpr
    closed = jax.make_jaxpr(lambda *a: _eval_autocast(jaxpr, (), a, dtype))(
        *_abstract(v.aval for v in jaxpr.invars)
    )
    return jaxpr if closed.consts else closed.jaxpr


def _abstract(avals: Any) -> list:
    return [jax.ShapeDtypeStruct(a.shape, a.dtype, weak_type=a.weak_type) for a in avals]


# ------------------------------------------------------------------ array exchange
class _HostViews:
    """Remembers which JAX array a read-only NumPy output views, to pass it back copy-free.

    NumPy cannot export a read-only array over the DLPack version JAX reads, so
    without this an output fed into the next `jax_function` would be copied.
    """

    def __init__(self) -> None:
        self._sources: dict[int, tuple[weakref.ref, jax.Array]] = {}
        self._lock = threading.Lock()

    def remember(self, view: np.ndarray, source: jax.Array) -> None:
        key = id(view)
        with self._lock:
            self._sources[key] = (weakref.ref(view, lambda _: self._forget(key)), source)

    def _forget(self, key: int) -> None:
        with self._lock:
            self._sources.pop(key, None)

    def lookup(self, view: np.ndarray) -> jax.Array | None:
        entry = self._sources.get(id(view))
        if entry is None or entry[0]() is not view:
            return None
        return entry[1]


_host_views = _HostViews()


def _to_jax(value: Any) -> Any:
    """A JAX array for a tensor's array or a constant, zero-copy where the memory allows.

    NumPy arrays are adopted through DLPack when C-contiguous, writeable and
    aligned for XLA; others (strided views, unaligned or read-only buffers) are
    copied into a contiguous JAX array first. Python scalars stay scalars (JAX types them weakly).
    """
    if isinstance(value, jax.Array | bool | int | float | complex):
        return value
    if isinstance(value, np.ndarray | np.generic):
        return _numpy_to_jax(np.asarray(value))
    if hasattr(value, "__dlpack__"):
        if not getattr(getattr(value, "flags", None), "c_contiguous", True):
            value = value.copy()
        return jax.dlpack.from_dlpack(value)
    return jnp.asarray(value)


def _numpy_to_jax(array: np.ndarray) -> jax.Array:
    source = _host_views.lookup(array)
    if source is not None:
        return source
    adoptable = (
        array.flags.c_contiguous
        and array.flags.writeable
        and array.ctypes.data % _XLA_CPU_ALIGNMENT == 0
        and jax.dlpack.is_supported_dtype(array.dtype)
    )
    if adoptable:
        return jax.dlpack.from_dlpack(array)
    # Committed to the CPU like an adopted buffer, so that both kinds of input hit
    # the same compiled program (JAX keys its caches on committedness).
    return jax.device_put(array, jax.devices("cpu")[0])


def _from_jax(array: jax.Array, backend: str) -> Any:
    """`array` as an array of `backend`, sharing its memory (read-only for NumPy)."""
    if backend == "jax":
        return array
    if backend == "numpy":
        view = np.from_dlpack(array)
        _host_views.remember(view, array)
        return view
    if backend == "cupy":
        import cupy

        return cupy.from_dlpack(array)
    raise ValueError(f"jax_function: cannot return arrays to the {backend!r} backend")


def _tensor_class() -> type:
    from .tensor import Tensor

    return Tensor


def _wrap(array: jax.Array, backend: str) -> Any:
    from .tensor import tensor

    return tensor(_from_jax(array, backend))


def _is_tracer(value: Any) -> bool:
    return isinstance(value, jax.core.Tracer)


class _TracingState(threading.local):
    depth = 0


_tracing = _TracingState()


# ------------------------------------------------------------------ call signatures
@dataclass(frozen=True)
class _Signature:
    """The static part of one call, which keys the compiled forward.

    `kinds[i]` says whether leaf `i` is differentiated ("diff") or closed over
    ("const"); `statics` are the static arguments by position.
    """

    in_tree: Any
    statics: tuple[tuple[int, Any], ...]
    kinds: tuple[str, ...]
    autocast: np.dtype | None

    def call(self, fn: Callable, diff: Sequence, consts: Sequence) -> Any:
        diff_it, const_it = iter(diff), iter(consts)
        leaves = [next(diff_it) if k == "diff" else next(const_it) for k in self.kinds]
        args, kwargs = jax.tree.unflatten(self.in_tree, leaves)
        args = list(args)
        for position, value in self.statics:
            args[position] = value
        return fn(*args, **kwargs)


@dataclass(frozen=True)
class _Outputs:
    """The outputs' tree and each leaf's shape and dtype, which key the compiled backward."""

    tree: Any
    avals: tuple[tuple[tuple[int, ...], np.dtype], ...]
    differentiable: tuple[bool, ...]

    @classmethod
    def of(cls, leaves: Sequence, tree: Any) -> _Outputs:
        avals = tuple((tuple(a.shape), np.dtype(a.dtype)) for a in leaves)
        return cls(tree, avals, tuple(jnp.issubdtype(d, jnp.inexact) for _, d in avals))

    def cotangent(self, cts: Sequence) -> Any:
        """The VJP's cotangent: `cts` for the float outputs, float0 zeros for the others."""
        it = iter(cts)
        leaves = [
            jnp.asarray(next(it), dtype) if diff else np.zeros(shape, jax.dtypes.float0)
            for (shape, dtype), diff in zip(self.avals, self.differentiable, strict=True)
        ]
        return jax.tree.unflatten(self.tree, leaves)


@dataclass(frozen=True)
class _BackwardKey:
    """The static part of one backward: which cotangents to return, under which autocast."""

    outputs: _Outputs
    wanted: tuple[bool, ...]
    shardings: tuple[Any, ...]
    autocast: np.dtype | None


def _run_vjp(key: _BackwardKey, vjp_fn: Callable, cts: Sequence) -> list:
    grads = vjp_fn(key.outputs.cotangent(cts))
    return [
        g if sharding is None else jax.lax.with_sharding_constraint(g, sharding)
        for g, sharding, wanted in zip(grads, key.shardings, key.wanted, strict=True)
        if wanted
    ]


def _backward_impl(key: _BackwardKey, vjp_fn: Callable, cts: Sequence) -> list:
    return _under_autocast(functools.partial(_run_vjp, key), key.autocast)(vjp_fn, cts)


def _sharding_of(array: Any) -> Any:
    """The sharding a gradient must keep: only for arrays spread over several devices."""
    sharding = getattr(array, "sharding", None)
    if sharding is None or _is_tracer(array) or len(sharding.device_set) < 2:
        return None
    return sharding


def _under_autocast(fn: Callable, dtype: np.dtype | None) -> Callable:
    return fn if dtype is None else autocast_function(fn, dtype)


# ------------------------------------------------------------------ jax_function
class JaxFunction:
    """A JAX function called on jaxstream tensors; see `jax_function`."""

    def __init__(
        self,
        fn: Callable,
        *,
        jit: bool = True,
        static_argnums: int | Sequence[int] = (),
        name: str | None = None,
    ) -> None:
        if not callable(fn):
            raise TypeError(f"jax_function: expected a callable, got {type(fn).__name__}")
        self.fn = fn
        self.jit = bool(jit)
        self.name = name or getattr(fn, "__qualname__", None) or repr(fn)
        if isinstance(static_argnums, int):
            static_argnums = (static_argnums,)
        self.static_argnums = tuple(sorted({int(i) for i in static_argnums}))
        self._primals: dict[_Signature, Callable] = {}
        self._forwards: dict[_Signature, Callable] = {}
        self._vjp_functions: dict[tuple, JaxFunction] = {}
        # A partial of its own gives this function a compilation cache of its own.
        backward = functools.partial(_backward_impl)
        self._backward = jax.jit(backward, static_argnums=0) if self.jit else backward

    def __repr__(self) -> str:
        return f"jax_function({self.name})"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        call = _Call.prepare(self, args, kwargs)
        if not call.diff_positions:
            out = self.primal_program(call.signature)(call.consts)
            return jax.tree.map(lambda a: _wrap(a, call.backend), out)
        flat = _node_class().apply(call, *call.tensors)
        call.tensors = ()
        return jax.tree.unflatten(call.outputs.tree, list(flat))

    def primal_program(self, signature: _Signature) -> Callable:
        """`consts -> outputs` when nothing needs a gradient, compiled once per signature."""
        program = self._primals.get(signature)
        if program is None:
            primal = self._primal(signature)
            run = functools.partial(primal, ())
            program = self._primals[signature] = jax.jit(run) if self.jit else run
        return program

    def forward_program(self, signature: _Signature) -> Callable:
        """`(diff, consts) -> (outputs, vjp)`, compiled once per signature."""
        program = self._forwards.get(signature)
        if program is None:
            primal = self._primal(signature)

            def forward(diff: Sequence, consts: Sequence) -> tuple:
                return jax.vjp(lambda *d: primal(d, consts), *diff)

            program = self._forwards[signature] = jax.jit(forward) if self.jit else forward
        return program

    def backward_program(self) -> Callable:
        """`(key, vjp, cotangents) -> wanted gradients`, compiled once per key."""
        return self._backward

    def _primal(self, signature: _Signature) -> Callable:
        def primal(diff: Sequence, consts: Sequence) -> Any:
            out = signature.call(self.fn, diff, consts)
            _check_outputs(self.name, out)
            return out

        return _under_autocast(primal, signature.autocast)

    def vjp_function(self, signature: _Signature, key: _BackwardKey) -> JaxFunction:
        """A node's backward as a `jax_function`, for `create_graph=True`.

        It recomputes the VJP from the inputs, so that its own node can
        differentiate the gradients with respect to them.
        """
        found = self._vjp_functions.get((signature, key))
        if found is None:
            primal = self._primal(signature)

            def vjp(diff: Sequence, consts: Sequence, cts: Sequence) -> list:
                _, vjp_fn = jax.vjp(lambda *d: primal(d, consts), *diff)
                return _run_vjp(key, vjp_fn, cts)

            found = JaxFunction(vjp, jit=self.jit, name=f"vjp({self.name})")
            self._vjp_functions[signature, key] = found
        return found


def jax_function(
    fn: Callable,
    *,
    jit: bool = True,
    static_argnums: int | Sequence[int] = (),
    name: str | None = None,
) -> JaxFunction:
    """Make a JAX function of arrays and pytrees a differentiable jaxstream op.

    Tensor leaves of the arguments that require grad are differentiated; other
    tensors, arrays and scalars are closed over. Tensors of the NumPy and CuPy
    backends enter JAX through DLPack, and outputs come back on the caller's
    backend (NumPy outputs are read-only views of JAX's buffers).
    `static_argnums` are hashed into the compilation cache. See Note [How a
    jax_function node runs] and, for the autocast it honours, Note [Autocast
    inside a jax_function].
    """
    return JaxFunction(fn, jit=jit, static_argnums=static_argnums, name=name)


def _check_outputs(name: str, out: Any) -> None:
    for path, leaf in jax.tree_util.tree_flatten_with_path(out)[0]:
        if not isinstance(leaf, jax.Array):
            raise TypeError(
                f"jax_function '{name}': output{jax.tree_util.keystr(path)} is a "
                f"{type(leaf).__name__}, not an array; a jax_function returns arrays or "
                f"pytrees of arrays. Wrap numbers with jnp.asarray and return other values "
                f"outside the function."
            )


class _Call:
    """One call of a `JaxFunction`: its tensors, closed-over constants and signature.

    The node keeps it (as `ctx.jax_call`) for the backward; the VJP's residuals
    are saved tensors of the node, so the engine frees them after a backward
    that does not retain the graph, as it does any saved activation.
    """

    function: JaxFunction
    backend: str
    tensors: tuple
    n_tensors: int
    diff_positions: tuple[int, ...]
    consts: list
    signature: _Signature
    outputs: _Outputs
    shardings: tuple
    backward_autocast: np.dtype | None
    vjp_tree: Any

    @classmethod
    def prepare(cls, function: JaxFunction, args: tuple, kwargs: dict) -> _Call:
        from .autograd.grad_mode import state as grad_state

        Tensor = _tensor_class()
        statics = _static_arguments(function, args)
        static_positions = {i for i, _ in statics}
        tree = (tuple(None if i in static_positions else a for i, a in enumerate(args)), kwargs)
        leaves, in_tree = jax.tree.flatten(tree, is_leaf=lambda x: isinstance(x, Tensor))
        grad_on = grad_state.grad_enabled
        kinds, consts, tensors, diff_positions, backends = [], [], [], [], set()
        for index, leaf in enumerate(leaves):
            if isinstance(leaf, Tensor):
                _check_tensor(function.name, leaf, tree, index)
                backends.add(leaf.backend)
                if grad_on and leaf.requires_grad:
                    diff_positions.append(len(tensors))
                    kinds.append("diff")
                else:
                    kinds.append("const")
                    consts.append(_to_jax(leaf.data))
                tensors.append(leaf)
            else:
                _check_constant(function.name, leaf, tree, index)
                kinds.append("const")
                consts.append(_to_jax(leaf))
        if len(backends) > 1:
            raise ValueError(
                f"jax_function '{function.name}': the tensor arguments belong to several "
                f"backends ({', '.join(sorted(backends))}); convert them to one first, e.g. "
                f"t.to(backend='jax')"
            )
        call = cls()
        call.function = function
        call.backend = backends.pop() if backends else "jax"
        call.tensors = tuple(tensors)
        call.n_tensors = len(tensors)
        call.diff_positions = tuple(diff_positions)
        call.consts = consts
        call.signature = _Signature(in_tree, statics, tuple(kinds), amp.current_dtype())
        return call

    def forward(self, ctx: Any, tensors: Sequence) -> tuple:
        from .tensor import tensor

        diff = [_to_jax(tensors[i].data) for i in self.diff_positions]
        out, vjp_fn = self.function.forward_program(self.signature)(diff, self.consts)
        leaves, tree = jax.tree.flatten(out)
        residuals, self.vjp_tree = jax.tree.flatten(vjp_fn)
        self.outputs = _Outputs.of(leaves, tree)
        self.shardings = tuple(_sharding_of(a) for a in diff)
        forward_state = amp.AutocastState(self.signature.autocast)
        self.backward_autocast = config.backward_autocast_state(forward_state).dtype
        ctx.jax_call = self
        ctx.save_for_backward(
            *(tensors[i] for i in self.diff_positions), *(tensor(r) for r in residuals)
        )
        wrapped = tuple(_wrap(a, self.backend) for a in leaves)
        ctx.mark_non_differentiable(
            *(t for t, d in zip(wrapped, self.outputs.differentiable, strict=True) if not d)
        )
        return wrapped

    def backward_key(self, needs_input_grad: Sequence[bool]) -> _BackwardKey:
        """What the backward computes when the engine asks for `needs_input_grad`."""
        wanted = tuple(bool(needs_input_grad[i]) for i in self.diff_positions)
        return _BackwardKey(self.outputs, wanted, self.shardings, self.backward_autocast)

    def stored_vjp(self, ctx: Any) -> Callable:
        """The forward's VJP, rebuilt from the residuals saved on the node."""
        saved = ctx.saved_tensors
        residuals = [t.data for t in saved[len(self.diff_positions) :]]
        return jax.tree.unflatten(self.vjp_tree, residuals)

    def backward(self, ctx: Any, grads: Sequence) -> tuple:
        from .autograd.grad_mode import state as grad_state

        key = self.backward_key(ctx.needs_input_grad[1:])
        result: list = [None] * self.n_tensors
        if not any(key.wanted):
            return tuple(result)
        cts = [g for g, d in zip(grads, self.outputs.differentiable, strict=True) if d]
        if grad_state.grad_enabled:
            computed = self._differentiable_backward(ctx, key, cts)
        else:
            program = self.function.backward_program()
            arrays = program(key, self.stored_vjp(ctx), [_to_jax(g.data) for g in cts])
            computed = [_wrap(a, self.backend) for a in arrays]
        wanted = [i for i, w in zip(self.diff_positions, key.wanted, strict=True) if w]
        for position, grad in zip(wanted, computed, strict=True):
            result[position] = grad
        return tuple(result)

    def _differentiable_backward(self, ctx: Any, key: _BackwardKey, cts: Sequence) -> list:
        diff = list(ctx.saved_tensors[: len(self.diff_positions)])
        vjp = self.function.vjp_function(self.signature, key)
        if key.autocast is None:
            region = amp.autocast(enabled=False)
        else:
            region = amp.autocast(key.autocast)
        with region:
            return list(vjp(diff, self.consts, list(cts)))


def backward_trace(grad_fn: Any, needs_input_grad: Sequence[bool] | None = None) -> Any:
    """The program a `jax_function` node's backward runs, traced for inspection.

    `needs_input_grad` has one flag per tensor argument (default: every one that
    required grad). The result is a `jax.stages.Traced`: `.jaxpr` shows the dtypes
    of the backward's matmuls, `.lower().as_text()` what XLA compiles (only the
    wanted cotangents).
    """
    call = getattr(grad_fn, "jax_call", None)
    if not isinstance(call, _Call):
        name = grad_fn.name() if hasattr(grad_fn, "name") else type(grad_fn).__name__
        raise TypeError(f"backward_trace: {name} is not the node of a jax_function call")
    if needs_input_grad is None:
        needs_input_grad = [i in call.diff_positions for i in range(call.n_tensors)]
    if len(needs_input_grad) != call.n_tensors:
        raise ValueError(
            f"backward_trace: the node has {call.n_tensors} tensor inputs, got "
            f"{len(needs_input_grad)} needs_input_grad flags"
        )
    key = call.backward_key(needs_input_grad)
    cts = [
        jax.ShapeDtypeStruct(shape, dtype)
        for (shape, dtype), diff in zip(key.outputs.avals, key.outputs.differentiable, strict=True)
        if diff
    ]
    return jax.jit(_backward_impl, static_argnums=0).trace(key, call.stored_vjp(grad_fn), cts)


def _static_arguments(function: JaxFunction, args: tuple) -> tuple[tuple[int, Any], ...]:
    statics = []
    for position in function.static_argnums:
        index = position if position >= 0 else len(args) + position
        if not 0 <= index < len(args):
            raise ValueError(
                f"jax_function '{function.name}': static_argnums names argument {position}, "
                f"but the call passed {len(args)} positional arguments"
            )
        value = args[index]
        try:
            hash(value)
        except TypeError as exc:
            raise TypeError(
                f"jax_function '{function.name}': static argument {index} is an unhashable "
                f"{type(value).__name__}; static arguments key the compilation cache, so they "
                f"must be hashable. Pass a tuple instead of a list, a frozen dataclass instead "
                f"of a dict, or pass arrays as ordinary (non-static) arguments."
            ) from exc
        statics.append((index, value))
    return tuple(statics)


def _leaf_name(tree: Any, index: int) -> str:
    """Where leaf `index` of `(args, kwargs)` sits, as `args[1]['w']`."""
    paths = jax.tree_util.tree_flatten_with_path(
        tree, is_leaf=lambda x: isinstance(x, _tensor_class())
    )[0]
    head, *rest = paths[index][0]
    return ("args" if head.idx == 0 else "kwargs") + jax.tree_util.keystr(tuple(rest))


def _check_tensor(name: str, tensor: Any, tree: Any, index: int) -> None:
    if _is_tracer(tensor.data) and _tracing.depth == 0:
        raise TypeError(
            f"jax_function '{name}': {_leaf_name(tree, index)} holds a JAX tracer "
            f"({tensor.data.aval.str_short()}): a tensor made while JAX was tracing has "
            f"leaked into a jaxstream tape, which records concrete arrays. To run jaxstream "
            f"code inside jax.jit, jax.grad or jax.vmap, wrap it with js.to_jax."
        )
    if tensor.requires_grad and not jnp.issubdtype(tensor.dtype, jnp.inexact):
        raise TypeError(
            f"jax_function '{name}': {_leaf_name(tree, index)} is {tensor.dtype} (shape "
            f"{tensor.shape}) and requires grad, but only floating-point inputs have "
            f"gradients. Detach it (t.detach()) to pass it as a constant, or cast it to a "
            f"floating dtype first."
        )
    if tensor.requires_grad and np.dtype(tensor.dtype) == np.float64 and not jax.config.x64_enabled:
        raise TypeError(
            f"jax_function '{name}': {_leaf_name(tree, index)} is float64 (shape "
            f"{tensor.shape}) and requires grad, but JAX runs with 64-bit types disabled and "
            f"would compute it in float32. Make the tensor float32 (js.tensor(..., "
            f"dtype='float32')) or enable 64-bit JAX at start-up with "
            f"jax.config.update('jax_enable_x64', True)."
        )


def _check_constant(name: str, leaf: Any, tree: Any, index: int) -> None:
    if _is_tracer(leaf):
        if _tracing.depth == 0:
            raise TypeError(
                f"jax_function '{name}': {_leaf_name(tree, index)} is a JAX tracer "
                f"({leaf.aval.str_short()}); inside jax.jit, jax.grad or jax.vmap call the JAX "
                f"function itself, or wrap jaxstream code with js.to_jax."
            )
        return
    if isinstance(leaf, bool | int | float | complex | np.ndarray | np.generic | jax.Array):
        return
    if hasattr(leaf, "__dlpack__"):
        return
    raise TypeError(
        f"jax_function '{name}': {_leaf_name(tree, index)} is a {type(leaf).__name__}, which "
        f"is neither a Tensor nor an array. Pass other values as static arguments "
        f"(static_argnums=...) or close over them."
    )


@functools.cache
def _node_class() -> type:
    from .autograd.function import Function

    class JaxFunction(Function):
        """The node of a `jax_function` call (see Note [How a jax_function node runs])."""

        @staticmethod
        def forward(ctx: Any, call: _Call, *tensors: Any) -> tuple:
            return call.forward(ctx, tensors)

        @staticmethod
        def backward(ctx: Any, *grads: Any) -> tuple:
            return (None, *ctx.jax_call.backward(ctx, grads))

    return JaxFunction


# ------------------------------------------------------------------ to_jax
@dataclass(frozen=True)
class _Statics:
    """The static arguments of a `to_jax` call, hashable so JAX can key its caches on them."""

    values: tuple[tuple[int, Any], ...]


class _TracingScope:
    """Marks that jaxstream runs inside a JAX trace, where tensors may hold tracers."""

    def __enter__(self) -> None:
        _tracing.depth += 1

    def __exit__(self, *exc_info: object) -> None:
        _tracing.depth -= 1


def to_jax(fn: Callable, *, static_argnums: int | Sequence[int] = ()) -> Callable:
    """Make a function written with jaxstream ops a plain JAX function.

    It takes and returns JAX arrays (pytrees of them), works under `jax.jit`,
    `jax.grad` and `jax.vmap`, and its gradient is jaxstream's: a `custom_vjp`
    whose backward re-runs `fn` with grad recording and calls `js.grad` (the
    forward keeps no tape, so the backward recomputes it, as checkpointing
    does). See Note [What to_jax cannot trace].
    """
    name = getattr(fn, "__qualname__", None) or repr(fn)
    static = {static_argnums} if isinstance(static_argnums, int) else set(static_argnums)

    def run(statics: _Statics, dynamic: tuple, *, requires_grad: bool) -> tuple:
        from .tensor import tensor

        leaves, tree = jax.tree.flatten(dynamic)
        inputs = [
            tensor(a, requires_grad=requires_grad and jnp.issubdtype(a.dtype, jnp.inexact))
            for a in leaves
        ]
        args = list(jax.tree.unflatten(tree, inputs))
        for position, value in statics.values:
            args[position] = value
        try:
            return fn(*args), inputs
        except _JAX_TRACE_ERRORS as exc:
            raise TypeError(
                f"to_jax '{name}': the function needs the concrete value of a traced array "
                f"({type(exc).__name__}). Under jax.jit, jax.grad and jax.vmap jaxstream ops "
                f"see tracers: .item(), .numpy(), bool(tensor), Python control flow on tensor "
                f"values and data-dependent shapes cannot be traced. Use js.where, pass such "
                f"values as static arguments, or compute them outside."
            ) from exc

    def primal(statics: _Statics, dynamic: tuple) -> Any:
        from .autograd.grad_mode import no_grad

        with _TracingScope(), no_grad():
            out, _ = run(statics, dynamic, requires_grad=False)
        return _as_jax_outputs(name, out)

    def forward(statics: _Statics, dynamic: tuple) -> tuple:
        return primal(statics, dynamic), dynamic

    def backward(statics: _Statics, dynamic: tuple, cotangent: Any) -> tuple:
        from .autograd.api import grad
        from .autograd.grad_mode import enable_grad
        from .tensor import tensor

        with _TracingScope(), enable_grad():
            out, inputs = run(statics, dynamic, requires_grad=True)
            Tensor = _tensor_class()
            out_leaves = jax.tree.leaves(out, is_leaf=lambda x: isinstance(x, Tensor))
            pairs = [
                (o, tensor(c))
                for o, c in zip(out_leaves, jax.tree.leaves(cotangent), strict=True)
                if isinstance(o, Tensor) and o.requires_grad
            ]
            diff = [t for t in inputs if t.requires_grad]
            found = iter(
                grad([o for o, _ in pairs], diff, [c for _, c in pairs], allow_unused=True)
                if pairs and diff
                else [None] * len(diff)
            )
        grads = []
        for t in inputs:
            if not t.requires_grad:
                grads.append(np.zeros(t.shape, jax.dtypes.float0))
                continue
            g = next(found)
            grads.append(jnp.zeros(t.shape, t.dtype) if g is None else g.data)
        return (jax.tree.unflatten(jax.tree.structure(dynamic), grads),)

    differentiable = jax.custom_vjp(primal, nondiff_argnums=(0,))
    differentiable.defvjp(forward, backward)

    @functools.wraps(fn)
    def jax_fn(*args: Any) -> Any:
        statics = []
        for position in sorted(static):
            index = position if position >= 0 else len(args) + position
            try:
                hash(args[index])
            except TypeError as exc:
                raise TypeError(
                    f"to_jax '{name}': static argument {index} is an unhashable "
                    f"{type(args[index]).__name__}; pass a hashable value (a tuple, not a list)"
                ) from exc
            statics.append((index, args[index]))
        positions = {i for i, _ in statics}
        dynamic = tuple(
            None if i in positions else jax.tree.map(_as_jax_input, a) for i, a in enumerate(args)
        )
        return differentiable(_Statics(tuple(statics)), dynamic)

    return jax_fn


def _as_jax_input(value: Any) -> jax.Array:
    return _to_jax(value.data) if isinstance(value, _tensor_class()) else jnp.asarray(value)


def _as_jax_outputs(name: str, out: Any) -> Any:
    Tensor = _tensor_class()

    def convert(path: Any, leaf: Any) -> jax.Array:
        if isinstance(leaf, Tensor):
            leaf = leaf.data
        if isinstance(leaf, jax.Array):
            return leaf
        if isinstance(leaf, bool | int | float | complex | np.ndarray | np.generic):
            return jnp.asarray(leaf)
        raise TypeError(
            f"to_jax '{name}': output{jax.tree_util.keystr(path)} is a {type(leaf).__name__}; "
            f"a function given to to_jax must return tensors or arrays (pytrees of them)"
        )

    return jax.tree_util.tree_map_with_path(convert, out, is_leaf=lambda x: isinstance(x, Tensor))
