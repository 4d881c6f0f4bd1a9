"""A Tensor handed to JAX (`jax.jit`, `jax.grad`, `jax.vmap`, `jnp` functions): refused by name.

JAX asks a registry what abstract value each argument has, before anything
else; for a type it does not know it says only that the value, printed whole,
"is not a valid JAX type". Registering Tensor there with a handler that raises
makes that error say what to do instead (Note [Tensors handed to NumPy and JAX]
in conversions.py). The error is a ValueError, as JAX's own for objects it
refuses this way, because `jax.jit` replaces a TypeError from this step with a
message of its own. Only the error changes: Tensor stays a type JAX refuses, not
a pytree.
"""

from __future__ import annotations

from typing import Any

from jax._src import core as jax_core
from jax._src import dtypes as jax_dtypes

from ..tensor import Tensor


class TensorIsNotAJaxValue(ValueError):
    """A Tensor was passed where JAX takes arrays."""


def _refuse(t: Tensor) -> Any:
    grad = ", requires_grad=True" if t.requires_grad else ""
    raise TensorIsNotAJaxValue(
        f"a js.Tensor (shape {tuple(t.shape)}, dtype {t.dtype}{grad}) was passed to JAX "
        f"(jax.jit, jax.grad, jax.vmap or a jnp function), which takes arrays, not tensors. "
        f"Pass t.jax() (zero-copy where the memory allows); for a model or a pytree of "
        f"tensors, jax.tree.map(lambda t: t.jax(), tree) (a js.nn.Module keeps its "
        f"structure); to run jaxstream code under JAX's transformations, wrap it with "
        f"js.to_jax, which takes and returns arrays"
    )


def _register() -> None:
    """Enter Tensor in the registries JAX consults first: abstract values (jit, grad, vmap,
    jnp's jitted functions) and canonical values (a primitive's arguments, jax.vjp). They
    are JAX's internals: a JAX without one keeps its own error there, and nothing breaks."""
    for module, name in ((jax_core, "pytype_aval_mappings"),
                         (jax_dtypes, "canonicalize_value_handlers")):
        registry = getattr(module, name, None)
        if isinstance(registry, dict):
            registry[Tensor] = _refuse


_register()
