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


@dataclass(frozen=True)
class HostCosts:
    """jaxstream's host seconds for one backend: per op of a forward (`op_s`) and per node
    of a backward (`node_s`), besides the driver's launch call (the profile's).

    The clock charges them per kernel-launching op; a backward's op is charged
    `node_s / ops_per_node`, where `ops_per_node` is how many such ops a node of
    the calibrating workload dispatched, so that a backward of that workload
    costs `node_s` per node. `source` says where the figures were measured.
    """

    op_s: float
    node_s: float
    ops_per_node: float = 1.0
    source: str = "given"

    def __post_init__(self) -> None:
        if min(self.op_s, self.node_s) < 0 or self.ops_per_node <= 0:
            raise ValueError(
                f"host costs are non-negative seconds per op and per node over a positive "
                f"count of ops per node; got op_s={self.op_s!r}, node_s={self.node_s!r}, "
                f"ops_per_node={self.ops_per_node!r}"
            )

    def per_op(self, in_backward: bool) -> float:
        """The host seconds of one kernel-launching op, in a backward node or not."""
        return self.node_s / self.ops_per_node if in_backward else self.op_s

    def to_json(self) -> dict[str, float]:
        return {"op_us": self.op_s * 1e6, "node_us": self.node_s * 1e6,
                "ops_per_node": self.ops_per_node}


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


def host_costs(profile: str, backend: str, path: Path | None = None) -> HostCosts:
    """`backend`'s calibration measured on `profile`'s GPU, else the default entry's."""
    entries = read_calibration(path)
    measured = entries.get(profile, {}).get("backends", {})
    entry = entries[profile] if backend in measured else entries[DEFAULT_ENTRY]
    figures = entry["backends"].get(backend)
    if figures is None:
        raise ValueError(
            f"no host costs for backend {backend!r}: the calibration holds "
            f"{', '.join(sorted({*measured, *entries[DEFAULT_ENTRY]['backends']}))}"
        )
    where = f"measured on the {profile} GPU" if backend in measured else "measured on a CPU"
    return HostCosts(
        op_s=figures["op_us"] * 1e-6, node_s=figures["node_us"] * 1e-6,
        ops_per_node=figures["ops_per_node"], source=f"{where}, {entry['source']}",
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


@dataclass
class HostSpan:
    """A stretch of host time spent issuing `ops` launches back to back, the first `first`."""

    start: float
    end: float
    first: str
    ops: int = 1

    @property
    def name(self) -> str:
        return self.first if self.ops == 1 else f"{self.ops} launches, {self.first} first"


@dataclass
class HostTrack:
    """The host's clock: one thread issuing launches in program order, and waiting on syncs."""

    now: float = 0.0
    busy: float = 0.0
    spans: list[HostSpan] = field(default_factory=list)

    def issue(self, name: str, seconds: float) -> float:
        """The host spends `seconds` issuing `name`; returns when it has issued it."""
        last = self.spans[-1] if self.spans else None
        if last is not None and last.end == self.now:
            last.end, last.ops = self.now + seconds, last.ops + 1
        else:
            self.spans.append(HostSpan(self.now, self.now + seconds, name))
        self.now += seconds
        self.busy += seconds
        return self.now

    def wait_until(self, time: float) -> None:
        """A host sync returns at `time` (or at once if that is past)."""
        self.now = max(self.now, time)
