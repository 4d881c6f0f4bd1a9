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
from typing import TYPE_CHECKING

from .kind import DeviceGuardError, DeviceKind
from .profiles import DeviceProfile
from .virtual_time import VirtualClock

if TYPE_CHECKING:
    from . import Device


class SimDevices:
    """`js.sim`: the simulated accelerators.

    How many exist comes from `JAXSTREAM_SIM_DEVICES` (default 2) until
    `set_device_count` changes it.
    """

    def __init__(self) -> None:
        self._count = int(os.environ.get("JAXSTREAM_SIM_DEVICES", "2"))
        self._lock = threading.Lock()

    def device_count(self) -> int:
        return self._count

    def set_device_count(self, n: int) -> None:
        if not isinstance(n, int) or n < 0:
            raise ValueError(f"the sim device count must be a non-negative int, got {n!r}")
        with self._lock:
            self._count = n

    def virtual_time(self, profile: str | DeviceProfile = "h100") -> VirtualClock:
        """`with js.sim.virtual_time("h100") as clock:` charges every sim kernel in the block to
        a virtual clock of that GPU (Note [Virtual time] in virtual_time.py)."""
        return VirtualClock(profile)


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
    """Streams without native objects; a current device per thread; always checked."""

    name = "sim"
    has_streams = True

    def __init__(self) -> None:
        self._runtime = _Runtime()

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

    def check_current(self, index: int, what: str) -> None:
        current = self._runtime.index
        if current != index:
            raise DeviceGuardError(
                f"{what}: issued while sim:{current} is the current device; a GPU would "
                f"act on sim:{current}'s default stream or fail. Enter the device first "
                f"(js.set_device('sim:{index}') or a js.stream block of that device); "
                f"see Note [Device guards]"
            )

    def sanitized(self) -> bool:
        return True
