"""PyTorch's streams as the peer of the streaming workload: the same branches, each on its own
`torch.cuda.Stream`, joined and differentiated as jaxstream's are (workload.py).

PyTorch's backward runs each node on the stream its forward op ran on and makes a
consumer wait for a producer only where their streams differ (the seeds' stream note),
so its K streams / 1 stream ratio is the overlap a define-by-run engine can get from
this workload on this GPU: the reference for jaxstream's (issue target: never lose
where PyTorch does not, and keep at least 80% of PyTorch's gain where it gains).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from experiments.harness.peers import require, torch_device
from experiments.harness.timing import PeerUnavailable, Prepare
from experiments.streaming_backward.workload import BranchArrays


def torch_unavailable(device: str) -> str | None:
    """Why the PyTorch cells read n/a (torch missing, or no --device cuda, or no GPU that
    PyTorch sees), or None where PyTorch's streams can run (they are CUDA's)."""
    try:
        require("torch")
        if device != "cuda":
            raise PeerUnavailable("run with --device cuda (PyTorch's streams are CUDA streams)")
        torch_device(device)
    except PeerUnavailable as reason:
        return str(reason)
    return None


def _leaves(torch: Any, arrays: BranchArrays) -> tuple[list[tuple[Any, tuple[Any, ...]]], Any]:
    """The branches as torch leaves on the GPU (one leaf per distinct input), and the first
    input's leaf, whose grad the backward reads."""
    device = torch.device("cuda")
    made: dict[int, Any] = {}

    def leaf(array: np.ndarray) -> Any:
        if id(array) not in made:
            made[id(array)] = torch.tensor(array, device=device, requires_grad=True)
        return made[id(array)]

    branches = [(leaf(x), tuple(leaf(w) for w in weights)) for x, weights in arrays]
    return branches, branches[0][0]


def _forward(torch: Any, branches: list, streams: list) -> Any:
    """Branch k on `streams[k % len(streams)]` after it waits for the caller's stream; the
    caller waits for every stream, then joins the branch sums into the loss."""
    caller = torch.cuda.current_stream()
    sums = []
    for k, (x, weights) in enumerate(branches):
        stream = streams[k % len(streams)]
        stream.wait_stream(caller)
        with torch.cuda.stream(stream):
            h = x
            for weight in weights:
                h = torch.tanh(torch.nn.functional.linear(h, weight))
            sums.append(h.sum())
    for stream in streams:
        caller.wait_stream(stream)
    return torch.stack(sums).sum()


def _timed_forward(torch: Any, branches: list, streams: list) -> None:
    """The forward, ending with a host read of the loss."""
    _forward(torch, branches, streams).item()


def _timed_backward(loss: Any, first_input: Any) -> None:
    """The backward from the caller's stream, then a host read of the first input's grad."""
    loss.backward()
    first_input.grad.cpu()


def prepare(arrays: BranchArrays, stream_count: int, phase: str, unavailable: str | None
            ) -> Prepare:
    """The PyTorch peer of one layout and phase: each sample on fresh leaves and streams,
    its backward on a graph built untimed, as jaxstream's peers are."""

    def make() -> Callable[[], None]:
        if unavailable:
            raise PeerUnavailable(unavailable)
        torch = require("torch")
        branches, first_input = _leaves(torch, arrays)
        streams = [torch.cuda.Stream() for _ in range(stream_count)]
        if phase == "forward":
            return partial(_timed_forward, torch, branches, streams)
        loss = _forward(torch, branches, streams)
        torch.cuda.synchronize()
        return partial(_timed_backward, loss, first_input)

    return make
