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

from .exchange import _tensor_class, _to_jax
from .statics import _static_arguments, _static_positions, _with_statics, _without_statics
from .tracing import _TracingScope

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
    static = _static_positions(static_argnums)

    def run(statics: _Statics, dynamic: tuple, *, requires_grad: bool) -> tuple:
        from ..tensor import tensor

        leaves, tree = jax.tree.flatten(dynamic)
        inputs = [
            tensor(a, requires_grad=requires_grad and jnp.issubdtype(a.dtype, jnp.inexact))
            for a in leaves
        ]
        args = _with_statics(jax.tree.unflatten(tree, inputs), statics.values)
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
        from ..autograd.grad_mode import no_grad

        with _TracingScope(), no_grad():
            out, _ = run(statics, dynamic, requires_grad=False)
        return _as_jax_outputs(name, out)

    def forward(statics: _Statics, dynamic: tuple) -> tuple:
        return primal(statics, dynamic), dynamic

    def backward(statics: _Statics, dynamic: tuple, cotangent: Any) -> tuple:
        from ..autograd.api import grad
        from ..autograd.grad_mode import enable_grad
        from ..tensor import tensor

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
        statics = _static_arguments(
            args, static, f"to_jax '{name}'", "pass a hashable value (a tuple, not a list)"
        )
        dynamic = jax.tree.map(_as_jax_input, _without_statics(args, statics))
        return differentiable(_Statics(statics), dynamic)

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
