"""The backward program of a `jax_function` node: the wanted gradients from the VJP.

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
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import jax
import numpy as np

from .autocast import under_autocast
from .signature import OutputSignature
from .tracing import is_tracer


@dataclass(frozen=True)
class BackwardKey:
    """The static part of one backward: which cotangents to return, under which autocast.

    It keys the compiled backward, so that each pattern of wanted gradients compiles once.
    """

    outputs: OutputSignature
    wanted: tuple[bool, ...]
    shardings: tuple[Any, ...]
    autocast: np.dtype | None


def run_vjp(key: BackwardKey, vjp_fn: Callable, cts: Sequence) -> list:
    """The wanted gradients of `vjp_fn`, each kept on its input's sharding.

    Shared by the compiled backward and by the differentiable one of `create_graph=True`.
    """
    grads = vjp_fn(key.outputs.cotangent(cts))
    return [
        g if sharding is None else jax.lax.with_sharding_constraint(g, sharding)
        for g, sharding, wanted in zip(grads, key.shardings, key.wanted, strict=True)
        if wanted
    ]


def run_backward(key: BackwardKey, vjp_fn: Callable, cts: Sequence) -> list:
    """`run_vjp` under the key's autocast: the program a node's backward compiles and traces."""
    return under_autocast(functools.partial(run_vjp, key), key.autocast)(vjp_fn, cts)


def gradient_sharding(array: Any) -> Any:
    """The sharding a gradient must keep: only for arrays spread over several devices."""
    sharding = getattr(array, "sharding", None)
    if sharding is None or is_tracer(array) or len(sharding.device_set) < 2:
        return None
    return sharding
