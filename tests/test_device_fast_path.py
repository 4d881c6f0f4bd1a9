"""What an op and a backward node cost on an accelerator, piece by piece, and that each piece
keeps its semantics (Note [An op on an accelerator] in jaxstream/ops/dispatch.py, Note
[Deciding once where an op runs] in jaxstream/ops/venues.py).

Each test counts a cost the fast path removes (a stream lookup, a device guard, a lock, a
queued node, a stream block, a dispatched op) and checks, on the same run, what the removed
cost stood for: the stream a node keeps, the device put back, the memory counted, the
gradient against `jax.grad`, the stream a node runs on. No timings.
"""

from __future__ import annotations

import copy
import gc
import os
import pickle

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import jaxstream as js
from jaxstream import sanitizer
from jaxstream.autograd import node as node_module
from jaxstream.autograd.function import Function
from jaxstream.autograd.ready_queue import ReadyQueue
from jaxstream.devices import Device, DeviceGuardError, current, device
from jaxstream.devices.env_switch import EnvSwitch
from jaxstream.ops import venues

pytestmark = pytest.mark.usefixtures("no_leaked_threads")  # conftest.py

SIM0, SIM1 = device("sim:0"), device("sim:1")
CHAIN = 8
FACTOR = 1.0001


@pytest.fixture
def checks_off(monkeypatch):
    monkeypatch.setenv(sanitizer.CHECK_ENV, "0")


def chain(y, length=CHAIN):
    for _ in range(length // 2):
        y = y.tanh()
        y = y * FACTOR
    return y


def expected_gradient(start: np.ndarray, length=CHAIN) -> np.ndarray:
    def loss(y):
        for _ in range(length // 2):
            y = jnp.tanh(y) * FACTOR
        return jnp.sum(y)

    return np.asarray(jax.grad(loss)(start))


def start_values() -> np.ndarray:
    return np.linspace(-1.0, 1.0, 16)


class Counting:
    """Wraps a callable and counts its calls (with a filter on the arguments)."""

    def __init__(self, wrapped, counts=lambda *args, **kwargs: True):
        self.wrapped, self.counts, self.calls = wrapped, counts, 0

    def __call__(self, *args, **kwargs):
        if self.counts(*args, **kwargs):
            self.calls += 1
        return self.wrapped(*args, **kwargs)


# ------------------------------------------------------------------------------ forward
def test_an_op_looks_its_stream_up_once_and_its_node_keeps_that_stream(monkeypatch):
    x = js.tensor(start_values(), device=SIM0, requires_grad=True)
    first = x * 1.0  # keeps the leaf's accumulator, which looks up its own stream once
    lookups = Counting(venues.stream_for)
    monkeypatch.setattr(venues, "stream_for", lookups)
    monkeypatch.setattr(node_module, "stream_for", lookups)  # where input metadata looks
    side = js.Stream(SIM0)
    side.wait_stream(js.current_stream(SIM0))
    with js.stream(side):
        y = x * 2.0
        assert lookups.calls == 1
        assert y.grad_fn.stream is side and y.grad_fn.input_metadata[0].stream is side
        (y.sum() + first.sum()).backward()
        np.testing.assert_array_equal(x.grad.numpy(), np.full(16, 3.0))


def test_an_op_enters_its_devices_guard_only_off_that_device(monkeypatch):
    kind = SIM0.kind
    on_zero = js.tensor(start_values(), device=SIM0)
    on_one = js.tensor(start_values(), device=SIM1)
    guards = Counting(kind.guard)
    monkeypatch.setattr(kind, "guard", guards)
    assert kind.current_index() == 0
    (on_zero * 2.0).tanh()
    assert guards.calls == 0, "device 0 is current: nothing to enter"
    out = on_one * 2.0
    assert guards.calls == 1 and out.device == SIM1
    assert kind.current_index() == 0, "the guard put back the device it found"
    with pytest.raises(DeviceGuardError, match="sim:0 is the current device"):
        sanitizer.launch(js.Stream(SIM1), op="fill", allocs=(np.ones(2),))


def test_a_sim_op_charges_its_output_without_the_memory_lock(checks_off, monkeypatch):
    memory = js.sim.memory

    class CountingLock:
        def __init__(self, lock):
            self.lock, self.acquired = lock, 0

        def __enter__(self):
            self.acquired += 1
            return self.lock.__enter__()

        def __exit__(self, *exc):
            return self.lock.__exit__(*exc)

    lock = CountingLock(memory._lock)
    monkeypatch.setattr(memory, "_lock", lock)
    x = js.tensor(np.ones(1000), device=SIM0)
    before = js.sim.memory_allocated(SIM0)
    lock.acquired = 0
    kept = [x * float(k) for k in range(10)]
    for _ in range(50):
        x.tanh()  # dies at once
    assert lock.acquired == 0
    assert js.sim.memory_allocated(SIM0) == before + 10 * x.array.nbytes
    js.sim.set_memory_limit(SIM0, js.sim.memory_allocated(SIM0) + 100)
    try:
        with pytest.raises(js.OutOfMemoryError, match="'mul' tried to allocate 8,000 bytes"):
            x * 3.0
    finally:
        js.sim.set_memory_limit(SIM0, None)
    del kept


def test_a_virtual_clock_is_its_kinds_while_it_is_open():
    kind = SIM0.kind
    assert kind.virtual_clock is None
    with js.sim.virtual_time("h100") as clock:
        assert kind.virtual_clock is clock
        (js.tensor(np.ones(1 << 16), device=SIM0) * 2.0).sum()
    assert kind.virtual_clock is None
    assert clock.kernels and device("cpu").kind.virtual_clock is None


# ------------------------------------------------------------------------------ backward
def test_with_the_checks_off_a_sim_backward_runs_array_twins_and_charges_them(monkeypatch):
    """No op dispatched for the chain (the sanitizer hears of none), the same gradient as
    with the checks on, where every rule runs op by op, and the same memory counted."""
    seen = {}
    for checks in ("1", "0"):
        monkeypatch.setenv(sanitizer.CHECK_ENV, checks)
        settle()
        before = js.sim.memory_allocated(SIM0)
        launches = Counting(sanitizer.on_op)
        x = js.tensor(start_values(), device=SIM0, requires_grad=True)
        loss = chain(x).sum()
        monkeypatch.setattr(sanitizer, "on_op", launches)
        loss.backward()
        calls = launches.calls
        settle()
        seen[checks] = (calls, x.grad.numpy().copy(), js.sim.memory_allocated(SIM0) - before)
        del x, loss  # before the next run counts what it starts from
        monkeypatch.undo()
    assert seen["0"][0] <= 2 < CHAIN < seen["1"][0], "the seed's and the sum's ops alone"
    np.testing.assert_allclose(seen["0"][1], expected_gradient(start_values()), rtol=1e-5)
    np.testing.assert_array_equal(seen["0"][1], seen["1"][1])
    assert seen["0"][2] == seen["1"][2] > 0, "the chain's buffers given back, the gradient kept"


def settle() -> None:
    """sim:0 as after any small backward: its device thread last ran the same node, no
    `record_stream` hold is left, and the garbage collected."""
    (js.tensor([1.0], device=SIM0, requires_grad=True) * 2.0).sum().backward()
    js.synchronize(SIM0)
    gc.collect()


def test_a_chain_on_a_device_thread_hands_each_node_to_the_next(checks_off, monkeypatch):
    pushed = Counting(ReadyQueue.push, lambda queue, task, fn, inputs: fn is not None)
    monkeypatch.setattr(ReadyQueue, "push", lambda *args: pushed(*args))
    x = js.tensor(start_values(), device=SIM0, requires_grad=True)
    chain(x, 40).sum().backward()
    assert pushed.calls == 1, "the root alone is queued"
    np.testing.assert_allclose(x.grad.numpy(), expected_gradient(start_values(), 40),
                               rtol=1e-5)


class Recorded(Function):
    """Multiplies by 1 and records, in backward, the current device and stream; `leak` makes
    its backward leave another device current, which its stream block would undo."""

    seen: list = []

    @staticmethod
    def forward(ctx, x, leak):
        ctx.leak = leak
        return x * 1.0

    @staticmethod
    def backward(ctx, g):
        Recorded.seen.append((js.current_device(), js.current_stream(SIM0)))
        if ctx.leak:
            js.set_device("sim:1")
        return g, None


def test_a_chain_runs_in_one_stream_block_and_what_a_node_changes_does_not_leak(
    checks_off, monkeypatch
):
    blocks = Counting(current.StreamBlock.__enter__)
    monkeypatch.setattr(current.StreamBlock, "__enter__", lambda block: blocks(block))
    entered = []
    for length in (10, 40):
        x = js.tensor(start_values(), device=SIM0, requires_grad=True)
        loss = chain(x, length).sum()
        blocks.calls = 0
        loss.backward()
        entered.append(blocks.calls)
    assert entered[0] == entered[1], "no block per node"
    Recorded.seen = []
    y = Recorded.apply(chain(x), False)  # runs second in backward
    chain(Recorded.apply(y, True)).sum().backward()  # runs first, leaving sim:1 current
    default = js.default_stream(SIM0)
    assert Recorded.seen == [(SIM0, default), (SIM0, default)]
    with pytest.raises(ValueError, match="XLA's stream and cannot be entered"):
        js.stream(js.xla_stream(SIM0))


# ------------------------------------------------------------------------------ devices
def test_a_device_is_one_object():
    sim0 = Device("sim", 0)
    assert sim0 is device("sim:0") is Device("sim") is copy.deepcopy(sim0)
    assert pickle.loads(pickle.dumps(sim0)) is sim0
    assert Device("cpu", 3) is device("cpu") and sim0 != device("sim:1")
    assert sim0 == "sim:0" and sim0 != "cuda:0" and hash(sim0) == hash(device("sim:0"))
    assert {sim0: 1}[js.tensor([1.0], device="sim:0").device] == 1
    with pytest.raises(ValueError, match="non-negative int"):
        Device("sim", -1)
    with pytest.raises(ValueError, match="unknown device type"):
        Device("tpu", 0)


@settings(max_examples=15, deadline=None)
@given(value=st.sampled_from([None, "0", "1", "", "2", "01", " 1", "true"]))
def test_the_stream_check_switch_reads_the_environment_as_it_is_now(value):
    name = "JAXSTREAM_TEST_SWITCH"
    switch = EnvSwitch(name)
    with pytest.MonkeyPatch.context() as monkeypatch:
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
        assert switch.is_one() == (os.environ.get(name) == "1")
        assert switch.is_not_zero() == (os.environ.get(name) != "0")
    assert not switch.is_one() and switch.is_not_zero(), "unset again after the block"
