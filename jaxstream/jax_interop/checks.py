"""What a `jax_function` call accepts and returns, checked with errors that say what to do."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import jax
import jax.numpy as jnp
import numpy as np

from ..tensor import Tensor
from .exchange import HOST_CONSTANTS, is_tensor
from .statics import static_arguments
from .tracing import inside_trace, is_tracer

if TYPE_CHECKING:
    from .function import JaxFunction


def check_outputs(name: str, out: Any) -> None:
    """Raise unless `out` is arrays: only arrays can become tensors of the caller."""
    for path, leaf in jax.tree_util.tree_flatten_with_path(out)[0]:
        if not isinstance(leaf, jax.Array):
            raise TypeError(
                f"jax_function '{name}': output{jax.tree_util.keystr(path)} is a "
                f"{type(leaf).__name__}, not an array; a jax_function returns arrays or "
                f"pytrees of arrays. Wrap numbers with jnp.asarray and return other values "
                f"outside the function."
            )


def jax_function_statics(function: JaxFunction, args: tuple) -> tuple[tuple[int, Any], ...]:
    """The static arguments of a `jax_function` call, each checked in range, then hashable."""
    return static_arguments(
        args,
        _positions_in_range(function, args),
        f"jax_function '{function.name}'",
        "static arguments key the compilation cache, so they must be hashable. Pass a tuple "
        "instead of a list, a frozen dataclass instead of a dict, or pass arrays as ordinary "
        "(non-static) arguments.",
    )


def _positions_in_range(function: JaxFunction, args: tuple) -> Iterator[int]:
    for position in function.static_argnums:
        if not -len(args) <= position < len(args):
            raise ValueError(
                f"jax_function '{function.name}': static_argnums names argument {position}, "
                f"but the call passed {len(args)} positional arguments"
            )
        yield position


def _leaf_name(tree: Any, index: int) -> str:
    """Where leaf `index` of `(args, kwargs)` sits, as `args[1]['w']`."""
    paths = jax.tree_util.tree_flatten_with_path(tree, is_leaf=is_tensor)[0]
    head, *rest = paths[index][0]
    return ("args" if head.idx == 0 else "kwargs") + jax.tree_util.keystr(tuple(rest))


def check_tensor(name: str, tensor: Tensor, tree: Any, index: int) -> None:
    """Raise unless tensor leaf `index` of `tree` can enter JAX (concrete, differentiable)."""
    if is_tracer(tensor.array) and not inside_trace():
        raise TypeError(
            f"jax_function '{name}': {_leaf_name(tree, index)} holds a JAX tracer "
            f"({tensor.array.aval.str_short()}): a tensor made while JAX was tracing has "
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


def check_constant(name: str, leaf: Any, tree: Any, index: int) -> None:
    """Raise unless non-tensor leaf `index` of `tree` is a value JAX can close over."""
    if is_tracer(leaf):
        if not inside_trace():
            raise TypeError(
                f"jax_function '{name}': {_leaf_name(tree, index)} is a JAX tracer "
                f"({leaf.aval.str_short()}); inside jax.jit, jax.grad or jax.vmap call the JAX "
                f"function itself, or wrap jaxstream code with js.to_jax."
            )
        return
    if isinstance(leaf, HOST_CONSTANTS | jax.Array):
        return
    if hasattr(leaf, "__dlpack__"):
        return
    raise TypeError(
        f"jax_function '{name}': {_leaf_name(tree, index)} is a {type(leaf).__name__}, which "
        f"is neither a Tensor nor an array. Pass other values as static arguments "
        f"(static_argnums=...) or close over them."
    )
