"""Deep reentrant backward: each node's backward runs a backward of a fresh graph.

The workload is PyTorch's `test_deep_reentrant`: a Function whose backward
builds a one-node graph one level shorter and calls `backward()` on it, down to
the requested depth. Past `max_reentrant_depth` nested calls on a thread the
engine hands the nested graph to a pool thread; the timing covers the whole
backward, hand-offs included. jaxstream runs it with the caller on the cpu and
with the nodes on a `sim` device (its device worker thread), whatever `--device` says;
PyTorch on its cpu, also under `--device sim` (it has no sim device), and not at all
under `--device cuda`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache, partial
from typing import Any

from experiments.harness import peer_table
from experiments.harness.experiment import Experiment, RunOptions
from experiments.harness.intervals import SHOWN
from experiments.harness.peers import placement_note, require, torch_device
from experiments.harness.results import Column, ExperimentResult
from experiments.harness.timing import Case, Outcome, PeerUnavailable, Prepare, time_cases

PEERS = {
    "jaxstream-cpu": "jaxstream (cpu caller)",
    "jaxstream-sim": "jaxstream (sim device thread)",
    "torch": "PyTorch (cpu)",
}
RATIOS = {
    "cpu_over_torch": ("jaxstream-cpu", "torch"),
    "sim_over_cpu": ("jaxstream-sim", "jaxstream-cpu"),
}
"""Each ratio's (numerator, denominator) peers: against PyTorch, and the device thread's
hand-off against the caller's."""


@dataclass(frozen=True)
class Sizes:
    depths: tuple[int, ...]
    warmup: int
    repeat: int


SIZES = {
    "smoke": Sizes((50, 200), warmup=1, repeat=2),
    "quick": Sizes((200, 2_000), warmup=1, repeat=5),
    "full": Sizes((200, 2_000, 8_000), warmup=1, repeat=11),
}


@cache
def _deep_reentrant(framework_name: str) -> type:
    """The chain's Function in ``jaxstream`` or ``torch``, whose APIs here are the same."""
    framework = require(framework_name)

    class DeepReentrant(framework.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            with framework.enable_grad():
                ctx.x = x.detach().requires_grad_() - 1
            return ctx.x.detach()

        @staticmethod
        def backward(ctx: Any, g: Any) -> Any:
            if ctx.x.item() < 0:
                return g
            with framework.enable_grad():
                DeepReentrant.apply(ctx.x).sum().backward()
            return g

    return DeepReentrant


def _jaxstream_prepare(depth: int, device: str) -> Prepare:
    def prepare() -> Callable[[], None]:
        import jaxstream as js

        leaf = js.tensor(float(depth), requires_grad=True, device=device)
        loss = _deep_reentrant("jaxstream").apply(leaf).sum()
        return loss.backward

    return prepare


def _torch_prepare(depth: int, device: str) -> Prepare:
    def prepare() -> Callable[[], None]:
        torch = require("torch")
        if device == "cuda":
            raise PeerUnavailable("the reentrant chain is timed on the cpu only")
        leaf = torch.tensor(float(depth), requires_grad=True, device=torch_device(device))
        loss = _deep_reentrant("torch").apply(leaf).sum()
        return loss.backward

    return prepare


def _pool_threads() -> int:
    import jaxstream as js

    return sum("reentrant" in thread.name for thread in js.autograd.engine_threads())


def _checks(depths: tuple[int, ...]) -> dict[str, Any]:
    """Correct gradients at the largest depth, and parked pool threads reused by a shorter chain."""
    import jaxstream as js

    deepest, shortest = max(depths), min(depths)
    grads, threads = {}, {}
    for device in ("cpu", "sim:0"):
        js.autograd.shutdown_engine_threads()
        for depth in (deepest, shortest):
            leaf = js.tensor(float(depth), requires_grad=True, device=device)
            _deep_reentrant("jaxstream").apply(leaf).sum().backward()
            grads[f"{device} depth {depth}"] = leaf.grad.item()
            threads[f"{device} depth {depth}"] = _pool_threads()
    js.autograd.shutdown_engine_threads()
    return {
        "max_reentrant_depth": js.autograd.get_max_reentrant_depth(),
        "grads_all_one": all(value == 1.0 for value in grads.values()),
        "pool_threads_after": threads,
        "shorter_chain_reuses_pool_threads": all(
            threads[f"{device} depth {shortest}"] == threads[f"{device} depth {deepest}"]
            for device in ("cpu", "sim:0")
        ),
        "threads_left_after_shutdown": len(js.autograd.engine_threads()),
    }


def run(options: RunOptions) -> ExperimentResult:
    sizes = SIZES[options.mode]
    outcomes, failures = time_cases(
        [
            Case(
                f"depth {depth}",
                {
                    "jaxstream-cpu": _jaxstream_prepare(depth, "cpu"),
                    "jaxstream-sim": _jaxstream_prepare(depth, "sim:0"),
                    "torch": _torch_prepare(depth, options.device),
                },
                repeat=sizes.repeat,
                shown=f"depth {depth:,}",
            )
            for depth in sizes.depths
        ],
        warmup=sizes.warmup,
        progress=partial(options.progress, desc="deep_reentrant"),
    )
    rows = [_row(depth, found) for depth, found in zip(sizes.depths, outcomes, strict=True)]
    return ExperimentResult(
        columns=_columns(),
        rows=rows,
        parameters={
            "depths": list(sizes.depths),
            "warmup": sizes.warmup,
            "repeat": sizes.repeat,
            "peers": PEERS,
        },
        checks=_checks(sizes.depths),
        failures=failures,
        notes=[
            "Time of one whole backward of the chain, per level (each level runs a small "
            "forward and a nested backward). Peers are sampled round-robin; compare ratios "
            "within a run. The checks record the gradients, the pool threads started, and "
            "that a shorter chain reuses them.",
            *placement_note(options.device, ("torch",) if options.device == "sim" else ()),
        ],
        plot=partial(
            peer_table.ratio_figure,
            rows=rows,
            ratios={name: f"{PEERS[n]} / {PEERS[d]}" for name, (n, d) in RATIOS.items()},
            groups=[f"depth {row['depth']:,}" for row in rows],
            title="Deep reentrant backward, per level",
            ylabel=f"time ratio (median, {SHOWN})",
        ),
    )


def _row(depth: int, outcomes: dict[str, Outcome]) -> dict[str, Any]:
    row: dict[str, Any] = {"depth": depth}
    row.update(peer_table.peer_times(outcomes, "us_per_level", 1e6 / depth))
    for name, (numerator, denominator) in RATIOS.items():
        row.update(peer_table.ratio_of(name, outcomes[numerator], outcomes[denominator]))
    row["timings"] = peer_table.timings(outcomes)
    return row


def _columns() -> list[Column]:
    return [
        Column("depth", ("depth",), "{:,}"),
        *peer_table.peer_columns(PEERS, "us_per_level", "{label} us/level", "{:.1f}"),
        *(peer_table.ratio_column(f"{PEERS[n]} / {PEERS[d]}", name)
          for name, (n, d) in RATIOS.items()),
    ]


EXPERIMENT = Experiment(
    name="deep_reentrant",
    description="Reentrant backward chains thousands of levels deep (pool-thread hand-off), "
    "on the cpu and a sim device, against PyTorch.",
    run=run,
)
