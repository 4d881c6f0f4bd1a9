"""The optax state carried between steps as one vector per dtype.

Note [The state as one vector per dtype]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
A jitted call pays for every array it takes and every array it returns (for
Adam over four parameters the state is 15 arrays: about 45 us a step against
10 us for three). So the optimizer keeps its optax state as one flat vector per
dtype (`StateLayout.pack`), the jitted update splits them back into the state's
leaves and packs the new state the same way, inside the program, where it
costs nothing. The tree is rebuilt only when someone reads `Optimizer.state`
(`state_dict`, a changed hyperparameter), by one jitted call.

Where the state lives in host memory (jaxstream's `cpu`, or a sim device's host
device), packing and unpacking it are NumPy copies instead: a jitted call would
compile a program for each new layout, most of an optimizer's construction time
there. Inside a trace (`js.compile`) the leaves are tracers, so the jitted form
runs, and folds into the traced program.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ..devices.xla import host_devices


@dataclass(frozen=True)
class StateLayout:
    """Each leaf's shape, and its group: the leaves of one dtype, in order, share a vector."""

    shapes: tuple[tuple[int, ...], ...]
    dtypes: tuple[np.dtype, ...]  # one per group
    groups: tuple[tuple[int, ...], ...]  # the leaf positions of each group

    @classmethod
    def of(cls, leaves: list) -> StateLayout:
        by_dtype: dict[np.dtype, list[int]] = {}
        for i, leaf in enumerate(leaves):
            by_dtype.setdefault(np.dtype(leaf.dtype), []).append(i)
        return cls(
            tuple(tuple(leaf.shape) for leaf in leaves),
            tuple(by_dtype),
            tuple(tuple(positions) for positions in by_dtype.values()),
        )

    def pack(self, leaves: list) -> tuple:
        """One vector per group (the leaves cast to the group's dtype, so the layout holds)."""
        return tuple(
            jnp.concatenate([jnp.ravel(leaves[i]).astype(dtype) for i in positions])
            for dtype, positions in zip(self.dtypes, self.groups, strict=True)
        )

    def unpack(self, vectors: tuple) -> list:
        leaves: list = [None] * len(self.shapes)
        for vector, positions in zip(vectors, self.groups, strict=True):
            start = 0
            for i in positions:
                size = int(np.prod(self.shapes[i], dtype=np.int64))
                leaves[i] = vector[start : start + size].reshape(self.shapes[i])
                start += size
        return leaves


def packed_state_jit(fn: Callable, state_def: Any) -> Callable:
    """`fn(*args, state) -> (result, state)` jitted as `(layout, *args, vectors) ->
    (result, vectors)` (Note [The state as one vector per dtype])."""

    def packed(layout: StateLayout, *args: Any) -> tuple[Any, tuple]:
        *args, vectors = args
        result, state = fn(*args, state_def.unflatten(layout.unpack(vectors)))
        return result, layout.pack(state_def.flatten_up_to(state))

    return jax.jit(packed, static_argnums=0)


@partial(jax.jit, static_argnums=0)
def _unpack(layout: StateLayout, vectors: tuple) -> list:
    return layout.unpack(vectors)


@partial(jax.jit, static_argnums=0)
def _pack(layout: StateLayout, leaves: list) -> tuple:
    return layout.pack(leaves)


def _host_device(arrays: list) -> Any:
    """The one host device holding all of `arrays` (concrete JAX arrays), else None."""
    if not arrays or not all(isinstance(a, jax.Array) and not isinstance(a, jax.core.Tracer)
                             for a in arrays):
        return None
    devices = set().union(*(a.devices() for a in arrays))
    if len(devices) != 1 or not devices <= set(host_devices()):
        return None
    return devices.pop()


def pack_state(state_def: Any, state: Any) -> tuple[StateLayout, tuple]:
    """`state`'s layout and vectors, by one compiled call (NumPy copies on the host)."""
    leaves = state_def.flatten_up_to(state)
    layout = StateLayout.of(leaves)
    device = _host_device(leaves)
    if device is None:
        return layout, _pack(layout, leaves)
    host = [np.asarray(leaf) for leaf in leaves]
    return layout, tuple(
        jax.device_put(np.concatenate([host[i].ravel().astype(dtype) for i in positions]),
                       device)
        for dtype, positions in zip(layout.dtypes, layout.groups, strict=True)
    )


def unpack_state(state_def: Any, layout: StateLayout, vectors: tuple) -> Any:
    """The state tree back from its vectors, by one compiled call (NumPy copies on the
    host)."""
    device = _host_device(list(vectors))
    if device is None:
        return state_def.unflatten(_unpack(layout, vectors))
    leaves = layout.unpack([np.asarray(v) for v in vectors])
    return state_def.unflatten([jax.device_put(leaf, device) for leaf in leaves])
