"""The streaming workload: K independent branches of tanh layers on K streams, and its sizes.

Branch k runs its forward under ``with js.stream(s_k)`` after
``s_k.wait_stream(caller)``; the caller's stream waits for every s_k and joins
the branch sums into one loss, and the backward runs from the caller's stream.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from experiments.harness.peers import array_backend

BRANCH_COUNTS = (1, 2, 4)
SIM_DEVICE = "sim:0"
CUDA_DEVICE = "cuda:0"


@dataclass(frozen=True)
class Sizes:
    """`large` is the batch and width of the large branches of the mix; `narrow` the batch
    and width of the narrow branches."""

    batch: int
    width: int
    layers: int
    warmup: int
    repeat: int
    large: int
    narrow: tuple[int, int]


SIZES = {
    "smoke": Sizes(batch=8, width=16, layers=4, warmup=1, repeat=2, large=32,
                   narrow=(4, 64)),
    "quick": Sizes(batch=256, width=256, layers=8, warmup=2, repeat=15, large=1536,
                   narrow=(64, 4096)),
    "full": Sizes(batch=512, width=512, layers=16, warmup=2, repeat=21, large=2048,
                  narrow=(64, 8192)),
}


@dataclass(frozen=True)
class Inputs:
    """Host arrays every device starts from, so each device's grads can be compared."""

    x: np.ndarray
    weights: tuple[np.ndarray, ...]


@dataclass(frozen=True)
class Leaves:
    x: Any
    weights: tuple[Any, ...]


@dataclass(frozen=True)
class Graph:
    """One forward: its leaves, its loss, and per branch the stream and nodes it recorded."""

    leaves: Leaves
    loss: Any
    branch_streams: tuple[Any, ...]
    branch_nodes: tuple[frozenset[int], ...]
    """Sequence numbers of each branch's backward nodes (its linear, tanh and sum)."""


def make_inputs(sizes: Sizes, batch: int | None = None, width: int | None = None,
                layers: int | None = None, seed: int = 0) -> Inputs:
    """`x` (batch x width) and `layers` square weights; the sizes' own by default."""
    batch, width = batch or sizes.batch, width or sizes.width
    rng = np.random.default_rng(seed)
    scale = 1.0 / np.sqrt(width)
    return Inputs(
        x=rng.standard_normal((batch, width), dtype=np.float32),
        weights=tuple(
            (rng.standard_normal((width, width)) * scale).astype(np.float32)
            for _ in range(layers or sizes.layers)
        ),
    )


def _leaf(array: np.ndarray, device: str) -> Any:
    """A private copy of `array` on `device` (an upload on cuda) that requires grad."""
    import jaxstream as js

    return js.tensor(array.copy(), device=device, backend=array_backend(device),
                     requires_grad=True)


def make_leaves(inputs: Inputs, device: str) -> Leaves:
    """Private copies of the inputs on `device`, built untimed."""
    return Leaves(_leaf(inputs.x, device), tuple(_leaf(w, device) for w in inputs.weights))


def make_streams(device: str, count: int) -> tuple[Any, ...]:
    """`count` new streams on `device`; none on the cpu, which has no streams."""
    import jaxstream as js

    return () if device == "cpu" else tuple(js.Stream(device) for _ in range(count))


def _branch(x: Any, weights: tuple[Any, ...]) -> tuple[Any, frozenset[int]]:
    """The branch's sum, and the sequence numbers of the nodes it recorded."""
    import jaxstream as js

    h, nodes = x, []
    for weight in weights:
        pre_activation = js.linear(h, weight)
        h = js.tanh(pre_activation)
        nodes += [pre_activation.grad_fn.sequence_nr, h.grad_fn.sequence_nr]
    total = h.sum()
    return total, frozenset([*nodes, total.grad_fn.sequence_nr])


def forward(leaves: Leaves, streams: tuple[Any, ...], branches: int) -> Graph:
    """Branch k on `streams[k % len(streams)]` (no stream on the cpu), joined on the caller's."""
    n = len(leaves.weights) // branches
    pairs = [(leaves.x, leaves.weights[k * n : (k + 1) * n]) for k in range(branches)]
    return forward_branches(leaves, pairs, streams)


def forward_branches(
    leaves: Leaves, branches: list[tuple[Any, tuple[Any, ...]]], streams: tuple[Any, ...]
) -> Graph:
    """Branch k, an input and its layers' weights, on `streams[k % len(streams)]`, joined on
    the caller's stream; `leaves` are every leaf of the graph."""
    import jaxstream as js

    caller = js.current_stream(leaves.x.device)
    sums, branch_streams, branch_nodes = [], [], []
    for k, (x, weights) in enumerate(branches):
        stream = streams[k % len(streams)] if streams else None
        if stream is not None:
            stream.wait_stream(caller)
        with js.stream(stream):
            total, nodes = _branch(x, weights)
        sums.append(total)
        branch_streams.append(stream)
        branch_nodes.append(nodes)
    for stream in streams:
        caller.wait_stream(stream)
    loss = js.stack(sums).sum()
    return Graph(leaves, loss, tuple(branch_streams), tuple(branch_nodes))


Build = Callable[[tuple[Any, ...]], Graph]
"""Builds the forward on the given streams, on leaves made beforehand."""
Workload = Callable[[str], Build]
"""Makes fresh leaves on a device (untimed), and returns the forward to build on them."""


BranchArrays = list[tuple[np.ndarray, tuple[np.ndarray, ...]]]
"""Per branch, its input and its layers' weights as host arrays, from which each framework
builds the workload; branches that read one input hold the same array object."""


def shared_arrays(inputs: Inputs, branches: int) -> BranchArrays:
    """The K-branch workload: every branch reads the same `x`, and the layers split evenly."""
    n = len(inputs.weights) // branches
    return [(inputs.x, inputs.weights[k * n : (k + 1) * n]) for k in range(branches)]


def own_arrays(branch_inputs: list[Inputs]) -> BranchArrays:
    """One branch per `Inputs`, each with its own `x` and weights."""
    return [(inputs.x, inputs.weights) for inputs in branch_inputs]


def branch_workload(arrays: BranchArrays) -> Workload:
    """jaxstream's workload of `arrays`: fresh leaves on a device, one per distinct array
    (the first input first), and branch k's forward on its input and weights."""

    def on(device: str) -> Build:
        made: dict[int, Any] = {}

        def leaf(array: np.ndarray) -> Any:
            if id(array) not in made:
                made[id(array)] = _leaf(array, device)
            return made[id(array)]

        pairs = [(leaf(x), tuple(leaf(w) for w in weights)) for x, weights in arrays]
        every_leaf = tuple(made.values())
        return lambda streams: forward_branches(
            Leaves(every_leaf[0], every_leaf[1:]), pairs, streams
        )

    return on


def backward(graph: Graph) -> None:
    """Backward from the caller's stream, then a host read of x's grad on that stream."""
    graph.loss.backward()
    graph.leaves.x.grad.numpy()
