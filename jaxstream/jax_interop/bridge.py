"""`to_jax`: jaxstream code as a JAX function, differentiated by jaxstream's engine or by JAX.

Note [What to_jax cannot trace]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
Under `jax.jit`, `jax.grad` and `jax.vmap` the tensors a `to_jax` function sees
hold JAX tracers. Anything that needs a concrete value fails with a TypeError
naming the function: `.item()`, `.numpy()`, `bool(t)` and Python control flow
on tensor values, data-dependent shapes; so do NumPy or CuPy tensors created
inside (they cannot hold tracers). Tensors made during tracing must not outlive
it: a `jax_function` that receives one outside `to_jax` raises.

Note [Every run of a to_jax function sees the same inputs]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
`to_jax` runs `fn` more than once: for the outputs (once per trace under
`jax.jit`) and, in engine mode, again in the custom_vjp backward. Every run gets
grad mode on and float inputs that require grad, so that `fn` is one function in
all of them: a loss that calls `js.grad(..., create_graph=True)` on its inputs (a
gradient penalty, a physics-informed residual) finds their graph in every run.
Running the forward under `no_grad` would spare recording a tape, but such a
loss would then fail there with "does not require grad". The price is a tape
recorded while tracing, freed when the run ends.

Note [Engine mode and native mode]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
`mode="engine"` (the default) hides `fn` behind a `jax.custom_vjp` whose
backward re-runs `fn` and calls `js.grad`: jaxstream's engine computes the
gradient, so tensor hooks, custom `js.autograd.Function` backwards and
`jax_function` nodes run as they do eagerly. JAX differentiates that backward in
turn (`jax.grad` of `jax.grad`, `jax.hessian`), but it cannot push tangents
forward through a custom_vjp, so `jax.jvp` and `jax.jacfwd` raise.

`mode="native"` returns the traced ops themselves: JAX sees only its own
primitives and differentiates them with its own rules, so every transformation
works (`jax.jvp`, `jax.jacfwd`, `jax.hessian`, `jax.vmap` with JAX's batching
rules) and no backward recomputes the forward. The engine still runs inside `fn`
(a `js.grad` call in `fn` computes its gradient while tracing, and JAX
differentiates those ops too). What JAX would skip is a backward written by
hand: JAX differentiates a custom Function's forward, never its `backward`, and
runs no hooks. Native mode refuses a graph of outputs that holds either
(`jax_function` nodes excepted, whose backward is JAX's VJP anyway), with an
error that names the node; such programs take engine mode. `detach()` of a
traced tensor also applies `jax.lax.stop_gradient`, so it stops both modes. What
JAX still does not see is an op run under `no_grad` on traced tensors (a
`no_grad` block, or a `js.grad` without `create_graph` inside `fn`): it cuts
jaxstream's graph but leaves JAX's traced ops connected, so native mode
differentiates through it where engine mode does not. Detach its result (or its
inputs) for a stop that holds in both modes.

Note [to_jax under shard_map]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
Inside `jax.shard_map` (with its default `check_vma=True`) every value's type
says over which manual mesh axes it varies, and a custom_vjp's backward must
give each input a gradient that varies over exactly its input's axes. JAX's own
transpose of a replicated input used with sharded ones (an implicit `pcast` to
varying) is a `psum` over the extra axes: the gradient of replicated weights is
the sum over the shards, the same on every device. The engine computes each
device's part, so engine mode does what JAX would: it sums a gradient over the
axes its input does not vary over, and marks a gradient that varies over fewer
axes than its input (one built from constants) as varying. Engine and native
mode then agree, and both agree with `jax.grad` of the same code in JAX.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal

import jax
import jax.numpy as jnp
import numpy as np

from ..autograd.api import grad
from ..autograd.grad_mode import enable_grad
from ..conversions import HostReadWhileTracing
from ..randomness.sources import DrawLog, DrawSource, drawing_from
from ..tensor import Tensor, tensor
from .draws import CallerDraws, replayed_draws
from .exchange import HOST_CONSTANTS, as_jax_array, is_tensor
from .native import refuse_custom_backwards
from .statics import static_arguments, static_positions, with_statics, without_statics
from .tracing import TracingScope

Mode = Literal["engine", "native"]
_MODES: tuple[Mode, ...] = ("engine", "native")

_JAX_TRACE_ERRORS = (
    HostReadWhileTracing,
    jax.errors.ConcretizationTypeError,
    jax.errors.TracerArrayConversionError,
    jax.errors.TracerBoolConversionError,
    jax.errors.TracerIntegerConversionError,
)


@dataclass(frozen=True)
class _Statics:
    """The static arguments of a `to_jax` call, hashable so JAX can key its caches on them."""

    values: tuple[tuple[int, Any], ...]


def to_jax(
    fn: Callable, *, static_argnums: int | Sequence[int] = (), mode: Mode = "engine"
) -> Callable:
    """Make a function written with jaxstream ops a plain JAX function.

    It takes and returns JAX arrays (pytrees of them) and works under `jax.jit`,
    `jax.grad` and `jax.vmap`. `mode` says who differentiates it (Note [Engine
    mode and native mode]):

    - `"engine"`: jaxstream's engine, through a `custom_vjp` whose backward
      re-runs `fn` (the forward keeps no tape, as checkpointing does) and calls
      `js.grad`; hooks and custom Function backwards run. Reverse mode only.
    - `"native"`: JAX itself, through the traced ops; `jax.jvp`, `jax.jacfwd`,
      `jax.hessian` and JAX's batching rules work, but a graph holding a custom
      Function or a hook is refused, since JAX would skip it.

    See Note [What to_jax cannot trace]; for random draws, Note [Draws inside to_jax]
    (engine mode's backward replays the forward's; under a trace they need a key).
    """
    name = getattr(fn, "__qualname__", None) or repr(fn)
    if mode not in _MODES:
        raise ValueError(
            f"to_jax '{name}': mode must be one of {', '.join(map(repr, _MODES))}, got {mode!r}"
        )
    static = static_positions(static_argnums)
    traced = _Traced(fn, name)
    program = _engine_program(traced) if mode == "engine" else traced.native

    @functools.wraps(fn)
    def jax_fn(*args: Any) -> Any:
        statics = static_arguments(
            args, static, f"to_jax '{name}'", "pass a hashable value (a tuple, not a list)"
        )
        dynamic = jax.tree.map(_as_jax_input, without_statics(args, statics))
        return program(_Statics(statics), dynamic)

    return jax_fn


# How JAX refuses to push tangents through a custom_vjp.
_FORWARD_MODE_ERROR = "forward-mode autodiff"


def _engine_program(traced: _Traced) -> Callable:
    """`traced` as a JAX function of `(statics, dynamic)` whose VJP jaxstream computes."""
    differentiable = jax.custom_vjp(traced.primal, nondiff_argnums=(0,))
    differentiable.defvjp(traced.forward, traced.backward)

    def program(statics: _Statics, dynamic: tuple) -> Any:
        try:
            return differentiable(statics, dynamic)
        except TypeError as exc:
            if _FORWARD_MODE_ERROR not in str(exc):
                raise
            raise TypeError(
                f"to_jax '{traced.name}': forward-mode differentiation (jax.jvp, jax.jacfwd) "
                f"cannot go through mode='engine', whose gradient is a custom_vjp run by "
                f"jaxstream's engine; use to_jax(fn, mode='native') to let JAX differentiate "
                f"the traced ops"
            ) from exc

    return program


class _Traced:
    """The jaxstream function `to_jax` wraps, run on tensors over JAX's traced arrays."""

    def __init__(self, fn: Callable, name: str) -> None:
        self.fn = fn
        self.name = name

    def run(self, statics: _Statics, dynamic: tuple, draws: DrawSource) -> tuple:
        """`fn`'s output and its tensor inputs, recorded on a tape; trace errors explained.
        Its draws without `key=` come from `draws` (Note [Draws inside to_jax]).

        See Note [Every run of a to_jax function sees the same inputs].
        """
        leaves, tree = jax.tree.flatten(dynamic)
        with self.naming_errors("its forward"), TracingScope(), enable_grad(), \
                drawing_from(draws):
            inputs = [tensor(a, requires_grad=jnp.issubdtype(a.dtype, jnp.inexact))
                      for a in leaves]
            args = with_statics(jax.tree.unflatten(tree, inputs), statics.values)
            return self.fn(*args), inputs

    @contextmanager
    def naming_errors(self, part: str) -> Iterator[None]:
        """Errors raised while JAX traces `fn` name it: a value a trace cannot know is
        explained, any other error gets a note."""
        try:
            yield
        except _JAX_TRACE_ERRORS as exc:
            raise TypeError(
                f"to_jax '{self.name}': the function needs the concrete value of a traced array "
                f"({type(exc).__name__}). Under jax.jit, jax.grad and jax.vmap jaxstream ops "
                f"see tracers: .item(), .numpy(), bool(tensor), Python control flow on tensor "
                f"values and data-dependent shapes cannot be traced. Use js.where, pass such "
                f"values as static arguments, or compute them outside."
            ) from exc
        except Exception as exc:
            exc.add_note(f"raised while to_jax traced '{self.name}' ({part}) under JAX")
            raise

    def primal(self, statics: _Statics, dynamic: tuple) -> Any:
        """The outputs as JAX arrays."""
        return self._outputs(statics, dynamic, CallerDraws(self.name, dynamic))

    def _outputs(self, statics: _Statics, dynamic: tuple, draws: DrawSource) -> Any:
        out, _ = self.run(statics, dynamic, draws)
        return _as_jax_outputs(self.name, out)

    def native(self, statics: _Statics, dynamic: tuple) -> Any:
        """The outputs as JAX arrays for JAX to differentiate, refused if it would skip a backward.

        See Note [Engine mode and native mode].
        """
        out, _ = self.run(statics, dynamic, CallerDraws(self.name, dynamic))
        refuse_custom_backwards(f"to_jax '{self.name}'", out)
        return _as_jax_outputs(self.name, out)

    def forward(self, statics: _Statics, dynamic: tuple) -> tuple:
        """The custom_vjp forward: the inputs and the states of its draws are the residuals,
        the backward recomputes."""
        draws = CallerDraws(self.name, dynamic)
        return self._outputs(statics, dynamic, draws), (dynamic, draws.log.as_arrays())

    def backward(self, statics: _Statics, residuals: tuple[tuple, DrawLog],
                 cotangent: Any) -> tuple:
        """The custom_vjp backward: re-run `fn` drawing what the forward drew, then
        `js.grad` of its outputs."""
        dynamic, draws = residuals
        out, inputs = self.run(statics, dynamic, replayed_draws(self.name, draws))
        with self.naming_errors("the engine's backward"), TracingScope(), enable_grad():
            found = _input_gradients(out, inputs, cotangent)
        leaves, tree = jax.tree.flatten(dynamic)
        grads = [
            _jax_gradient(t, g, primal)
            for t, g, primal in zip(inputs, found, leaves, strict=True)
        ]
        return (jax.tree.unflatten(tree, grads),)


def _input_gradients(out: Any, inputs: Sequence[Tensor], cotangent: Any) -> list:
    """The gradient of each input (None where it requires none or is unused), by `js.grad`."""
    out_leaves = jax.tree.leaves(out, is_leaf=is_tensor)
    pairs = [
        (o, tensor(c))
        for o, c in zip(out_leaves, jax.tree.leaves(cotangent), strict=True)
        if is_tensor(o) and o.requires_grad
    ]
    diff = [t for t in inputs if t.requires_grad]
    found = iter(
        grad([o for o, _ in pairs], diff, [c for _, c in pairs], allow_unused=True)
        if pairs and diff
        else [None] * len(diff)
    )
    return [next(found) if t.requires_grad else None for t in inputs]


def _jax_gradient(t: Tensor, g: Tensor | None, primal: Any) -> Any:
    """The cotangent JAX wants for input `t` (whose array is `primal`): float0 where not
    differentiable, zeros if unused, varying as `primal` does (Note [to_jax under shard_map])."""
    if not t.requires_grad:
        return np.zeros(t.shape, jax.dtypes.float0)
    gradient = jnp.zeros(t.shape, t.dtype) if g is None else g.array
    have, want = _varying_axes(gradient), _varying_axes(primal)
    if have - want:
        gradient = jax.lax.psum(gradient, _in_order(have - want))
    if want - have:
        gradient = jax.lax.pcast(gradient, _in_order(want - have), to="varying")
    return gradient


def _varying_axes(value: Any) -> frozenset:
    """The manual mesh axes `value` varies over inside `jax.shard_map` (none outside)."""
    return jax.typeof(value).mat.varying


def _in_order(axes: frozenset) -> tuple:
    return tuple(sorted(axes, key=str))


def _as_jax_input(value: Any) -> jax.Array:
    return as_jax_array(value.array) if is_tensor(value) else jnp.asarray(value)


def _as_jax_outputs(name: str, out: Any) -> Any:
    def convert(path: Any, leaf: Any) -> jax.Array:
        if is_tensor(leaf):
            leaf = leaf.array
        if isinstance(leaf, jax.Array):
            return leaf
        if isinstance(leaf, HOST_CONSTANTS):
            return jnp.asarray(leaf)
        raise TypeError(
            f"to_jax '{name}': output{jax.tree_util.keystr(path)} is a {type(leaf).__name__}; "
            f"a function given to to_jax must return tensors or arrays (pytrees of them)"
        )

    return jax.tree_util.tree_map_with_path(convert, out, is_leaf=is_tensor)
