"""The timed peers: each place (sim, cuda), layout (K streams, 1 stream) and phase."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from experiments.harness.peers import require_cuda_streams
from experiments.harness.timing import PeerUnavailable, Prepare
from experiments.streaming_backward import torch_peer
from experiments.streaming_backward.workload import (
    CUDA_DEVICE,
    SIM_DEVICE,
    BranchArrays,
    Build,
    Workload,
    backward,
    branch_workload,
    make_streams,
)

PLACES = {"sim": SIM_DEVICE, "cuda": CUDA_DEVICE}
"""Where jaxstream's peers run."""
TORCH = "torch"
"""PyTorch's peers, on CUDA streams of the GPU (torch_peer.py)."""
TIMED = (*PLACES, TORCH)
LAYOUTS = {"k": "K streams", "one": "1 stream"}
PHASES = ("forward", "backward")
PEER_COUNT = len(TIMED) * len(LAYOUTS) * len(PHASES)


def peer_name(place: str, layout: str, phase: str) -> str:
    return f"{place}-{layout}-{phase}"


def cuda_unavailable(device: str) -> str | None:
    """Why the cuda cells read n/a, or None when CuPy sees a GPU and --device cuda was given."""
    try:
        require_cuda_streams(device)
    except PeerUnavailable as reason:
        return str(reason)
    return None


def _timed_forward(build: Build, streams: tuple[Any, ...]) -> None:
    """The forward, ending with a host read of the loss (the caller waited for every branch)."""
    build(streams).loss.numpy()


def _prepare(
    workload: Workload, device: str, stream_count: int, phase: str, unavailable: str | None
) -> Prepare:
    def prepare() -> Callable[[], None]:
        if unavailable:
            raise PeerUnavailable(unavailable)
        build = workload(device)
        streams = make_streams(device, stream_count)
        if phase == "forward":
            return partial(_timed_forward, build, streams)
        return partial(backward, build(streams))

    return prepare


def peers(
    arrays: BranchArrays, branches: int, unavailable: dict[str, str | None]
) -> dict[str, Prepare]:
    """Every peer of the workload of `arrays` with K = ``branches``; ``unavailable`` says why
    a place (or PyTorch) cannot run, or None."""
    workload = branch_workload(arrays)
    found = {}
    for layout in LAYOUTS:
        streams = branches if layout == "k" else 1
        for phase in PHASES:
            for place, device in PLACES.items():
                found[peer_name(place, layout, phase)] = _prepare(
                    workload, device, streams, phase, unavailable[place]
                )
            found[peer_name(TORCH, layout, phase)] = torch_peer.prepare(
                arrays, streams, phase, unavailable[TORCH]
            )
    return found
