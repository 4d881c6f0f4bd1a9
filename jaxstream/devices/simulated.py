"""`sim`: simulated accelerators, host arrays tagged with a device.

A `sim` kernel runs synchronously on the host, so a `sim` stream has no native
counterpart: what it carries is the ordering, which the stream sanitizer always
checks. The sim runtime keeps what CUDA's keeps per thread, a current device
(0 until changed), and refuses a call on a stream of another device, which a
GPU would get wrong: Note [Device guards] in kind.py.
"""

from __future__ import annotations

import os
import threading
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from .kind import STREAM_CHECK, DeviceGuardError, DeviceKind
from .memory import SimMemory
from .profiles import AUTO, DeviceProfile
from .virtual_host import DEFAULT_BACKEND, HostCosts
from .virtual_time import VirtualClock, times_kind
from .xla import XlaStream, host_device, twin

if TYPE_CHECKING:
    from . import Device


class SimDevices:
    """`js.sim`: the simulated accelerators.

    How many exist comes from `JAXSTREAM_SIM_DEVICES` (default 2) until
    `set_device_count` changes it. Each counts the bytes of its live buffers and may
    be given a memory limit (Note [Sim device memory] in memory.py).
    """

    def __init__(self) -> None:
        self._count = int(os.environ.get("JAXSTREAM_SIM_DEVICES", "2"))
        self._lock = threading.Lock()
        self.memory = SimMemory()

    def device_count(self) -> int:
        return self._count

    def set_device_count(self, n: int) -> None:
        if not isinstance(n, int) or n < 0:
            raise ValueError(f"the sim device count must be a non-negative int, got {n!r}")
        with self._lock:
            self._count = n

    def set_memory_limit(self, device: int | str | Device, limit: int | None) -> None:
        """Make an allocation on `device` that would take its live bytes past `limit` raise
        `OutOfMemoryError`, as a full GPU does; None lifts the limit."""
        if limit is not None and (not isinstance(limit, int) or limit < 0):
            raise ValueError(
                f"a sim memory limit is a non-negative number of bytes or None, got {limit!r}"
            )
        self.memory.set_limit(self._index_of(device), limit)

    def memory_limit(self, device: int | str | Device) -> int | None:
        """`device`'s memory limit in bytes, None when it has none."""
        return self.memory.limit(self._index_of(device))

    def memory_allocated(self, device: int | str | Device) -> int:
        """The bytes of the live buffers made on `device` (those a `record_stream` holds too)."""
        return self.memory.in_use(self._index_of(device))

    def _index_of(self, device: int | str | Device) -> int:
        """The index of sim device `device`: an index, "sim:N" or a sim Device."""
        index = device if isinstance(device, int) else getattr(device, "index", None)
        if isinstance(device, str):
            kind, _, number = device.partition(":")
            number = number or "0"
            index = int(number) if kind == "sim" and number.isdigit() else None
        elif getattr(device, "type", "sim") != "sim":
            index = None
        if index is None or index < 0 or index >= self._count:
            raise ValueError(
                f"{device!r} is not a sim device: pass an index, 'sim:N' or js.device('sim:N'), "
                f"N below js.sim.device_count() ({self._count})"
            )
        return index

    def virtual_time(self, profile: str | DeviceProfile = AUTO, *,
                     backend: str = DEFAULT_BACKEND,
                     host_costs: HostCosts | None = None) -> VirtualClock:
        """`with js.sim.virtual_time("h100") as clock:` charges every sim kernel in the block,
        and the host's work issuing it on `backend`, to a virtual clock of that GPU ("auto":
        this machine's; Note [Virtual time] in virtual_time.py)."""
        return VirtualClock(profile, backend=backend, host_costs=host_costs)


sim = SimDevices()


class _Runtime(threading.local):
    """The sim runtime's state per thread: its current device index, as CUDA's."""

    def __init__(self) -> None:
        self.index = 0


class _Guard:
    """`with SimKind.guard(i):` device i is this thread's current one until the block ends.

    A class rather than a generator: every op on a sim tensor enters one.
    """

    __slots__ = ("_runtime", "_index", "_saved")

    def __init__(self, runtime: _Runtime, index: int) -> None:
        self._runtime = runtime
        self._index = index

    def __enter__(self) -> None:
        runtime = self._runtime
        self._saved, runtime.index = runtime.index, self._index

    def __exit__(self, *exc: object) -> None:
        self._runtime.index = self._saved


class SimKind(DeviceKind):
    """Streams without native objects; a current device per thread; checked unless the
    stream check is switched off."""

    name = "sim"
    has_streams = True
    counts_memory = True

    def __init__(self) -> None:
        self._runtime = _Runtime()
        times_kind(self)  # `virtual_clock` is the open clock: Note [Virtual time]
        # Bound once, as methods of this kind: every op on a sim device asks both.
        # The checks are on unless turned off, for timing (`JAXSTREAM_STREAM_CHECK=0`).
        self.sanitized = STREAM_CHECK.is_not_zero
        # Note [Sim device memory] in memory.py.
        self.allocate = sim.memory.allocate

    def device_count(self) -> int:
        return sim.device_count()

    def check_exists(self, dev: Device) -> None:
        count = self.device_count()
        if dev.index >= count:
            raise ValueError(
                f"{dev} does not exist: there are {count} sim devices "
                f"(change the number with js.sim.set_device_count)"
            )

    def guard(self, index: int) -> AbstractContextManager:
        return _Guard(self._runtime, index)

    def make_current(self, index: int) -> None:
        self._runtime.index = index

    def current_index(self) -> int:
        """This thread's current sim device index in the runtime (for tests and debugging)."""
        return self._runtime.index

    def is_current(self, index: int) -> bool:
        return self._runtime.index == index

    def check_current(self, index: int, what: str, *args: object) -> None:
        current = self._runtime.index
        if current != index:
            raise DeviceGuardError(
                f"{what % args}: issued while sim:{current} is the current device; a GPU would "
                f"act on sim:{current}'s default stream or fail. Enter the device first "
                f"(js.set_device('sim:{index}') or a js.stream block of that device); "
                f"see Note [Device guards]"
            )

    def jax_device(self, index: int | None) -> Any:
        # Note [The GPU twin] in xla.py: a host device of its own there, else the cpu's.
        return twin.device(index) if twin.enabled else host_device()

    def xla_native_stream(self, index: int) -> Any:
        return XlaStream(twin.device(index)) if twin.enabled else None
