"""A host stand-in for CuPy, so that jaxstream's `cuda` path runs on any machine.

Note [The CuPy stand-in]
~~~~~~~~~~~~~~~~~~~~~~~~
The stand-in has the signatures and the device rules of CuPy's `cupy.cuda`
(cupy/cuda/stream.pyx, device.pyx): a stream belongs to the device current when it was
made, entering it off that device raises as CuPy's does, an event belongs to the device
current when it was made and can be recorded only on a stream of that device (CUDA's
rule), and the legacy default stream (`Stream.null`) means the current device's. Each
thread has its current device (0 until changed) and its current stream per device.
Waits and synchronizations are logged (`Device.log`), so that a test can see under
which device each was issued.

Its arrays are NumPy's on the host, of a class per GPU (`ndarray_on(i)`): NumPy's own for
GPU 0, so that a kernel there costs what NumPy's does, and a subclass for each other GPU.
NumPy's ufuncs give back the class of their operands, and the other functions of the array
namespace (`xp`, NumPy's array API) tag what they make with the current device, so an
array says its GPU without a Python hook per kernel (`gpu_of`). jaxstream's `CupyBackend`
runs over the stand-in as it is (`StandInBackend` gives it the stand-in instead of importing
CuPy, and reads an array's GPU from its class where CuPy's arrays have `.device`), so with
`installed()` jaxstream's `cuda` kind, streams, events, guards, op dispatch and engine run
their GPU path, the kernels being NumPy's. What a GPU does with the work (asynchrony, the
memory pool) is left to a GPU; what the stand-in shows is the host's side of each op, which
is what jaxstream adds (experiments/device_overhead).
"""

from __future__ import annotations

import itertools
import threading
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cache, partial
from typing import Any

import array_api_compat.numpy as xnp
import numpy as np

DEVICE_COUNT = 2
_pointers = itertools.count(0x1000)


class _Runtime(threading.local):
    """The runtime's state per thread: its current device (0 until changed)."""

    device = 0


_local = _Runtime()

current_device: Callable[[], int] = partial(getattr, _local, "device")
"""This thread's current device in the stand-in's runtime: called with no Python frame,
as CuPy's `getDevice` is, since jaxstream asks for it on every op on a GPU."""


def set_current_device(index: int) -> None:
    _local.device = index


class Device:
    """`cupy.cuda.Device`: entering it makes its device current until the block ends."""

    log: list = []
    """("wait_event" | "stream synchronize" | "device synchronize", handle or id, device
    current when issued), in order."""

    def __init__(self, index: int | None = None) -> None:
        self.id = current_device() if index is None else index

    def __enter__(self) -> Device:
        saved = getattr(_local, "saved", None)
        if saved is None:
            saved = _local.saved = []
        saved.append(current_device())
        _local.device = self.id
        return self

    def __exit__(self, *exc: object) -> None:
        _local.device = _local.saved.pop()

    def use(self) -> None:
        _local.device = self.id

    def synchronize(self) -> None:
        Device.log.append(("device synchronize", self.id, current_device()))


class Event:
    """`cupy.cuda.Event`, of the device current when it is made."""

    def __init__(self, block: bool = False, disable_timing: bool = False,
                 interprocess: bool = False) -> None:
        self.device = current_device()
        self.recorded_on: Stream | None = None

    def record(self, stream: Stream | None = None) -> None:
        stream = stream or get_current_stream()
        if stream.resolved_device() != self.device:
            raise RuntimeError(f"event of device {self.device} recorded on a stream of "
                               f"device {stream.resolved_device()}")
        self.recorded_on = stream

    @property
    def done(self) -> bool:
        return True

    def synchronize(self) -> None:
        if self.recorded_on is None:
            raise RuntimeError("an event never recorded is synchronized")


class Stream:
    """`cupy.cuda.Stream`; `Stream.null` is the legacy default stream, `Stream.ptds` the
    per-thread one, each meaning the current device's."""

    null: Stream
    ptds: Stream

    def __init__(self, null: bool = False, non_blocking: bool = False, ptds: bool = False,
                 priority: int | None = None) -> None:
        self.ptr = 0 if null else 2 if ptds else next(_pointers)
        self.device_id = -1 if null or ptds else current_device()
        self.non_blocking, self.priority = non_blocking, priority or 0

    def resolved_device(self) -> int:
        return current_device() if self.device_id == -1 else self.device_id

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Stream) and other.ptr == self.ptr

    __hash__ = object.__hash__

    def __enter__(self) -> Stream:
        device = current_device()
        if self.device_id not in (-1, device):
            raise RuntimeError(f"The device that the stream is created on ({self.device_id}) "
                               f"does not match with the current device ({device})")
        _streams_of(device).append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        _streams_of(current_device()).pop()

    def record(self, event: Event | None = None) -> Event:
        event = event or Event()
        event.record(self)
        return event

    def wait_event(self, event: Event) -> None:
        Device.log.append(("wait_event", self.ptr, self.resolved_device()))

    def synchronize(self) -> None:
        Device.log.append(("stream synchronize", self.ptr, self.resolved_device()))

    @property
    def done(self) -> bool:
        return True


Stream.null = Stream(null=True)
Stream.ptds = Stream(ptds=True)


def _streams_of(device: int) -> list[Stream]:
    """This thread's stack of entered streams of `device`."""
    stacks = getattr(_local, "streams", None)
    if stacks is None:
        stacks = _local.streams = {}
    return stacks.setdefault(device, [])


def get_current_stream(device_id: int = -1) -> Stream:
    entered = _streams_of(current_device() if device_id == -1 else device_id)
    return entered[-1] if entered else Stream.null


class CudaRuntimeError(RuntimeError):
    pass


cuda = types.SimpleNamespace(
    Device=Device, Stream=Stream, Event=Event, get_current_stream=get_current_stream,
    runtime=types.SimpleNamespace(getDeviceCount=lambda: DEVICE_COUNT,
                                  getDevice=current_device, CUDARuntimeError=CudaRuntimeError),
)
"""What `cupy.cuda` offers that jaxstream calls."""


ndarray = np.ndarray
"""The stand-in's arrays: NumPy's (`ndarray_on`)."""


@cache
def ndarray_on(index: int) -> type[np.ndarray]:
    """The array class of GPU `index`: NumPy's own for GPU 0, so that a kernel on it costs
    what NumPy's does (a subclass costs NumPy about as much again per call on a small
    array), and a subclass that says its GPU for each other one."""
    if index == 0:
        return np.ndarray
    return type(f"ndarray_on_{index}", (np.ndarray,), {"__slots__": (), "gpu": index})


def gpu_of(array: Any) -> int:
    """The GPU an array of the stand-in is on."""
    return getattr(type(array), "gpu", 0)


def _here(array: np.ndarray) -> np.ndarray:
    """`array`'s memory as an array of the current device."""
    cls = ndarray_on(current_device())
    return array if type(array) is cls else array.view(cls)


def _tagging(function: Callable) -> Callable:
    """`function`, its plain NumPy results made arrays of the current device."""

    def tagged(*args: Any, **kwargs: Any) -> Any:
        out = function(*args, **kwargs)
        if type(out) is np.ndarray:
            return _here(out)
        if isinstance(out, list | tuple):
            return type(out)(_here(o) if type(o) is np.ndarray else o for o in out)
        return out

    return tagged


class _ArrayNamespace:
    """NumPy's array API namespace over the stand-in's arrays: its ufuncs as they are
    (they keep their operands' class), its other functions tagging what they make."""

    def __getattr__(self, name: str) -> Any:
        found = getattr(xnp, name)
        plain = not callable(found) or isinstance(found, np.ufunc | type)
        value = found if plain else _tagging(found)
        setattr(self, name, value)
        return value


xp = _ArrayNamespace()
"""What jaxstream's CuPy backend takes `array_api_compat.cupy` for."""


def asarray(data: Any, dtype: Any = None) -> np.ndarray:
    """`cupy.asarray`: an array of the current device (a copy unless it is one already)."""
    if type(data) is ndarray_on(current_device()):
        return data if dtype is None else data.astype(dtype, copy=False)
    return _here(np.array(data, dtype=dtype))


def array(data: Any) -> np.ndarray:
    """`cupy.array`: a copy on the current device."""
    return _here(np.array(data))


def copy(data: Any) -> np.ndarray:
    """`cupy.copy`: a copy on the current device (from another device too)."""
    return _here(np.array(data))


def zeros(shape: tuple, dtype: Any = float) -> np.ndarray:
    return _here(np.zeros(shape, dtype))


def asnumpy(data: Any, stream: Stream | None = None) -> np.ndarray:
    """`cupy.asnumpy`: a host copy."""
    return np.array(data.view(np.ndarray))


def from_dlpack(producer: Any) -> np.ndarray:
    return _here(np.array(np.from_dlpack(producer)))


module = types.SimpleNamespace(
    cuda=cuda, ndarray=ndarray, asarray=asarray, array=array, copy=copy, zeros=zeros,
    asnumpy=asnumpy, from_dlpack=from_dlpack,
)
"""The stand-in, as jaxstream's `cupy` module."""


@cache
def backend() -> Any:
    """jaxstream's CuPy backend over the stand-in (one object, as jaxstream's backends are)."""
    from jaxstream.backends.cupy import CupyBackend
    from jaxstream.devices import Device as JaxstreamDevice

    class StandInBackend(CupyBackend):
        """jaxstream's `CupyBackend`, given the stand-in instead of importing CuPy; where
        CuPy's arrays say their GPU (`array.device`), the stand-in's class does (`gpu_of`)."""

        def __init__(self) -> None:
            self._cupy = module
            self.xp = xp

        def normalize(self, array: Any) -> Any:
            """A 0-d array where NumPy's reductions give a scalar, as CuPy's give."""
            return _here(np.asarray(array)) if isinstance(array, np.generic) else array

        def device_of(self, array: Any) -> Any:
            return JaxstreamDevice("cuda", gpu_of(array))

        def placed(self, array: Any, device: Any) -> Any:
            return array if gpu_of(array) == device.index else self.to_device(array, device)

        def host_copy(self, array: Any) -> np.ndarray:
            with Device(gpu_of(array)):
                host = self._cupy.asnumpy(array)
            get_current_stream(gpu_of(array)).synchronize()
            return host

    return StandInBackend()


@contextmanager
def installed() -> Iterator[list]:
    """Within the block, jaxstream's `cuda` devices are the stand-in's two GPUs (so a thread's
    current device is cuda:0 until chosen, as on a GPU machine), its `cupy` backend runs on
    the stand-in's arrays and JAX has no GPU; yields `Device.log`, emptied.

    jaxstream's streams of cuda devices made before are set aside for the block, and those
    made in it are dropped after it; the stand-in's current device of this thread is 0 on
    entry and exit.
    """
    from jaxstream import backends, streams
    from jaxstream.devices import cuda as cuda_kind

    stand_in = backend()
    saved = (cuda_kind._cupy, cuda_kind.jax_gpus, cuda_kind.CudaKind.device_count,
             streams._default_streams, streams._xla_streams, backends._BY_NAME.get("cupy"))
    cuda_kind._cupy = cache(lambda: module)  # as jaxstream's own: no frame once cached
    cuda_kind.jax_gpus = lambda: ()
    cuda_kind.CudaKind.device_count = lambda self: DEVICE_COUNT
    cuda_kind.cuda_device_count.cache_clear()  # counted again, in and after the block
    streams._default_streams, streams._xla_streams = {}, {}
    backends._BY_NAME["cupy"] = stand_in
    classes = [ndarray_on(index) for index in range(1, DEVICE_COUNT)]  # GPU 0's are NumPy's
    for cls in classes:
        backends._BY_TYPE[cls] = stand_in
    Device.log = []
    set_current_device(0)
    try:
        yield Device.log
    finally:
        (cuda_kind._cupy, cuda_kind.jax_gpus, cuda_kind.CudaKind.device_count,
         streams._default_streams, streams._xla_streams, previous) = saved
        cuda_kind.cuda_device_count.cache_clear()
        if previous is None:
            backends._BY_NAME.pop("cupy", None)
        else:
            backends._BY_NAME["cupy"] = previous
        for cls in classes:
            backends._BY_TYPE.pop(cls, None)
        set_current_device(0)
