"""Virtual time on sim devices: what a schedule of streams would take on a real GPU.

Note [Virtual time]
~~~~~~~~~~~~~~~~~~~
Under `js.sim.virtual_time(profile="auto")` a sim kernel still runs on the host,
for its values, and is also charged to a virtual clock of a GPU: "auto" is this
machine's GPU's profile where one describes it, else the default one (H100;
profiles.py):

- The host has its own clock, and it is one thread issuing in program order, as
  jaxstream's is on a GPU: an op cannot be issued before the host has finished
  issuing the previous one. Every kernel-launching op costs the host what
  jaxstream's own code spends on it on the backend predicted (`backend=`,
  CuPy's by default: the device guard, the current stream, recording the node,
  the array library's launch call) plus the driver's launch call
  (`profile.host_launch_s`), and its kernel is issued then: it cannot start
  earlier. A matrix product or convolution (kernel_cost.PRODUCT_OPS) costs the
  product figure instead: the libraries' product calls do more on the host. An
  op in a backward costs its share of a backward node instead (the engine's work
  per node, spread over the node's ops, its own stream entries among them).
  Views and broadcasts launch nothing and are charged nothing; a copy costs the
  driver's call only.
- Stream work costs the host too, and shows on its track as "stream" spans
  beside the launches: an event record (`Event.record`, half of a
  `wait_stream`), a wait (`wait_event`, the other half) and, in a forward, a
  switch of stream, charged where an op launches on another stream than the
  previous launch did (what entering and leaving `js.stream(s)` costs).
  Launches are asynchronous; only a host sync (`Stream.synchronize`,
  `Event.synchronize`, a successful `query`, `numpy()`/`item()` and every other
  host read) moves the host's clock forward to the point it waited for. With
  small kernels the device waits for the host and the makespan is the host's
  time: no stream can shorten it. Each clock says which it is (`verdict`:
  "host-bound" where the host spent longer issuing than the device spent
  running kernels, else "device-bound") and the share of the makespan the host
  spent issuing (`host_share`).
- Where the host's figures come from (virtual_host.py): a calibration per GPU
  profile and per backend (per op of a forward, per product, per node of a
  backward, per event record, wait and stream switch) that `make gpu-check`
  measures on the GPU (experiments/device_overhead on cuda: a tanh-and-multiply
  chain, a chain of products, and each stream work alone) and stores beside the
  profiles, and a default measured the same way on a CPU (sim, and cuda over
  the CuPy stand-in). An entry that lacks a figure (one stored before it was
  measured) takes the default entry's for the stream work, and its own op
  figure for products; its `source` says which. Not from the sim run itself:
  its host time is the host *running* each kernel, the sanitizer and sim's
  memory count, none of which a GPU run pays, and on another code path than
  the GPU backend's launch; subtracting them would leave a small difference of
  two large, noisy timings. A calibration measures the path the GPU runs, on
  the machine that runs it, and keeps a prediction a pure function of the
  schedule: the same program predicts the same time on every run, which tests
  can hold it to.
- Each stream runs its kernels in order. A kernel starts at the latest of its
  stream's previous kernel's end, its issue time and the times of the events
  its stream waits on; `record_event` marks the time the stream reaches it.
  The engine's own syncs go through `Stream.wait_event`, `wait_stream`,
  `synchronize` and `Event.record`, so they are counted (and charged) like a
  user's.
- A kernel's cost (kernel_cost.py) is its FLOPs, bytes and occupancy `o`: the
  fraction of the device's SMs it fills, `min(1, blocks needed / blocks the
  device holds at once)` from its output's size (a matmul fills one SM per
  128 x 128 output tile; a vector kernel one thread per four elements). Alone,
  it lasts `profile.kernel_latency_s + max(flops / peak_flops, bytes /
  peak_bandwidth) / o`: a kernel that fills a tenth of the SMs gets a tenth of
  the device's rates.
- Kernels share the device as processors share time, event by event: while
  kernels of occupancies o_1..o_n run past their latency, each advances at
  rate `1 / max(1, o_1 + ... + o_n)`. Small kernels on different streams
  (their o summing to at most 1) run side by side at full speed; large ones
  (o = 1 each) split the device, so streams gain them nothing but the launch
  latencies they hide. The launch latency itself fills nothing and overlaps freely.
- Copies to and from the host (`js.tensor(..., device="sim:0")`, `to()`,
  `numpy()`) run on the device's copy engine, at `profile.host_link`, shared
  between the copies in flight; copies between sim devices are modelled the same.
- Each sim device index is one GPU of the profile, with its own SMs and copy engine.

The simulation (virtual_schedule.py) runs lazily: kernels are queued as they
are launched and simulated only as far as a host sync needs, so a kernel
launched later (in host order) on another stream still shares the device with
the ones in flight; the rest runs when the block ends. Limits: no caches (a
kernel moves all its bytes from memory every time), no clock throttling or
power limit, one occupancy figure per kernel (it caps bandwidth as well as
FLOPs), two host costs per op (a product's, and the calibrating chain's tanh and
multiply for every other op, whatever its arguments: a reduction's or an
indexing op's own host work is not measured), one cost per backward node
whatever its ops, no host cost for creating an event or a stream, no
stream priorities, and every op is one kernel (views and broadcasts are free; a
real library may fuse or split kernels). A JAX backward node that runs as one
compiled call (with the stream checks off) dispatches no op the clock can see:
predict JAX's backward with the checks on.
"""

from __future__ import annotations

import json
import os
import threading
import weakref
from pathlib import Path
from typing import Any

from .kernel_cost import KernelCost
from .profiles import AUTO, DeviceProfile, get_profile
from .virtual_host import DEFAULT_BACKEND, LAUNCH, STREAM, HostCosts, HostSpan, HostTrack
from .virtual_host import host_costs as calibrated
from .virtual_schedule import Kernel, Marker, Schedule, Wait

__all__ = ["VirtualClock", "active", "virtual_time"]

HOST_BOUND = "host-bound"
DEVICE_BOUND = "device-bound"

_switch = threading.Lock()
_active: VirtualClock | None = None
_timed_kinds: list[Any] = []
"""The device kinds whose `virtual_clock` is the open clock (sim's), None while none is:
what the watchers' bus reads (Note [The watchers' bus] in device_events.py)."""


def times_kind(kind: Any) -> None:
    """Make `kind.virtual_clock` the open clock while one is open."""
    _timed_kinds.append(kind)


class VirtualClock:
    """The virtual time of the sim kernels launched while it is open (a context manager).

    Read `makespan`, `busy(stream)`, `kernels`, the host's share and the verdict, and the
    trace after the block ends. `backend` names the jaxstream backend whose host costs the
    ops are charged ("cupy", "jax"; "numpy" for the CPU's own); `host_costs` gives them
    instead of the calibration (Note [Virtual time]).
    """

    def __init__(self, profile: str | DeviceProfile = AUTO, *, backend: str = DEFAULT_BACKEND,
                 host_costs: HostCosts | None = None) -> None:
        self.profile = get_profile(profile)
        self.host_costs = host_costs or calibrated(self.profile.name, backend)
        self._lock = threading.RLock()
        self._schedule = Schedule()
        self._host = HostTrack()
        self._events: weakref.WeakKeyDictionary[Any, Marker] = weakref.WeakKeyDictionary()
        self._state = "new"
        self._labels: dict[Any, str] = {}
        self._last_stream: Any = None

    def __enter__(self) -> VirtualClock:
        global _active
        with _switch:
            if _active is not None:
                raise RuntimeError(
                    "js.sim.virtual_time blocks cannot be nested (one virtual clock is already "
                    f"open, with profile {_active.profile.name!r}); end it first"
                )
            if self._state != "new":
                raise RuntimeError(
                    "this virtual clock was already used; open a new one with "
                    "js.sim.virtual_time(...)"
                )
            self._state = "open"
            _active = self
            for kind in _timed_kinds:
                kind.virtual_clock = self
        return self

    def __exit__(self, *exc_info: object) -> None:
        global _active
        with _switch:
            _active = None
            for kind in _timed_kinds:
                kind.virtual_clock = None
        with self._lock:
            self._host.wait_until(self._schedule.run_all())
            self._state = "closed"

    def __repr__(self) -> str:
        return f"<VirtualClock ({self._state}) profile={self.profile.name!r}>"

    # ------------------------------------------------ what the watchers' bus calls
    # (Note [The watchers' bus] in device_events.py.) A call that read the clock just before
    # the block ended finds it closed and does nothing.
    def op_host_s(self, in_backward: bool, product: bool = False) -> float:
        """What the host spends on the op it launches now, besides the driver's call: a
        forward's op (a matrix `product`'s or another's), or (`in_backward`) a share of a
        backward node."""
        return self.host_costs.per_op(in_backward, product)

    def _stream_work(self, work: str, name: str) -> None:
        """The host spends its `work` figure (record, wait, switch) on `name`; a free one
        leaves no span."""
        seconds = self.host_costs.stream_work(work)
        if seconds > 0.0:
            self._host.issue(name, seconds, STREAM)

    def launch(self, stream: Any, name: str, cost: KernelCost, host_s: float = 0.0,
               switches: bool = False) -> None:
        """A kernel `name` launched on `stream` now, in host order, after `host_s` of the
        host's own work and the driver's call; where `switches` and the previous launch was
        on another stream, after a stream switch too."""
        with self._lock:
            if self._state != "open":
                return
            previous, self._last_stream = self._last_stream, stream
            if switches and previous is not None and previous != stream:
                self._stream_work("switch", "stream switch")
            issued = self._host.issue(name, host_s + self.profile.host_launch_s)
            self._labels.setdefault(stream, f"{stream.device} stream {stream.id}")
            kernel = Kernel(
                name=name, stream=stream, pool=(stream.device, cost.engine), ready=issued,
                latency=self.profile.kernel_latency_s, work=cost.work_seconds(),
                occupancy=cost.occupancy,
                details={"flops": cost.flops, "bytes": cost.bytes, "occupancy": cost.occupancy,
                         "engine": cost.engine},
            )
            self._schedule.push(stream, kernel)

    def record(self, stream: Any, event: Any) -> None:
        """`event` is recorded on `stream`: it marks the stream's current end."""
        with self._lock:
            if self._state != "open":
                return
            self._stream_work("record", "record_event")
            marker = Marker(ready=self._host.now)
            self._schedule.push(stream, marker)
            self._events[event] = marker

    def wait(self, stream: Any, event: Any) -> None:
        """`stream` waits for `event` (one recorded before the clock opened counts as reached)."""
        with self._lock:
            if self._state != "open":
                return
            self._stream_work("wait", "wait_event")
            marker = self._events.get(event)
            if marker is not None:
                self._schedule.push(stream, Wait(ready=self._host.now, marker=marker))

    def host_sync(self, stream: Any) -> None:
        """The host waits for everything queued on `stream` so far."""
        with self._lock:
            if self._state != "open":
                return
            marker = Marker(ready=self._host.now)
            self._schedule.push(stream, marker)
            self._host.wait_until(self._schedule.run_until(marker))

    def host_sync_device(self, dev: Any) -> None:
        """The host waits for every stream of `dev` that has run a kernel."""
        for stream in [s for s in list(self._labels) if s.device == dev]:
            self.host_sync(stream)

    def host_sync_event(self, event: Any) -> None:
        """The host waits for `event`."""
        with self._lock:
            marker = self._events.get(event)
            if marker is not None and self._state == "open":
                self._host.wait_until(self._schedule.run_until(marker))

    # --------------------------------------------------------------------- the results
    def _closed(self, what: str) -> Schedule:
        if self._state != "closed":
            raise RuntimeError(
                f"clock.{what} is known once the `with js.sim.virtual_time(...)` block has "
                f"ended; this clock is {self._state} (read it after the block)"
            )
        return self._schedule

    @property
    def makespan(self) -> float:
        """Seconds from the block's start until the host and every stream were done."""
        self._closed("makespan")
        return self._host.now

    @property
    def host_busy(self) -> float:
        """Seconds the host spent issuing launches and stream work (not waiting on syncs)."""
        self._closed("host_busy")
        return self._host.busy

    @property
    def host_share(self) -> float:
        """The share of the makespan the host spent issuing (0 for an empty block)."""
        return self.host_busy / self.makespan if self.makespan else 0.0

    @property
    def device_busy(self) -> float:
        """Seconds during which some kernel (or copy) of any stream was in flight."""
        covered, reached = 0.0, 0.0
        for kernel in sorted(self._closed("device_busy").kernels, key=lambda k: k.start):
            covered += max(0.0, kernel.end - max(kernel.start, reached))
            reached = max(reached, kernel.end)
        return covered

    @property
    def verdict(self) -> str:
        """"host-bound" where the host spent at least as long issuing as the device spent
        running, so that no stream could shorten the makespan; else "device-bound"."""
        return HOST_BOUND if self.host_busy >= self.device_busy else DEVICE_BOUND

    @property
    def host_spans(self) -> list[HostSpan]:
        """The host's stretches of issuing, each of launches (or of stream work) back to
        back (`kind`)."""
        self._closed("host_spans")
        return list(self._host.spans)

    @property
    def kernels(self) -> list[Kernel]:
        """Every kernel in launch order, with its virtual `start`, `end` and `details`."""
        return list(self._closed("kernels").kernels)

    def busy(self, stream: Any) -> float:
        """Seconds during which a kernel of `stream` was in flight (launch latency included)."""
        return sum(k.end - k.start for k in self._closed("busy").kernels if k.stream == stream)

    def streams(self) -> list[Any]:
        """The streams that ran kernels, in the order of their first kernel."""
        return list(dict.fromkeys(k.stream for k in self._closed("streams").kernels))

    def label(self, stream: Any) -> str:
        """A stream's name in traces and timelines: "sim:0 stream 3"."""
        return self._labels[stream]

    def chrome_trace(self) -> dict[str, Any]:
        """The kernels in the Trace Event Format: a process per device, a track per stream,
        and the host's issuing above them (process 0)."""
        kernels = self._closed("chrome_trace").kernels
        devices = {str(s.device): i + 1 for i, s in enumerate(self.streams())}
        trace: list[dict[str, Any]] = [
            {"name": "process_name", "ph": "M", "pid": 0, "tid": 0,
             "args": {"name": f"host (virtual, {self.host_costs.source})"}},
            *({"name": span.name, "cat": f"host {span.kind}", "ph": "X",
               "ts": span.start * 1e6, "dur": (span.end - span.start) * 1e6, "pid": 0,
               "tid": 0, "args": {"launches" if span.kind == LAUNCH else "stream_ops": span.ops}}
              for span in self._host.spans),
        ]
        for name, pid in devices.items():
            trace.append({"name": "process_name", "ph": "M", "pid": pid, "tid": 0,
                          "args": {"name": f"{name} (virtual {self.profile.description})"}})
        for stream in self.streams():
            trace.append({"name": "thread_name", "ph": "M", "pid": devices[str(stream.device)],
                          "tid": stream.id, "args": {"name": f"stream {stream.id}"}})
        for kernel in kernels:
            trace.append({
                "name": kernel.name, "cat": kernel.details["engine"], "ph": "X",
                "ts": kernel.start * 1e6, "dur": (kernel.end - kernel.start) * 1e6,
                "pid": devices[str(kernel.stream.device)], "tid": kernel.stream.id,
                "args": {**kernel.details, "issued_us": kernel.ready * 1e6},
            })
        return {"traceEvents": trace, "displayTimeUnit": "ms",
                "otherData": {"producer": "jaxstream.sim.virtual_time",
                              "profile": self.profile.name, "makespan_s": self.makespan,
                              "host_share": self.host_share, "verdict": self.verdict}}

    def export_chrome_trace(self, path: str | os.PathLike[str]) -> Path:
        """Write `chrome_trace()` as JSON to `path` (open it in Perfetto); returns the path."""
        target = Path(path)
        target.write_text(json.dumps(self.chrome_trace()), encoding="utf-8")
        return target


def virtual_time(profile: str | DeviceProfile = AUTO, *, backend: str = DEFAULT_BACKEND,
                 host_costs: HostCosts | None = None) -> VirtualClock:
    """A virtual clock for the sim kernels launched inside `with` (Note [Virtual time])."""
    return VirtualClock(profile, backend=backend, host_costs=host_costs)


def active() -> VirtualClock | None:
    """The open virtual clock, if any."""
    return _active
