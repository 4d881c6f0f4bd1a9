"""Virtual time on sim devices: what a schedule of streams would take on a real GPU.

Note [Virtual time]
~~~~~~~~~~~~~~~~~~~
Under `js.sim.virtual_time(profile="h100")` a sim kernel still runs on the host,
for its values, and is also charged to a virtual clock:

- The host has its own clock. Launching a kernel costs the host
  `profile.host_launch_s`, and the kernel is issued then: it cannot start
  earlier. Launches are asynchronous; only a host sync (`Stream.synchronize`,
  `Event.synchronize`, a successful `query`, `numpy()`/`item()` and every other
  host read) moves the host's clock forward to the point it waited for.
- Each stream runs its kernels in order. A kernel starts at the latest of its
  stream's previous kernel's end, its issue time and the times of the events
  its stream waits on; `record_event` marks the time the stream reaches it.
  The engine's own syncs go through `Stream.wait_event`, `wait_stream`,
  `synchronize` and `Event.record`, so they are counted like a user's.
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
FLOPs), no host-side cost for events and waits, no stream priorities, and every
op is one kernel (views and broadcasts are free; a real library may fuse or
split kernels).
"""

from __future__ import annotations

import json
import os
import threading
import weakref
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from .kernel_cost import KernelCost, copy_cost, launches_kernel, op_cost
from .profiles import DeviceProfile, get_profile
from .virtual_schedule import Kernel, Marker, Schedule, Wait

__all__ = ["VirtualClock", "active", "virtual_time"]

_SIM = "sim"
_switch = threading.Lock()
_active: VirtualClock | None = None
_timed_kinds: list[Any] = []
"""The device kinds whose `virtual_clock` is the open clock (sim's), None while none is:
what the op dispatcher reads, instead of calling `on_op`, to skip a clock that is not open."""


def times_kind(kind: Any) -> None:
    """Make `kind.virtual_clock` the open clock while one is open."""
    _timed_kinds.append(kind)


class VirtualClock:
    """The virtual time of the sim kernels launched while it is open (a context manager).

    Read `makespan`, `busy(stream)`, `kernels` and the trace after the block ends.
    """

    def __init__(self, profile: str | DeviceProfile = "h100") -> None:
        self.profile = get_profile(profile)
        self._lock = threading.RLock()
        self._schedule = Schedule()
        self._host = 0.0
        self._events: weakref.WeakKeyDictionary[Any, Marker] = weakref.WeakKeyDictionary()
        self._state = "new"
        self._labels: dict[Any, str] = {}

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
            self._host = max(self._host, self._schedule.run_all())
            self._state = "closed"

    def __repr__(self) -> str:
        return f"<VirtualClock ({self._state}) profile={self.profile.name!r}>"

    # --------------------------------------------------------------- what the hooks call
    # A hook that read the clock just before the block ended finds it closed and does nothing.
    def launch(self, stream: Any, name: str, cost: KernelCost) -> None:
        """A kernel `name` launched on `stream` now, in host order."""
        with self._lock:
            if self._state != "open":
                return
            self._host += self.profile.host_launch_s
            self._labels.setdefault(stream, f"{stream.device} stream {stream.id}")
            kernel = Kernel(
                name=name, stream=stream, pool=(stream.device, cost.engine), ready=self._host,
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
            marker = Marker(ready=self._host)
            self._schedule.push(stream, marker)
            self._events[event] = marker

    def wait(self, stream: Any, event: Any) -> None:
        """`stream` waits for `event` (one recorded before the clock opened counts as reached)."""
        with self._lock:
            marker = self._events.get(event)
            if marker is not None and self._state == "open":
                self._schedule.push(stream, Wait(ready=self._host, marker=marker))

    def host_sync(self, stream: Any) -> None:
        """The host waits for everything queued on `stream` so far."""
        with self._lock:
            if self._state != "open":
                return
            marker = Marker(ready=self._host)
            self._schedule.push(stream, marker)
            self._host = max(self._host, self._schedule.run_until(marker))

    def host_sync_device(self, dev: Any) -> None:
        """The host waits for every stream of `dev` that has run a kernel."""
        for stream in [s for s in list(self._labels) if s.device == dev]:
            self.host_sync(stream)

    def host_sync_event(self, event: Any) -> None:
        """The host waits for `event`."""
        with self._lock:
            marker = self._events.get(event)
            if marker is not None and self._state == "open":
                self._host = max(self._host, self._schedule.run_until(marker))

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
        return self._host

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
        """The kernels in the Trace Event Format: a process per device, a track per stream."""
        kernels = self._closed("chrome_trace").kernels
        devices = {str(s.device): i + 1 for i, s in enumerate(self.streams())}
        trace: list[dict[str, Any]] = []
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
                              "profile": self.profile.name, "makespan_s": self._host}}

    def export_chrome_trace(self, path: str | os.PathLike[str]) -> Path:
        """Write `chrome_trace()` as JSON to `path` (open it in Perfetto); returns the path."""
        target = Path(path)
        target.write_text(json.dumps(self.chrome_trace()), encoding="utf-8")
        return target


def virtual_time(profile: str | DeviceProfile = "h100") -> VirtualClock:
    """A virtual clock for the sim kernels launched inside `with` (Note [Virtual time])."""
    return VirtualClock(profile)


def active() -> VirtualClock | None:
    """The open virtual clock, if any."""
    return _active


def _timed(stream: Any) -> VirtualClock | None:
    clock = _active
    if clock is None or stream is None or stream.device.type != _SIM:
        return None
    return clock


# The hooks below are what the op dispatcher, the copies and the streams call: each
# is one global read when no clock is open.


def on_op(stream: Any, op: Any, operands: Iterable[Any], params: Mapping[str, Any],
          out: Any) -> None:
    """Op `op` (its `name`; views launch no kernel) ran on `stream`."""
    clock = _timed(stream)
    if clock is not None and launches_kernel(op.name, op.view):
        clock.launch(stream, op.name, op_cost(op.name, operands, params, out, clock.profile))


def on_copy(stream: Any, array: Any) -> None:
    """`array` was copied onto `stream`'s device (from the host or another device)."""
    clock = _timed(stream)
    if clock is not None:
        clock.launch(stream, "copy to device", copy_cost(array, clock.profile))


def on_host_read(stream: Any, array: Any) -> None:
    """The host reads `array` on `stream`: a copy to the host, then a sync."""
    clock = _timed(stream)
    if clock is not None:
        clock.launch(stream, "copy to host", copy_cost(array, clock.profile))
        clock.host_sync(stream)


def on_record(stream: Any, event: Any) -> None:
    clock = _timed(stream)
    if clock is not None:
        clock.record(stream, event)


def on_wait(stream: Any, event: Any) -> None:
    clock = _timed(stream)
    if clock is not None:
        clock.wait(stream, event)


def on_host_sync(stream: Any) -> None:
    clock = _timed(stream)
    if clock is not None:
        clock.host_sync(stream)


def on_device_sync(dev: Any) -> None:
    clock = _active
    if clock is not None and dev.type == _SIM:
        clock.host_sync_device(dev)


def on_host_sync_event(event: Any) -> None:
    clock = _timed(event.stream)
    if clock is not None:
        clock.host_sync_event(event)
