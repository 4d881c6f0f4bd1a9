"""`sim`: simulated accelerators, host arrays tagged with a device.

A `sim` kernel runs synchronously on the host, so a `sim` stream has no native
counterpart: what it carries is the ordering, which the stream sanitizer always
checks.
"""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING

from .kind import DeviceKind
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


class SimKind(DeviceKind):
    """Streams without native objects; nothing to enter; always checked by the sanitizer."""

    name = "sim"
    has_streams = True

    def device_count(self) -> int:
        return sim.device_count()

    def check_exists(self, dev: Device) -> None:
        count = self.device_count()
        if dev.index >= count:
            raise ValueError(
                f"{dev} does not exist: there are {count} sim devices "
                f"(change the number with js.sim.set_device_count)"
            )

    def sanitized(self) -> bool:
        return True
