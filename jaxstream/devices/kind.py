"""The device-kind interface: what differs between `cpu`, `sim` and `cuda`.

Each device type has one `DeviceKind` object (`Device.kind`), and code that
needs a stream, an event, a device guard or the sanitizer's policy asks it
instead of testing the type's name, so that a new accelerator is one more kind.
The base class is a device without streams (the cpu): its work runs on the
calling thread in order, so it has no native streams or events and nothing to
enter.
"""

from __future__ import annotations

from collections.abc import Iterable
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any

from .env_switch import EnvSwitch
from .xla import host_device

if TYPE_CHECKING:
    from . import Device

# Checking `cuda` streams costs a lock per kernel, so it is asked for with this
# variable set to "1"; `sim` streams are checked unless it is "0" (to time them).
# It is read at every launch (Note [Reading a switch on every op] in env_switch.py).
STREAM_CHECK_ENV = "JAXSTREAM_STREAM_CHECK"
STREAM_CHECK = EnvSwitch(STREAM_CHECK_ENV)

# Note [Device guards]
# ~~~~~~~~~~~~~~~~~~~~
# A CUDA runtime call that names a stream (a kernel launch, an event record, a
# wait, a synchronize) acts on the thread's *current device*; the legacy default
# stream is not even an object of its own: handle 0 means "the default stream
# of whatever device is current". Issued under the wrong device, such a call
# fails or, worse, silently acts on the wrong device's default stream. So every
# runtime call jaxstream issues for a stream of device d runs under d's device
# guard (`DeviceKind.guard(d.index)`): the Stream and Event methods, the op
# dispatcher's launch, host copies, DLPack hand-offs. `sim` models this: its
# runtime keeps a current device per thread (0 until changed, as in CUDA), and
# an operation on a stream of another device raises `DeviceGuardError`
# (`DeviceKind.check_current`), so a missing guard shows on a CPU.


class DeviceGuardError(RuntimeError):
    """A runtime call on a stream of one device, issued while another device is current."""


class DeviceKind:
    """One device type. Native objects are those of the accelerator's runtime (CuPy's for cuda).

    The defaults describe a device without streams or native runtime.
    """

    name = ""
    has_streams = False
    # Whether the device's arrays are host arrays tagged with the device (sim's are):
    # a host array can then be placed on it without a copy, and exporting one is a host read.
    host_memory = True
    # The virtual-time clock that sim kernels advance while one runs (see DESIGN.md,
    # "Virtual time on sim devices"); None where none runs.
    virtual_clock: Any = None
    # Whether `allocate` charges new buffers to a count of the device's memory (sim's model).
    counts_memory = False

    def device_count(self) -> int:
        """How many devices of this kind exist."""
        return 1

    def check_exists(self, dev: Device) -> None:
        """Raise a clear error if `dev` is not there (a missing index, a missing runtime)."""

    def new_native_stream(self, index: int, priority: int) -> Any:
        """A new native stream on device `index`; None where streams carry only ordering."""
        return None

    def default_native_stream(self, index: int) -> Any:
        """The native default stream of device `index` (used under its guard); None if none."""
        return None

    def xla_native_stream(self, index: int) -> Any:
        """XLA's own stream of device `index` (see `js.xla_stream`); None where not native."""
        return None

    def new_native_event(self, index: int) -> Any:
        """A new native event on device `index`; None where there is none."""
        return None

    def consumer_stream_handles(self, index: int) -> tuple[int, ...]:
        """The handles of live streams of device `index` that the array libraries of this
        process name now, as a DLPack consumer passes them (Note [DLPack streams] in
        conversions.py); none where the runtime has no stream handles."""
        return ()

    def jax_device(self, index: int | None) -> Any:
        """The JAX device that holds JAX arrays of device `index`; None where JAX has none.

        Note [JAX devices of jaxstream devices] in xla.py.
        """
        return host_device()

    def guard(self, index: int) -> AbstractContextManager:
        """A context in which device `index` is the native runtime's current device."""
        return nullcontext()

    def make_current(self, index: int) -> None:
        """Make device `index` the native runtime's current device for this thread."""

    def is_current(self, index: int) -> bool:
        """Whether device `index` is the native runtime's current device for this thread
        already, so that its guard would change nothing (true where there is no runtime)."""
        return True

    def check_current(self, index: int, what: str, *args: object) -> None:
        """Raise DeviceGuardError if a call on device `index` is issued off its device.

        `what % args` names the call; it is formatted only for the error. See Note
        [Device guards]. A real runtime cannot tell: this is the sim's model.
        """

    def sanitized(self) -> bool:
        """Whether the stream sanitizer checks this kind's streams (asked at every check)."""
        return False

    def allocate(self, index: int, buffers: Iterable[object], op: str) -> None:
        """Charge the buffers a launch of `op` makes to device `index`'s memory; raise
        OutOfMemoryError (memory.py) where they do not fit.

        Nothing to charge where the runtime's allocator counts its own (CuPy's pool) or
        the memory is the host's: sim's count is a model, Note [Sim device memory].
        """

    def synchronize(self, index: int) -> None:
        """Block the host until the work queued on every native stream of device `index` is done.

        Nothing to wait for where the host runs the kernels (sim) or there are none (cpu).
        """

    def completion_event(self, stream: Any) -> Any:
        """A native event (with `.done`) that completes with the work queued on `stream` so far.

        None where only the host can tell, because the host runs the kernels:
        then a `record_stream` hold lasts until the host's clock passes them.
        Called from finalizers, so it must take no lock of jaxstream's.
        """
        return None


class CpuKind(DeviceKind):
    """The host: no streams; its work runs on the thread that launches it."""

    name = "cpu"
