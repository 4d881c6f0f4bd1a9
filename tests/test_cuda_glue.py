"""jaxstream's cuda kind against a stand-in for CuPy's stream API, run on any machine.

The stand-in has the signatures and the device rules of CuPy's `cupy.cuda`
(cupy/cuda/stream.pyx, device.pyx): a stream belongs to the device current when
it was made, entering it off that device raises as CuPy's does, an event
belongs to the device current when it was made and can be recorded only on a
stream of that device (CUDA's rule), and the legacy default stream
(`Stream.null`) means the current device's. So every call `jaxstream.devices.cuda`
and `jaxstream.streams` make into CuPy runs here, with the guards checked; what
the GPU itself does is left to the `cuda`-marked tests.
"""

from __future__ import annotations

import itertools
import threading
import types

import jax
import pytest

import jaxstream as js
from jaxstream import streams
from jaxstream.devices import cuda as cuda_kind

pytestmark = pytest.mark.usefixtures("no_leaked_threads")  # conftest.py

_local = threading.local()
_pointers = itertools.count(0x1000)


def _current() -> int:
    return getattr(_local, "device", 0)


class FakeDevice:
    log: list = []

    def __init__(self, index: int = None) -> None:
        self.id = _current() if index is None else index

    def __enter__(self) -> FakeDevice:
        _local.saved = [*getattr(_local, "saved", []), _current()]
        _local.device = self.id
        return self

    def __exit__(self, *exc: object) -> None:
        _local.device = _local.saved.pop()

    def use(self) -> None:
        _local.device = self.id

    def synchronize(self) -> None:
        FakeDevice.log.append(("device synchronize", self.id, _current()))


class FakeEvent:
    def __init__(self, block: bool = False, disable_timing: bool = False,
                 interprocess: bool = False) -> None:
        self.device = _current()
        self.recorded_on = None

    def record(self, stream: FakeStream | None = None) -> None:
        stream = stream or get_current_stream()
        if stream.resolved_device() != self.device:
            raise RuntimeError(f"event of device {self.device} recorded on a stream of "
                               f"device {stream.resolved_device()}")
        self.recorded_on = stream

    @property
    def done(self) -> bool:
        return True

    def synchronize(self) -> None:
        assert self.recorded_on is not None


class FakeStream:
    null: FakeStream

    def __init__(self, null: bool = False, non_blocking: bool = False, ptds: bool = False,
                 priority: int | None = None) -> None:
        self.ptr = 0 if null else 2 if ptds else next(_pointers)
        self.device_id = -1 if null or ptds else _current()
        self.non_blocking, self.priority = non_blocking, priority or 0

    def resolved_device(self) -> int:
        return _current() if self.device_id == -1 else self.device_id

    def __eq__(self, other: object) -> bool:
        return isinstance(other, FakeStream) and other.ptr == self.ptr

    __hash__ = object.__hash__

    def __enter__(self) -> FakeStream:
        if self.device_id not in (-1, _current()):
            raise RuntimeError(f"The device that the stream is created on ({self.device_id}) "
                               f"does not match with the current device ({_current()})")
        stacks = getattr(_local, "streams", {})
        stacks.setdefault(_current(), []).append(self)
        _local.streams = stacks
        return self

    def __exit__(self, *exc: object) -> None:
        _local.streams[_current()].pop()

    def record(self, event: FakeEvent | None = None) -> FakeEvent:
        event = event or FakeEvent()
        event.record(self)
        return event

    def wait_event(self, event: FakeEvent) -> None:
        FakeDevice.log.append(("wait_event", self.ptr, self.resolved_device()))

    def synchronize(self) -> None:
        FakeDevice.log.append(("stream synchronize", self.ptr, self.resolved_device()))

    @property
    def done(self) -> bool:
        return True


FakeStream.null = FakeStream(null=True)
FakeStream.ptds = FakeStream(ptds=True)


def get_current_stream(device_id: int = -1) -> FakeStream:
    device = _current() if device_id == -1 else device_id
    stack = getattr(_local, "streams", {}).get(device)
    return stack[-1] if stack else FakeStream.null


class CudaRuntimeError(RuntimeError):
    pass


FAKE_CUPY = types.SimpleNamespace(cuda=types.SimpleNamespace(
    Device=FakeDevice, Stream=FakeStream, Event=FakeEvent,
    get_current_stream=get_current_stream,
    runtime=types.SimpleNamespace(getDeviceCount=lambda: 2, getDevice=_current,
                                  CUDARuntimeError=CudaRuntimeError),
))


@pytest.fixture
def fake_cupy(monkeypatch):
    """Two GPUs behind the stand-in; jaxstream's cached cuda streams are set aside."""
    monkeypatch.setattr(cuda_kind, "_cupy", lambda: FAKE_CUPY)
    monkeypatch.setattr(cuda_kind, "jax_gpus", lambda: ())
    monkeypatch.setattr(cuda_kind.CudaKind, "device_count", lambda self: 2)
    monkeypatch.setattr(streams, "_default_streams", {})
    monkeypatch.setattr(streams, "_xla_streams", {})
    FakeDevice.log = []
    _local.device = 0
    yield FakeDevice.log
    _local.device = 0


def test_a_cuda_stream_is_a_non_blocking_cupy_stream_made_on_its_device(fake_cupy):
    s = js.Stream("cuda:1", priority=-1)
    assert (s.native.device_id, s.native.non_blocking, s.native.priority) == (1, True, -1)
    assert _current() == 0, "making it left the current device alone"
    assert js.default_stream("cuda:1").native is FakeStream.null


def test_the_default_stream_is_cupys_per_thread_one_where_cupy_uses_that(fake_cupy,
                                                                         monkeypatch):
    monkeypatch.setenv(cuda_kind.PER_THREAD_DEFAULT_STREAM_ENV, "1")
    assert js.default_stream("cuda:0").native is FakeStream.ptds


def test_entering_a_stream_of_another_device_makes_its_device_and_cupy_stream_current(fake_cupy):
    s = js.Stream("cuda:1")
    with js.stream(s):
        assert _current() == 1 and get_current_stream() is s.native
        assert js.current_stream() == s
    assert _current() == 0 and get_current_stream() is FakeStream.null


def test_events_are_made_and_recorded_under_their_streams_device(fake_cupy):
    s = js.Stream("cuda:1")
    e = s.record_event()  # issued while device 0 is current
    assert (e.native.device, e.native.recorded_on) == (1, s.native)
    e.record(s)  # recorded again: the same CuPy event
    js.default_stream("cuda:0").wait_event(e)
    assert fake_cupy[-1] == ("wait_event", 0, 0), "the null stream of device 0, under device 0"
    js.default_stream("cuda:1").wait_event(e)
    assert fake_cupy[-1] == ("wait_event", 0, 1), "the null stream of device 1, under device 1"
    with pytest.raises(ValueError, match="belongs to cuda:1"):
        e.record(js.Stream("cuda:0"))
    e.synchronize()
    assert e.query() and s.query()


def test_synchronizing_a_default_stream_and_a_device_runs_under_that_device(fake_cupy):
    js.default_stream("cuda:1").synchronize()
    assert fake_cupy[-1] == ("stream synchronize", 0, 1)
    js.synchronize("cuda:1")
    assert ("device synchronize", 1, 1) in fake_cupy
    assert _current() == 0


def test_a_completion_event_is_recorded_on_the_stream_under_its_device(fake_cupy):
    s = js.Stream("cuda:1")
    event = s.device.kind.completion_event(s)
    assert (event.device, event.recorded_on, event.done) == (1, s.native, True)
    null = js.default_stream("cuda:1")
    assert s.device.kind.completion_event(null).device == 1


def test_xla_stream_and_cupy_streams_wait_for_each_other_through_the_host(fake_cupy,
                                                                          monkeypatch):
    """Note [XLA's stream]: neither side can wait for the other natively; the host waits."""
    monkeypatch.setattr(cuda_kind, "jax_gpus", lambda: (jax.devices("cpu")[0],))
    xla, side = js.xla_stream("cuda:0"), js.Stream("cuda:0")
    assert isinstance(xla.native, cuda_kind.XlaStream)
    marker = xla.record_event()
    side.wait_event(marker)
    assert not any(entry[0] == "wait_event" for entry in fake_cupy), "no CuPy wait for XLA"
    event = side.record_event()
    xla.wait_event(event)
    assert event.native.recorded_on == side.native
    assert marker.query() and xla.query()
    again = side.record_event(marker)  # an XLA marker's event recorded on CuPy: a CuPy event
    assert isinstance(again.native, FakeEvent)


def test_the_stand_in_refuses_what_cupy_and_cuda_refuse():
    """The rules the tests above rely on: without the guards, these calls fail."""
    _local.device = 1
    on_one = FakeStream()
    _local.device = 0
    with pytest.raises(RuntimeError, match="does not match with the current device"):
        with on_one:
            pass
    with pytest.raises(RuntimeError, match="recorded on a stream of device 1"):
        FakeEvent().record(on_one)
