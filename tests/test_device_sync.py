"""`js.synchronize(device)`: the host waits for every stream of a device."""

import numpy as np
import pytest

import jaxstream as js
from jaxstream import sanitizer

DEVICE = "sim:0"


def _side_stream_work():
    """A buffer made on the default stream and read on two side streams."""
    x = js.tensor(np.ones((4, 4), dtype=np.float32), device=DEVICE)
    sides = [js.Stream(DEVICE), js.Stream(DEVICE)]
    for s in sides:
        s.wait_stream(js.current_stream(DEVICE))
        with js.stream(s):
            js.exp(x)
    return x, sides


def test_the_host_is_ordered_after_every_stream_of_the_device():
    _, sides = _side_stream_work()
    host = sanitizer.host_clock()
    assert any(host[s] < sanitizer.clock_of(s)[s] for s in sides)
    js.synchronize(DEVICE)
    host = sanitizer.host_clock()
    assert all(host[s] >= sanitizer.clock_of(s)[s] for s in sides)


def test_after_it_a_kernel_on_the_default_stream_may_overwrite_what_side_streams_read():
    x, sides = _side_stream_work()
    default = js.current_stream(DEVICE)
    with pytest.raises(js.StreamRaceError, match="write-after-read"):
        sanitizer.check_write(x.array, default, "overwrite")
    js.synchronize(DEVICE)
    sanitizer.check_write(x.array, default, "overwrite")


@pytest.mark.parametrize("synchronized", [False, True])
def test_the_virtual_host_waits_for_every_stream(synchronized):
    a = js.tensor(np.ones((2048, 2048), dtype=np.float32), device=DEVICE)
    side = js.Stream(DEVICE)
    side.wait_stream(js.current_stream(DEVICE))
    with js.sim.virtual_time("h100") as clock:
        with js.stream(side):
            js.matmul(a, a)
        if synchronized:
            js.synchronize(DEVICE)
        js.exp(a)
    js.synchronize(DEVICE)
    matmul, exp = clock.kernels
    assert (exp.start >= matmul.end) is synchronized


def test_the_cpu_and_missing_devices_are_refused():
    with pytest.raises(ValueError, match="synchronize needs an accelerator"):
        js.synchronize("cpu")
    with pytest.raises(ValueError, match="does not exist"):
        js.synchronize("sim:99")
