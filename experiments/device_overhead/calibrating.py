"""The rows that calibrate virtual time's host beyond the chain: products and stream work.

Virtual time charges the host one figure per op kind and per stream work (Note [Virtual
time] in jaxstream/devices/virtual_time.py). Beside the tanh-and-multiply chain, this times,
in the places that calibrate it (sim with the checks off, cuda over the CuPy stand-in and,
with ``--device cuda``, the GPU's): a forward chain of matrix products on 32 x 32 float32s
(``y @ w`` and ``linear(y, w)`` in turn, as the chain is 1,024 floats), per op, against
PyTorch; and per call, each of a stream's host work: recording an event, waiting on one, and
entering a stream (``with js.stream(s)``, what switching the current stream costs).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from experiments.device_overhead.peers import (
    CUDA_PLACES,
    PLACES,
    Place,
    leaf,
    placed,
    torch_place,
    waiter,
)
from experiments.harness import peer_table
from experiments.harness.timing import Outcome, Prepare

PRODUCT_PASS = "product forward"
STREAM_WORK = {"record": "record event", "wait": "wait event", "switch": "stream switch"}
"""Each stream work (virtual time's name) -> its pass in the table."""
SIDE = 32
"""The products' matrices are SIDE x SIDE: the chain's 1,024 floats."""
SHARE = 4
"""These rows time a quarter of the chain's length: their figures are per op or per call."""
PRODUCT_PEERS = ("sim-numpy", "sim-jax", "cuda-stand-in", "cuda-cupy", "cuda-jax")
"""The places whose products calibrate a backend (on a CPU, and on a GPU)."""
STREAM_PEERS = ("sim-numpy", "cuda-stand-in", "cuda-cupy")
"""The places whose stream work calibrates a device's (sim's, the stand-in's, a GPU's): a
stream's host work depends on its device, not on the arrays' backend."""

NOTE = (
    "Virtual time's other host figures (Note [Virtual time] in jaxstream/devices/"
    "virtual_time.py), in the places that calibrate it: a product forward, per op, is a "
    f"chain of y @ w and linear(y, w) in turn on {SIDE} x {SIDE} float32s (against PyTorch's "
    "own); record event, wait event and stream switch are one call each of "
    "s.record_event(), s.wait_event(e) and entering and leaving js.stream(s), per call. Each "
    f"times a {SHARE}th of the chain's length; no cpu or floor peer, so those ratios read n/a."
)

def count(length: int) -> int:
    """The ops or calls of one sample of these rows (even, as the chain's)."""
    return max(2, length // SHARE // 2 * 2)


def _places(names: tuple[str, ...], device: str) -> list[Place]:
    here = PLACES + (CUDA_PLACES if device == "cuda" else ())
    return [place for place in here if place.peer in names]


def product_chain(y: Any, weight: Any, length: int, linear: Callable[[Any, Any], Any]) -> Any:
    """``length`` products: ``y @ weight``, then ``linear(y, weight)``, in turn."""
    for _ in range(length // 2):
        y = linear(y @ weight, weight)
    return y


def product_start() -> np.ndarray:
    return np.full((SIDE, SIDE), 0.5, np.float32)


def product_weight() -> np.ndarray:
    return np.eye(SIDE, dtype=np.float32)  # keeps the values where they were


def product_prepare(place: Place, length: int) -> Prepare:
    """jaxstream's product chain in `place`, from a fresh leaf that requires grad."""

    def prepare() -> Callable[[], None]:
        import jaxstream as js

        with placed(place):
            leaf(place)  # raises PeerUnavailable where the place cannot run
            start = js.tensor(product_start(), device=place.device, backend=place.backend,
                              requires_grad=True)
            weight = js.tensor(product_weight(), device=place.device, backend=place.backend)
        wait = waiter(place)

        def forward() -> None:
            with placed(place):
                wait(product_chain(start, weight, length, js.linear))

        return forward

    return prepare


def torch_product_prepare(peer: str, length: int) -> Prepare:
    """PyTorch's product chain, with autograd, on the cpu ("torch") or the GPU ("cuda-torch")."""

    def prepare() -> Callable[[], object]:
        torch, device, synchronize = torch_place(peer)
        start = torch.tensor(product_start(), device=device, requires_grad=True)
        weight = torch.tensor(product_weight(), device=device)
        linear = torch.nn.functional.linear
        return lambda: (product_chain(start, weight, length, linear), synchronize())

    return prepare


def stream_work_prepare(place: Place, work: str, length: int) -> Prepare:
    """`length` calls of one stream work on `place`'s device, on a stream of its own."""

    def prepare() -> Callable[[], None]:
        import jaxstream as js

        with placed(place):
            leaf(place)
            stream, other = js.Stream(place.device), js.Stream(place.device)
            recorded = other.record_event()

        def switch() -> None:
            with js.stream(stream):
                pass

        call = {"record": stream.record_event, "wait": lambda: stream.wait_event(recorded),
                "switch": switch}[work]

        def run() -> None:
            with placed(place):
                for _ in range(length):
                    call()
                stream.synchronize()

        return run

    return prepare


def product_prepares(device: str, length: int) -> dict[str, Prepare]:
    """The product chain's peers: the calibrating places, and PyTorch."""
    found = {place.peer: product_prepare(place, length)
             for place in _places(PRODUCT_PEERS, device)}
    found["torch"] = torch_product_prepare("torch", length)
    if device == "cuda":
        found["cuda-torch"] = torch_product_prepare("cuda-torch", length)
    return found


def stream_prepares(device: str, work: str, length: int) -> dict[str, Prepare]:
    """One stream work's peers: the places that calibrate a device's stream work."""
    return {place.peer: stream_work_prepare(place, work, length)
            for place in _places(STREAM_PEERS, device)}


def rows(device: str, length: int, products: dict[str, Outcome],
         works: dict[str, dict[str, Outcome]]) -> list[dict[str, Any]]:
    """The table's rows of these passes: per op of a product, per call of a stream work."""
    calls = count(length)
    found = [
        _row(place, PRODUCT_PASS, calls, products[place.peer], products[place.torch])
        for place in _places(PRODUCT_PEERS, device)
    ]
    for work, outcomes in works.items():
        found += [_row(place, STREAM_WORK[work], calls, outcomes[place.peer], None)
                  for place in _places(STREAM_PEERS, device)]
    return found


def _row(place: Place, pass_: str, calls: int, timed: Outcome,
         torch: Outcome | None) -> dict[str, Any]:
    """A row with the columns of the chain's: jaxstream's time, PyTorch's where it was timed,
    no cpu or floor peer, so their ratios read n/a."""
    shown = {"jaxstream": timed, "host": None, "torch": torch, "floor": None}
    row: dict[str, Any] = {"pass": pass_, "place": place.label, "nodes": calls}
    row.update(peer_table.peer_times(shown, "us", 1e6 / calls))
    row.update(peer_table.ratio_of("jaxstream_over_host", timed, None))
    row.update(peer_table.ratio_of("jaxstream_over_torch", timed, torch))
    row.update(peer_table.ratio_of("jaxstream_over_floor", timed, None))
    row.update({"jaxstream_over_host_verdict": None, "jaxstream_over_host_target": None})
    row["timings"] = peer_table.timings({k: v for k, v in shown.items() if v is not None})
    return row


def parameters() -> dict[str, Any]:
    """These rows' entries of the experiment's parameters."""
    return {"products": {"shape": [SIDE, SIDE], "dtype": "float32", "weight": "identity",
                         "ops": f"the chain's length / {SHARE}"},
            "stream_work": {work: pass_ for work, pass_ in STREAM_WORK.items()}}
