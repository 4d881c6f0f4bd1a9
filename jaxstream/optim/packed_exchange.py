"""The optax update over all parameters, and its packed form for small host parameters.

Note [Packed exchange for small host parameters]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
A jitted call pays per argument: each small NumPy array is copied in on its own,
and each result costs a conversion back (a fresh JAX array's first `np.asarray`
is several microseconds). For a small model on the NumPy backend that exchange
outweighs Adam's arithmetic. So where every parameter is a small cpu NumPy array
of one dtype, the parameters and the gradients (zeros where None) each enter as
one concatenated vector, the program splits them into the parameters' shapes,
runs the same optax update, and returns the new values as one vector; the host
splits that into read-only views, one per parameter. optax still sees one array
per parameter, so the state and the arithmetic are those of the unpacked call.
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import numpy as np
import optax

PACK_BELOW_BYTES = 1 << 20  # where a jitted call copies a NumPy argument anyway


def update(transform: optax.GradientTransformation, params: list, grads: list,
           state: Any) -> tuple[list, Any]:
    """One optax step over all parameters; None gradients count as zero and keep the value."""
    filled = [jnp.zeros_like(p) if g is None else g for p, g in zip(params, grads, strict=True)]
    updates, state = transform.update(filled, state, params)
    stepped = optax.apply_updates(params, updates)
    kept = [p if g is None else s for p, g, s in zip(params, grads, stepped, strict=True)]
    return kept, state


class Packing:
    """The parameters' shapes, and where each lies in the packed vector."""

    def __init__(self, arrays: list) -> None:
        self.dtype = arrays[0].dtype
        self.shapes = tuple(a.shape for a in arrays)
        self.bounds = tuple(np.cumsum([0] + [a.size for a in arrays]).tolist())
        # Arrays of these shapes and this dtype, as `fits` asks, have these sizes.
        self._small = all(a.nbytes < PACK_BELOW_BYTES for a in arrays)

    def fits(self, arrays: list) -> bool:
        """Whether `arrays` (the parameters' now) can take the packed exchange."""
        if not self._small:
            return False
        dtype = self.dtype
        for a, shape in zip(arrays, self.shapes, strict=True):
            if type(a) is not np.ndarray or a.dtype != dtype or a.shape != shape:
                return False
        return True

    def pack(self, arrays: list) -> np.ndarray:
        return np.concatenate([a.ravel() for a in arrays])

    def unpack(self, flat: Any) -> list:
        """`flat`'s parts in the parameters' shapes (views, for NumPy and in the program)."""
        b = self.bounds
        return [flat[b[i] : b[i + 1]].reshape(s) for i, s in enumerate(self.shapes)]


def packed_update(transform: optax.GradientTransformation, packing: Packing, params: Any,
                  grads: Any, state: Any) -> tuple[Any, Any]:
    """`update` on packed vectors (Note [Packed exchange for small host parameters])."""
    stepped, state = update(transform, packing.unpack(params), packing.unpack(grads), state)
    return jnp.concatenate([s.ravel() for s in stepped]), state
