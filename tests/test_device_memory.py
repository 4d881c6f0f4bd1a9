"""Device memory running out: the sim devices' allocator limit, and a GPU running out of
memory mid-backward (Note [Sim device memory] in jaxstream/devices/memory.py).

The error reaches the caller naming the node that asked, `.grad` keeps what it held, the
device's worker thread lives on, and the next backward runs once memory is there.
"""

from __future__ import annotations

import gc
import threading

import numpy as np
import pytest

import jaxstream as js

SIM = "sim:0"
SIDE = (100, 100)  # float64: one gradient is 80,000 bytes
GRADIENT_BYTES = 8 * SIDE[0] * SIDE[1]

pytestmark = pytest.mark.usefixtures("no_leaked_threads")  # conftest.py


@pytest.fixture(autouse=True)
def no_memory_limits():
    """Every sim device without a limit before and after each test."""
    devices = range(js.sim.device_count())
    for index in devices:
        js.sim.set_memory_limit(index, None)
    yield
    for index in devices:
        js.sim.set_memory_limit(index, None)


def device_threads() -> list[threading.Thread]:
    return [t for t in js.autograd.engine_threads() if "device" in t.name]


def notes(excinfo: pytest.ExceptionInfo) -> str:
    return " ".join(getattr(excinfo.value, "__notes__", []))


# ---------------------------------------------------------------- the sim allocator
def test_a_sim_device_counts_the_bytes_of_its_live_buffers():
    gc.collect()  # no earlier garbage left to be freed during the test
    before = js.sim.memory_allocated(SIM)
    x = js.tensor(np.ones(SIDE), device=SIM)
    y = x * 2
    assert js.sim.memory_allocated(SIM) == before + 2 * GRADIENT_BYTES
    assert js.sim.memory_allocated(js.device("sim:1")) == js.sim.memory_allocated(1)
    view = y[:10]  # a view is no new buffer
    assert js.sim.memory_allocated(SIM) == before + 2 * GRADIENT_BYTES
    del x, y, view
    assert js.sim.memory_allocated(SIM) == before


def test_memory_held_by_record_stream_stays_charged_until_its_stream_is_done():
    gc.collect()
    default, side = js.current_stream(SIM), js.Stream(SIM)
    before = js.sim.memory_allocated(SIM)
    x = js.tensor(np.ones(SIDE), device=SIM)
    side.wait_stream(default)
    with js.stream(side):
        y = x * 2
    x.record_stream(side)
    del x
    assert js.sim.memory_allocated(SIM) == before + 2 * GRADIENT_BYTES
    side.synchronize()  # the hold is released: x's memory is free
    assert js.sim.memory_allocated(SIM) == before + GRADIENT_BYTES
    del y
    assert js.sim.memory_allocated(SIM) == before


def test_an_allocation_past_the_limit_raises_naming_device_bytes_and_what_to_do():
    x = js.tensor(np.ones(SIDE), device=SIM)
    in_use = js.sim.memory_allocated(SIM)
    js.sim.set_memory_limit(SIM, in_use + 100)
    assert js.sim.memory_limit(SIM) == in_use + 100
    with pytest.raises(js.OutOfMemoryError, match="js.sim.set_memory_limit") as info:
        x * 2
    error = info.value
    assert isinstance(error, RuntimeError)
    assert (error.device, error.requested, error.limit, error.in_use) == (
        SIM, GRADIENT_BYTES, in_use + 100, in_use)
    assert f"{GRADIENT_BYTES:,} bytes" in str(error) and "'mul'" in str(error)
    assert js.sim.memory_allocated(SIM) == in_use  # the failed buffer was never charged
    with pytest.raises(js.OutOfMemoryError):
        js.tensor(np.ones(SIDE), device=SIM)
    js.sim.set_memory_limit(SIM, None)
    assert js.sim.memory_limit(SIM) is None
    np.testing.assert_array_equal((x * 2).numpy(), np.full(SIDE, 2.0))


def test_the_limit_is_per_device():
    x = js.tensor(np.ones(SIDE), device="sim:1")
    js.sim.set_memory_limit(SIM, js.sim.memory_allocated(SIM))
    np.testing.assert_array_equal((x * 2).numpy(), np.full(SIDE, 2.0))


@pytest.mark.parametrize(
    ("device", "limit", "message"),
    [
        ("sim:0", -1, "non-negative number of bytes"),
        ("sim:0", 1.5, "non-negative number of bytes"),
        ("cpu", 10, "not a sim device"),
        ("sim:99", 10, "not a sim device"),
        (js.device("cpu"), 10, "not a sim device"),
    ],
)
def test_a_bad_limit_or_device_is_refused(device, limit, message):
    with pytest.raises(ValueError, match=message):
        js.sim.set_memory_limit(device, limit)


# ---------------------------------------------------------------- out of memory mid-backward
@pytest.mark.parametrize(
    ("headroom", "node"),
    [
        (1_000, "MulBackward0"),  # the seed fits, the product's gradient does not
        (GRADIENT_BYTES + 1_000, "AccumulateGrad"),  # the sum into `.grad` does not
    ],
)
def test_out_of_memory_mid_backward_names_the_node_and_the_engine_goes_on(headroom, node):
    x = js.tensor(np.ones(SIDE), device=SIM, requires_grad=True)
    loss = (x * 3).sum()
    loss.backward(retain_graph=True)
    grad = x.grad
    (thread,) = device_threads()
    gc.collect()  # an earlier test's garbage, freed mid-backward, would make room
    js.sim.set_memory_limit(SIM, js.sim.memory_allocated(SIM) + headroom)
    with pytest.raises(js.OutOfMemoryError) as info:
        loss.backward(retain_graph=True)
    assert f"raised while running {node}" in notes(info)
    assert x.grad is grad  # not half-accumulated: as the first backward left it
    np.testing.assert_array_equal(x.grad.numpy(), np.full(SIDE, 3.0))
    assert device_threads() == [thread] and thread.is_alive()
    js.sim.set_memory_limit(SIM, None)
    loss.backward(retain_graph=True)  # the same graph, now that memory is there
    np.testing.assert_array_equal(x.grad.numpy(), np.full(SIDE, 6.0))
    (x * 5).sum().backward()  # and a new one
    np.testing.assert_array_equal(x.grad.numpy(), np.full(SIDE, 11.0))
    assert device_threads() == [thread]


@pytest.mark.cuda
def test_cuda_out_of_memory_mid_backward_names_the_node_and_the_engine_goes_on():
    cupy = pytest.importorskip("cupy")
    pool = cupy.get_default_memory_pool()
    side = (1000, 1000)  # float64: one gradient is 8 MB
    x = js.tensor(np.ones(side), device="cuda:0", backend="cupy", requires_grad=True)
    loss = (x * 3).sum()
    loss.backward(retain_graph=True)
    grad = x.grad
    (thread,) = device_threads()
    js.synchronize("cuda:0")
    previous = pool.get_limit()
    pool.free_all_blocks()
    pool.set_limit(size=pool.total_bytes() + 1024 * 1024)  # the seed fits, a gradient not
    try:
        with pytest.raises(cupy.cuda.memory.OutOfMemoryError) as info:
            loss.backward(retain_graph=True)
    finally:
        pool.set_limit(size=previous)
    assert "raised while running MulBackward0" in notes(info)
    assert x.grad is grad
    np.testing.assert_array_equal(x.grad.numpy(), np.full(side, 3.0))
    assert device_threads() == [thread] and thread.is_alive()
    loss.backward(retain_graph=True)
    np.testing.assert_array_equal(x.grad.numpy(), np.full(side, 6.0))
    (x * 5).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.full(side, 11.0))
    assert device_threads() == [thread]
