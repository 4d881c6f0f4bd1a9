"""Each launch, copy, record, wait and host read on an accelerator reaches both of its watchers,
the stream sanitizer and an open virtual clock, through one call (Note [The watchers' bus] in
jaxstream/device_events.py); work on the cpu reaches neither."""

from __future__ import annotations

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
