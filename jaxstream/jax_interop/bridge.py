"""`to_jax`: jaxstream code as a JAX function, differentiated by jaxstream through a custom_vjp.

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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ..autograd.api import grad
from ..autograd.grad_mode import enable_grad, no_grad
from ..tensor import Tensor, tensor
from .exchange import HOST_CONSTANTS, as_jax_array, is_tensor
from .statics import static_arguments, static_positions, with_statics, without_statics
from .tracing import TracingScope

_JAX_TRACE_ERRORS = (
    jax.errors.ConcretizationTypeError,
    jax.errors.TracerArrayConversionError,
    jax.errors.TracerBoolConversionError,
    jax.errors.TracerIntegerConversionError,
)


@dataclass(frozen=True)
class _Statics:
    """The static arguments of a `to_jax` call, hashable so JAX can key its caches on them."""

    values: tuple[tuple[int, Any], ...]


def to_jax(fn: Callable, *, static_argnums: int | Sequence[int] = ()) -> Callable:
    """Make a function written with jaxstream ops a plain JAX function.

    It takes and returns JAX arrays (pytrees of them), works under `jax.jit`,
    `jax.grad` and `jax.vmap`, and its gradient is jaxstream's: a `custom_vjp`
    whose backward re-runs `fn` with grad recording and calls `js.grad` (the
    forward keeps no tape, so the backward recomputes it, as checkpointing
    does). See Note [What to_jax cannot trace].
    """
    name = getattr(fn, "__qualname__", None) or repr(fn)
    static = static_positions(static_argnums)
    differentiable = _custom_vjp(_Traced(fn, name))

    @functools.wraps(fn)
    def jax_fn(*args: Any) -> Any:
        statics = static_arguments(
            args, static, f"to_jax '{name}'", "pass a hashable value (a tuple, not a list)"
        )
        dynamic = jax.tree.map(_as_jax_input, without_statics(args, statics))
        return differentiable(_Statics(statics), dynamic)

    return jax_fn


def _custom_vjp(traced: _Traced) -> Callable:
    """`traced` as a JAX function of `(statics, dynamic)` whose VJP jaxstream computes."""
    differentiable = jax.custom_vjp(traced.primal, nondiff_argnums=(0,))
    differentiable.defvjp(traced.forward, traced.backward)
    return differentiable


class _Traced:
    """The jaxstream function `to_jax` wraps, run on tensors over JAX's traced arrays."""

    def __init__(self, fn: Callable, name: str) -> None:
        self.fn = fn
        self.name = name

    def run(self, statics: _Statics, dynamic: tuple, *, requires_grad: bool) -> tuple:
        """`fn`'s output and its tensor inputs, trace errors turned into ones that say why."""
        leaves, tree = jax.tree.flatten(dynamic)
        inputs = [
            tensor(a, requires_grad=requires_grad and jnp.issubdtype(a.dtype, jnp.inexact))
            for a in leaves
        ]
        args = with_statics(jax.tree.unflatten(tree, inputs), statics.values)
        try:
            return self.fn(*args), inputs
        except _JAX_TRACE_ERRORS as exc:
            raise TypeError(
                f"to_jax '{self.name}': the function needs the concrete value of a traced array "
                f"({type(exc).__name__}). Under jax.jit, jax.grad and jax.vmap jaxstream ops "
                f"see tracers: .item(), .numpy(), bool(tensor), Python control flow on tensor "
                f"values and data-dependent shapes cannot be traced. Use js.where, pass such "
                f"values as static arguments, or compute them outside."
            ) from exc

    def primal(self, statics: _Statics, dynamic: tuple) -> Any:
        """The outputs as JAX arrays, computed without recording a tape."""
        with TracingScope(), no_grad():
            out, _ = self.run(statics, dynamic, requires_grad=False)
        return _as_jax_outputs(self.name, out)

    def forward(self, statics: _Statics, dynamic: tuple) -> tuple:
        """The custom_vjp forward: the inputs are the residuals, the backward recomputes."""
        return self.primal(statics, dynamic), dynamic

    def backward(self, statics: _Statics, dynamic: tuple, cotangent: Any) -> tuple:
        """The custom_vjp backward: re-run `fn` recording, then `js.grad` of its outputs."""
        with TracingScope(), enable_grad():
            out, inputs = self.run(statics, dynamic, requires_grad=True)
            found = _input_gradients(out, inputs, cotangent)
        grads = [_jax_gradient(t, g) for t, g in zip(inputs, found, strict=True)]
        return (jax.tree.unflatten(jax.tree.structure(dynamic), grads),)


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


def _jax_gradient(t: Tensor, g: Tensor | None) -> Any:
    """The cotangent JAX wants for input `t`: float0 where not differentiable, zeros if unused."""
    if not t.requires_grad:
        return np.zeros(t.shape, jax.dtypes.float0)
    return jnp.zeros(t.shape, t.dtype) if g is None else g.array


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
