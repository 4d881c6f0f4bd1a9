"""The sim runtime models CUDA's device guards, so that multi-device stream bugs show on a CPU.

Each test here is the sim twin of a defect a GPU would have shown: a stream call
issued off its device (the legacy default stream then means another device's),
a host copy on the current device's stream instead of the array's, a tensor made
for device 1 while device 0 is current, a backward across two devices whose
final sync must run under each leaf's device. See Note [Device guards].
"""

from __future__ import annotations

import threading

import numpy as np
import pytest
from helpers import WAIT_S

import jaxstream as js
from jaxstream import sanitizer, streams
from jaxstream.devices import DeviceGuardError, SimKind, device

pytestmark = pytest.mark.usefixtures("no_leaked_threads")  # conftest.py

SIM_KIND = device("sim:0").kind


def runtime_index() -> int:
    assert isinstance(SIM_KIND, SimKind)
    return SIM_KIND.current_index()


def test_the_runtime_current_device_is_per_thread_and_starts_at_0():
    seen = []

    def body():
        seen.append(runtime_index())
        js.set_device("sim:1")
        seen.append(runtime_index())

    thread = threading.Thread(target=body)
    thread.start()
    thread.join(WAIT_S)
    assert not thread.is_alive()
    assert seen == [0, 1]
    assert runtime_index() == 0, "another thread's set_device leaves this thread's alone"


def test_a_launch_on_another_devices_stream_without_its_guard_raises():
    buffer = np.ones(3)
    on_dev1 = js.Stream("sim:1")
    with pytest.raises(DeviceGuardError, match="sim:0 is the current device"):
        sanitizer.launch(on_dev1, op="fill", allocs=(buffer,))
    with pytest.raises(DeviceGuardError, match="Stream\\(sim:1"):
        sanitizer.host_read(buffer, js.default_stream("sim:1"), "numpy")
    with js.stream(on_dev1):
        sanitizer.launch(on_dev1, op="fill", allocs=(buffer,))
    assert runtime_index() == 0, "the block restores the runtime's device"
    js.set_device("sim:1")
    try:
        sanitizer.host_read(buffer, on_dev1, "numpy")
    finally:
        js.set_device("sim:0")


def test_stream_calls_enter_their_device_whatever_device_is_current():
    assert runtime_index() == 0
    on_dev1 = js.Stream("sim:1")
    default1 = js.default_stream("sim:1")
    event = on_dev1.record_event()
    default1.wait_event(event)
    default1.wait_stream(on_dev1)
    on_dev1.synchronize()
    assert default1.query() and event.query()
    assert sanitizer.clock_of(default1)[on_dev1] == sanitizer.clock_of(on_dev1)[on_dev1]
    assert runtime_index() == 0


def test_default_streams_belong_to_their_device():
    zero, one = js.default_stream("sim:0"), js.default_stream("sim:1")
    assert zero != one and (zero.device, one.device) == (device("sim:0"), device("sim:1"))
    buffer = np.ones(2)
    with js.stream(one):
        sanitizer.launch(one, op="make", allocs=(buffer,))
    with pytest.raises(js.StreamRaceError):
        sanitizer.check_read(buffer, zero, "read")
    one.synchronize()
    sanitizer.check_read(buffer, zero, "read")


def test_a_tensor_for_device_1_is_made_there_while_device_0_is_current():
    side = js.Stream("sim:1")
    with js.stream(side):
        pass
    t = js.tensor(np.arange(3.0), device="sim:1")
    assert t.device == "sim:1"
    # Its allocation was recorded on sim:1's current stream, so an unordered
    # write from another stream of sim:1 is a race.
    with pytest.raises(js.StreamRaceError, match="Stream\\(sim:1, id=0\\)"):
        sanitizer.check_write(t.array, side, "overwrite")


def test_to_host_reads_on_the_arrays_device_while_another_is_current():
    side = js.Stream("sim:1")
    with js.stream(side):
        t = js.tensor(np.arange(4.0), device="sim:1") * 2.0
    with pytest.raises(js.StreamRaceError, match="read-after-write"):
        t.numpy()  # on sim:1's current stream (its default), not ordered after `side`
    js.default_stream("sim:1").wait_stream(side)
    np.testing.assert_array_equal(t.numpy(), [0.0, 2.0, 4.0, 6.0])
    assert runtime_index() == 0


def test_ops_on_device_1_tensors_launch_under_device_1():
    t = js.tensor(np.arange(3.0), device="sim:1")
    u = (t * 3.0).sum()
    assert u.device == "sim:1" and u.item() == 9.0
    assert runtime_index() == 0


def test_a_two_device_backward_syncs_each_leaf_under_its_device():
    side0, side1 = js.Stream("sim:0"), js.Stream("sim:1")
    x0 = js.tensor(np.arange(3.0), device="sim:0", requires_grad=True)
    x1 = js.tensor(np.arange(3.0), device="sim:1", requires_grad=True)
    side0.wait_stream(js.default_stream("sim:0"))
    side1.wait_stream(js.default_stream("sim:1"))
    with js.stream(side0):
        y0 = (x0 * x0).sum()
    with js.stream(side1):
        y1 = (x1 * 3.0).sum().to("sim:0")  # read on side1; sim:0's stream waits for it
    js.default_stream("sim:0").wait_stream(side0)
    total = y0 + y1
    total.backward()
    # The caller's current streams (each device's default) are ordered after the
    # leaves' streams by the final sync, each issued under its own device.
    np.testing.assert_array_equal(x0.grad.numpy(), [0.0, 2.0, 4.0])
    np.testing.assert_array_equal(x1.grad.numpy(), [3.0, 3.0, 3.0])
    assert runtime_index() == 0


def test_using_thread_streams_enters_each_device():
    side1 = js.Stream("sim:1")
    with js.stream(side1):
        snapshot = streams.thread_streams()
    seen = []

    def body():
        with streams.using_thread_streams(snapshot):
            seen.append((js.current_stream("sim:1"), runtime_index()))

    thread = threading.Thread(target=body)
    thread.start()
    thread.join(WAIT_S)
    assert not thread.is_alive()
    assert seen == [(side1, 1)]
