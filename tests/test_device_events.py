"""Each launch, copy, record, wait and host read on an accelerator reaches both of its watchers,
the stream sanitizer and an open virtual clock, through one call (Note [The watchers' bus] in
jaxstream/device_events.py); work on the cpu reaches neither."""

from __future__ import annotations

import numpy as np
import pytest

import jaxstream as js
from jaxstream import sanitizer

SANITIZER_CALLS = ("on_op", "launch", "host_read", "wait", "host_wait", "host_wait_device")
CLOCK_CALLS = ("launch", "record", "wait", "host_sync", "host_sync_event", "host_sync_device")

S, C = "sanitizer", "clock"
HEARD = [  # (what the program does, what the watchers hear, in order)
    ("copy", [(S, "launch"), (C, "launch")]),
    ("op", [(S, "on_op"), (C, "launch")]),
    ("record", [(C, "record")]),  # the sanitizer's snapshot is taken by the record itself
    ("wait", [(S, "wait"), (C, "wait")]),
    ("event sync", [(S, "host_wait"), (C, "host_sync_event")]),
    ("stream sync", [(S, "host_wait"), (C, "host_sync")]),
    ("host read", [(S, "host_read"), (S, "host_wait"), (C, "launch"), (C, "host_sync")]),
    ("device sync", [(S, "host_wait_device"), (C, "host_sync_device"), (C, "host_sync")]),
    ("move", [(S, "launch"), (C, "record"), (S, "wait"), (C, "wait"), (S, "launch"),
              (C, "launch")]),
]


def _listen(monkeypatch, owner: object, names: tuple, who: str, heard: list) -> None:
    for name in names:
        real = getattr(owner, name)
        monkeypatch.setattr(owner, name, lambda *a, _n=name, _r=real, **k: (
            heard.append((who, _n)), _r(*a, **k))[1])


def test_each_event_on_sim_reaches_the_sanitizer_and_the_open_clock_in_order(monkeypatch):
    monkeypatch.setenv(sanitizer.CHECK_ENV, "1")
    heard: list = []
    _listen(monkeypatch, sanitizer, SANITIZER_CALLS, S, heard)
    side = js.Stream("sim:0")
    held: dict = {}
    steps = {
        "copy": lambda: held.update(x=js.tensor([1.0, 2.0], device="sim:0")),
        "op": lambda: held.update(y=held["x"] * 2.0),
        "record": lambda: held.update(event=js.current_stream("sim:0").record_event()),
        "wait": lambda: side.wait_event(held["event"]),
        "event sync": lambda: held["event"].synchronize(),
        "stream sync": side.synchronize,
        "host read": lambda: held.update(values=held["y"].numpy()),
        "device sync": lambda: js.synchronize("sim:0"),
        "move": lambda: held.update(moved=held["y"].to("sim:1")),
    }
    with js.sim.virtual_time() as clock:
        _listen(monkeypatch, clock, CLOCK_CALLS, C, heard)
        for name, expected in HEARD:
            del heard[:]
            steps[name]()
            assert heard == expected, name
    assert held["values"].tolist() == [2.0, 4.0]
    assert held["moved"].device == js.device("sim:1")
    names = [kernel.name for kernel in clock.kernels]
    assert names == ["copy to device", "mul", "copy to host", "copy to device"]


def test_work_on_the_cpu_reaches_neither_watcher(monkeypatch):
    heard: list = []
    _listen(monkeypatch, sanitizer, SANITIZER_CALLS, S, heard)
    with js.sim.virtual_time() as clock:
        x = js.tensor([1.0, 2.0], requires_grad=True)
        (x * 2.0).sum().backward()
        assert x.grad.numpy().tolist() == [2.0, 2.0]
        assert x.to(backend="jax").numpy().tolist() == [1.0, 2.0]
    assert heard == []
    assert clock.kernels == []


def test_a_refused_wait_reaches_neither_watcher(monkeypatch):
    """A wait for what is not an event is refused before either watcher hears of it."""
    heard: list = []
    _listen(monkeypatch, sanitizer, SANITIZER_CALLS, S, heard)
    side = js.Stream("sim:0")
    with js.sim.virtual_time() as clock:
        _listen(monkeypatch, clock, CLOCK_CALLS, C, heard)
        with pytest.raises(ValueError, match="wait_event: expected a js.Event, got Stream"):
            side.wait_event(js.Stream("sim:0"))
    assert heard == []


def _step(t):
    return (t * 2.0 + 1.0).tanh()


def test_a_compiled_step_on_sim_is_one_launch_on_xlas_stream(monkeypatch):
    """`js.compile` runs one XLA program: its watchers hear one launch on XLA's stream, reading
    the inputs and making the outputs, where the eager step launches a kernel per op."""
    monkeypatch.setenv(sanitizer.CHECK_ENV, "1")
    x = js.tensor(np.linspace(-1.0, 1.0, 8, dtype=np.float32), backend="jax", device="sim:0")
    compiled = js.compile(_step)
    compiled(x)  # traced and compiled outside the clock
    heard: list = []
    _listen(monkeypatch, sanitizer, ("launch", "on_op"), S, heard)
    with js.sim.virtual_time() as eager:
        _step(x)
    with js.sim.virtual_time() as clock:
        out = compiled(x)
    assert [k.name for k in eager.kernels] == ["mul", "add", "tanh"]
    assert [(k.name, k.stream) for k in clock.kernels] == [("_step", js.xla_stream("sim:0"))]
    assert heard.count((S, "launch")) == 1 and (S, "on_op") in heard  # the eager step's ops
    np.testing.assert_allclose(out.numpy(), np.tanh(x.numpy() * 2.0 + 1.0), rtol=1e-6)


def test_a_trace_runs_nothing_so_only_the_compiled_program_is_charged(monkeypatch):
    """The first call of a compiled step traces it: the traced ops launch nothing, so the
    clock charges the program alone."""
    monkeypatch.setenv(sanitizer.CHECK_ENV, "1")
    x = js.tensor(np.linspace(-1.0, 1.0, 8, dtype=np.float32), backend="jax", device="sim:0")
    with js.sim.virtual_time() as clock:
        out = js.compile(_step)(x)  # traced, compiled and run here
    assert [kernel.name for kernel in clock.kernels] == ["_step"]
    np.testing.assert_allclose(out.numpy(), np.tanh(x.numpy() * 2.0 + 1.0), rtol=1e-6)
