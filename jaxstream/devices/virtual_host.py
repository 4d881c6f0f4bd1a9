"""The host side of virtual time: what jaxstream's host spends issuing each op, and its track.

Note [Virtual time] in virtual_time.py says how the clock charges the host. The
figures it charges are a calibration per GPU profile and per backend, stored in
`virtual_host_costs.json` beside this module: `make gpu-check` measures them on
a GPU (experiments/device_overhead, on cuda) and stores them under the GPU's
profile; a profile that was never measured gets the "default" entry, measured
the same way on a CPU (sim with the stream checks off, and cuda over the CuPy
stand-in). `JAXSTREAM_HOST_COSTS` names another file of the same form.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HOST_COSTS_ENV = "JAXSTREAM_HOST_COSTS"
HOST_COSTS_FILE = Path(__file__).with_name("virtual_host_costs.json")
DEFAULT_ENTRY = "default"
DEFAULT_BACKEND = "cupy"
"""jaxstream's arrays on a GPU are CuPy's unless they are JAX's."""


STREAM_WORK = ("record", "wait", "switch")
"""The host's stream work besides launches: an event record, a wait on an event, a switch of
the current stream between two launches; each has its figure (`record_us`, ...)."""


@dataclass(frozen=True)
class HostCosts:
    """jaxstream's host seconds for one backend: per op of a forward (`op_s`, and
    `product_op_s` for a matrix product: None where unmeasured, `op_s` standing in), per
    node of a backward (`node_s`), and per stream work (`record_s`, `wait_s`, `switch_s`:
    None where unmeasured, costing nothing), besides the driver's launch call (the
    profile's).

    The clock charges them per kernel-launching op; a backward's op is charged
    `node_s / ops_per_node`, where `ops_per_node` is how many such ops a node of
    the calibrating workload dispatched, so that a backward of that workload
    costs `node_s` per node. `source` says where the figures were measured.
    """

    op_s: float
    node_s: float
    ops_per_node: float = 1.0
    source: str = "given"
    product_op_s: float | None = None
    record_s: float | None = None
    wait_s: float | None = None
    switch_s: float | None = None

    def __post_init__(self) -> None:
        seconds = (self.op_s, self.node_s, self.product_op_s, self.record_s, self.wait_s,
                   self.switch_s)
        if min(second or 0.0 for second in seconds) < 0 or self.ops_per_node <= 0:
            raise ValueError(
                f"host costs are non-negative seconds per op, per node and per stream work "
                f"over a positive count of ops per node; got op_s={self.op_s!r}, "
                f"node_s={self.node_s!r}, product_op_s={self.product_op_s!r}, "
                f"record_s={self.record_s!r}, wait_s={self.wait_s!r}, "
                f"switch_s={self.switch_s!r}, ops_per_node={self.ops_per_node!r}"
            )

    def per_op(self, in_backward: bool, product: bool = False) -> float:
        """The host seconds of one kernel-launching op, in a backward node or not, a matrix
        product or not (a backward's node is one figure whatever its ops)."""
        if in_backward:
            return self.node_s / self.ops_per_node
        return self.product_op_s if product and self.product_op_s is not None else self.op_s

    def stream_work(self, work: str) -> float:
        """The host seconds of one `work` of STREAM_WORK (none where it was not measured)."""
        return getattr(self, f"{work}_s") or 0.0

    def to_json(self) -> dict[str, float]:
        """The figures in microseconds, the unmeasured ones left out."""
        found = {"op_us": self.op_s, "node_us": self.node_s, "product_op_us": self.product_op_s,
                 **{f"{work}_us": getattr(self, f"{work}_s") for work in STREAM_WORK}}
        return {name: seconds * 1e6 for name, seconds in found.items() if seconds is not None
                } | {"ops_per_node": self.ops_per_node}


def costs_file() -> Path:
    """The calibration file read now: `JAXSTREAM_HOST_COSTS`, else the one beside this module."""
    return Path(os.environ.get(HOST_COSTS_ENV) or HOST_COSTS_FILE)


def read_calibration(path: Path | None = None) -> dict[str, Any]:
    """The calibration file's entries, by profile name (and "default")."""
    target = path or costs_file()
    try:
        return json.loads(target.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as error:
        raise RuntimeError(
            f"virtual time cannot read its host calibration {target}: {error}. Restore it "
            f"from the repository, or point {HOST_COSTS_ENV} at a file that `make gpu-check` "
            "wrote"
        ) from error


def _filled(figures: dict[str, float], default: dict[str, float] | None,
            from_default: bool) -> tuple[dict[str, float], list[str]]:
    """`figures`, with each stream work figure it lacks taken from the default entry's same
    backend (`default`), else 0 (unless it is that entry); and what was filled, said so."""
    found, said = dict(figures), []
    missing = [f"{work}_us" for work in STREAM_WORK if f"{work}_us" not in figures]
    lent = [name for name in missing if not from_default and default and name in default]
    if lent:
        found.update({name: default[name] for name in lent})
        said.append(f"{', '.join(lent)} from the default entry (measured on a CPU)")
    if unmeasured := [name for name in missing if name not in lent]:
        found.update(dict.fromkeys(unmeasured, 0.0))
        said.append(f"{', '.join(unmeasured)} not measured (no host cost)")
    if "product_op_us" not in figures:
        said.append("no product_op_us: op_us stands in for products")
    return found, said


def host_costs(profile: str, backend: str, path: Path | None = None) -> HostCosts:
    """`backend`'s calibration measured on `profile`'s GPU, else the default entry's; a
    figure the profile's entry lacks is filled as `_filled` says, and `source` says so."""
    entries = read_calibration(path)
    measured = entries.get(profile, {}).get("backends", {})
    entry = entries[profile] if backend in measured else entries[DEFAULT_ENTRY]
    figures = entry["backends"].get(backend)
    if figures is None:
        raise ValueError(
            f"no host costs for backend {backend!r}: the calibration holds "
            f"{', '.join(sorted({*measured, *entries[DEFAULT_ENTRY]['backends']}))}"
        )
    default = entries[DEFAULT_ENTRY]["backends"].get(backend)
    figures, filled = _filled(figures, default, entry is entries[DEFAULT_ENTRY])
    where = f"measured on the {profile} GPU" if backend in measured else "measured on a CPU"
    product = figures.get("product_op_us")
    return HostCosts(
        op_s=figures["op_us"] * 1e-6, node_s=figures["node_us"] * 1e-6,
        ops_per_node=figures["ops_per_node"],
        product_op_s=None if product is None else product * 1e-6,
        **{f"{work}_s": figures[f"{work}_us"] * 1e-6 for work in STREAM_WORK},
        source="; ".join([f"{where}, {entry['source']}", *filled]),
    )


def store_calibration(profile: str, backends: dict[str, HostCosts], source: str,
                      path: Path | None = None) -> Path:
    """Store `backends`' costs as `profile`'s entry of the calibration file; the others stay."""
    target = path or costs_file()
    entries = read_calibration(target) if target.exists() else {}
    entries[profile] = {
        "source": source,
        "backends": {name: costs.to_json() for name, costs in sorted(backends.items())},
    }
    written = target.with_name(f".{target.name}.new")
    written.write_text(json.dumps(entries, indent=2) + "\n", encoding="utf-8")
    written.replace(target)  # at once, for a reader in another process
    return target


LAUNCH = "launch"
STREAM = "stream"
"""The kinds of host span: launches, and stream work (records, waits, switches)."""


@dataclass
class HostSpan:
    """A stretch of host time spent on `ops` items of one `kind` back to back, the first
    `first`: launches, or stream work."""

    start: float
    end: float
    first: str
    ops: int = 1
    kind: str = LAUNCH

    @property
    def name(self) -> str:
        what = "launches" if self.kind == LAUNCH else "stream ops"
        return self.first if self.ops == 1 else f"{self.ops} {what}, {self.first} first"


@dataclass
class HostTrack:
    """The host's clock: one thread issuing in program order, and waiting on syncs."""

    now: float = 0.0
    busy: float = 0.0
    spans: list[HostSpan] = field(default_factory=list)

    def issue(self, name: str, seconds: float, kind: str = LAUNCH) -> float:
        """The host spends `seconds` issuing `name` (of `kind`); returns when it has issued it."""
        last = self.spans[-1] if self.spans else None
        if last is not None and last.end == self.now and last.kind == kind:
            last.end, last.ops = self.now + seconds, last.ops + 1
        else:
            self.spans.append(HostSpan(self.now, self.now + seconds, name, kind=kind))
        self.now += seconds
        self.busy += seconds
        return self.now

    def wait_until(self, time: float) -> None:
        """A host sync returns at `time` (or at once if that is past)."""
        self.now = max(self.now, time)
