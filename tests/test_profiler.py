"""The profiler: what it records from the engine and the streams, and what it exports."""

from __future__ import annotations

import contextlib
import json
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from helpers import WAIT_S, leaf

import jaxstream as js
from jaxstream import instrumentation, profiler
from jaxstream.instrumentation import Instrumentation
from jaxstream.profiler import events as profiler_events
from jaxstream.streams import Event, Stream

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def chain(x, length):
    y = x
    for _ in range(length):
        y = y * 1.5
    return y.sum()


def nodes(prof):
    return [e for e in prof.events if e.kind == "node"]


def encloses(outer, inner):
    return outer.start <= inner.start and inner.end <= outer.end


@pytest.fixture(autouse=True)
def no_profile_left_open():
    yield
    assert profiler.is_active() is False, "a test left a profile open"


# ------------------------------------------------------------------ nodes


def test_every_node_evaluation_is_recorded_with_where_and_when_it_ran():
    x = leaf([1.0, 2.0])
    loss = (x * 2.0).exp().sum()
    sequence_nrs = {loss.grad_fn.sequence_nr, loss.grad_fn.next_functions[0][0].sequence_nr}
    with profiler.profile() as prof:
        assert profiler.is_active()
        loss.backward()
    assert not profiler.is_active()

    events = nodes(prof)
    assert [e.name for e in events] == [
        "SumBackward0", "ExpBackward0", "MulBackward0", "AccumulateGrad"
    ]
    assert sequence_nrs <= {e.sequence_nr for e in events}
    for event in events:
        assert event.thread == threading.current_thread().name
        assert event.thread_id == threading.get_native_id()
        assert event.device == "cpu" and event.stream is None
        assert event.reentrant_depth == 0
        assert event.start <= event.end and event.duration >= 0
    assert len({e.graph_task_id for e in events}) == 1
    assert [e.start for e in events] == sorted(e.start for e in events)


def test_nothing_is_recorded_outside_the_block():
    x = leaf([1.0])
    with profiler.profile() as prof:
        pass
    chain(x, 3).backward()
    assert prof.events == [] and len(prof) == 0


def test_every_graph_task_gets_its_own_id():
    x = leaf([1.0, 2.0])
    with profiler.profile() as prof:
        chain(x, 2).backward()
        chain(x, 2).backward()
    assert len({e.graph_task_id for e in nodes(prof)}) == 2


def test_a_failing_node_is_recorded_and_the_error_still_reaches_the_caller():
    class Fails(js.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a * 1.0

        @staticmethod
        def backward(ctx, grad):
            raise ValueError("backward failed on purpose")

    x = leaf([1.0])
    loss = Fails.apply(x).sum()
    with pytest.raises(ValueError, match="on purpose"), profiler.profile() as prof:
        loss.backward()
    failed = [e for e in nodes(prof) if e.name == "FailsBackward"]
    assert len(failed) == 1 and failed[0].args == {"error": "ValueError"}


def test_a_nested_backward_records_its_depth_and_its_own_graph_task():
    class Reentrant(js.autograd.Function):
        """Computes its gradient with a backward of its own (a reentrant backward)."""

        @staticmethod
        def forward(ctx, a):
            ctx.save_for_backward(a)
            return a * 1.0

        @staticmethod
        def backward(ctx, grad):
            (a,) = ctx.saved_tensors
            with js.enable_grad():
                inner = a.detach().requires_grad_()
                (g,) = js.grad(chain(inner, 3), inner)
            return grad * g

    x = leaf([1.0, 2.0])
    loss = Reentrant.apply(x).sum()
    with profiler.profile() as prof:
        loss.backward()
    outer = next(e for e in nodes(prof) if e.name == "ReentrantBackward")
    nested = [e for e in nodes(prof) if e.reentrant_depth == 1]
    assert outer.reentrant_depth == 0
    assert {e.name for e in nested} >= {"SumBackward0", "MulBackward0"}
    assert len({e.graph_task_id for e in nested}) == 1
    assert nested[0].graph_task_id != outer.graph_task_id
    assert all(encloses(outer, e) for e in nested)
    summary = {s.name: s for s in prof.key_averages()}
    assert summary["ReentrantBackward"].self_ns < summary["ReentrantBackward"].total_ns


def test_events_from_several_threads_are_all_kept():
    threads_n, length = 4, 30
    leaves = [leaf([float(i)]) for i in range(threads_n)]
    losses = [chain(x, length) for x in leaves]
    start = threading.Barrier(threads_n, timeout=WAIT_S)
    errors: list[BaseException] = []

    def run(loss):
        try:
            start.wait()
            loss.backward()
        except BaseException as exc:  # reported by the assertion below
            errors.append(exc)

    workers = [threading.Thread(target=run, args=(loss,)) for loss in losses]
    with profiler.profile() as prof:
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(timeout=WAIT_S)
    assert not any(w.is_alive() for w in workers) and not errors
    per_thread: dict[int, int] = {}
    for event in nodes(prof):
        per_thread[event.thread_id] = per_thread.get(event.thread_id, 0) + 1
    assert len(per_thread) == threads_n
    assert set(per_thread.values()) == {length + 2}  # the muls, the sum, AccumulateGrad
    assert len({e.graph_task_id for e in nodes(prof)}) == threads_n


# ------------------------------------------------------------------ hooks, callbacks


def test_hooks_and_callbacks_are_recorded_inside_their_node_and_still_work():
    x = leaf([1.0, 2.0])
    y = x * 3.0
    y.retain_grad()
    y.register_hook(lambda g: g * 2.0)
    loss = y.sum()
    fn = y.grad_fn
    fn.register_prehook(lambda grads: None)
    fn.register_hook(lambda grad_inputs, grad_outputs: None)
    ran: list[str] = []

    def queue_a_callback(grad):
        js.autograd.queue_callback(lambda: ran.append("callback"))

    x.register_hook(queue_a_callback)
    with profiler.profile() as prof:
        loss.backward()

    assert ran == ["callback"]
    np.testing.assert_allclose(x.grad.numpy(), [6.0, 6.0])  # the tensor hook's doubling
    np.testing.assert_allclose(y.grad.numpy(), [2.0, 2.0])
    mul = next(e for e in prof.events if e.name == "MulBackward0")
    mul_hooks = [e for e in prof.events if e.kind == "hook" and e.args["node"] == "MulBackward0"]
    assert [e.name for e in mul_hooks] == [
        "hook:tensor_pre", "hook:retains_grad", "hook:pre", "hook:post"
    ]
    for hook in mul_hooks:
        assert encloses(mul, hook) and hook.graph_task_id == mul.graph_task_id
        assert hook.thread_id == mul.thread_id and hook.device == mul.device
    leaf_hooks = [e for e in prof.events if e.kind == "hook" and e.args["node"] == "AccumulateGrad"]
    assert [e.name for e in leaf_hooks] == ["hook:tensor_pre"]
    assert leaf_hooks[0].args["hook"] == queue_a_callback.__qualname__
    callback = next(e for e in prof.events if e.name == "callback")
    assert callback.kind == "callback" and callback.graph_task_id == mul.graph_task_id
    assert callback.start >= max(e.end for e in nodes(prof))


def test_with_no_profile_open_the_engine_never_calls_the_profiler(monkeypatch):
    def must_not_run(*args, **kwargs):
        raise AssertionError("the profiler was called while no profile was open")

    assert type(instrumentation.current()) is Instrumentation
    for name in ("evaluate_node", "call_hook", "run_callback", "stream_op"):
        monkeypatch.setattr(profiler.Recorder, name, must_not_run)
    monkeypatch.setattr(profiler_events, "clock", must_not_run)
    x = leaf([1.0])
    y = x * 2.0
    y.retain_grad()
    y.register_hook(lambda g: None)
    y.grad_fn.register_prehook(lambda grads: None)
    y.grad_fn.register_hook(lambda grad_inputs, grad_outputs: None)
    x.register_hook(lambda g: js.autograd.queue_callback(lambda: None))
    y.sum().backward()
    a, b = Stream("sim:0"), Stream("sim:0")
    a.wait_stream(b)
    a.wait_event(b.record_event())
    assert x.grad is not None
    assert type(instrumentation.current()) is Instrumentation


# ------------------------------------------------------------------ streams


def test_stream_waits_and_event_records_are_recorded_on_their_stream():
    a, b = Stream("sim:0"), Stream("sim:0")
    with profiler.profile() as prof:
        event = b.record_event()
        a.wait_event(event)
        a.wait_stream(b)
        a.wait_event(Event())  # never recorded: a no-op, nothing to record
    names = [e.name for e in prof.events]
    assert names == ["record_event", "wait_event", "wait_stream", "record_event", "wait_event"]
    for e in prof.events:
        assert e.kind == "stream" and e.device == "sim:0"
        assert e.graph_task_id is None and e.reentrant_depth is None
    first_record, first_wait, wait_stream, inner_record, inner_wait = prof.events
    assert first_record.stream == f"sim:0 stream {b.id}"
    assert first_record.args == {"event": f"event {event.id}"}
    assert first_wait.stream == f"sim:0 stream {a.id}"
    assert wait_stream.args == {"other": f"sim:0 stream {b.id}"}
    assert encloses(wait_stream, inner_record) and encloses(wait_stream, inner_wait)
    assert inner_record.stream == f"sim:0 stream {b.id}"


def test_a_stream_operation_begun_before_the_profile_opened_is_not_recorded():
    stream = Stream("sim:0")
    late = profiler.profile()
    with profiler.profile() as early, contextlib.ExitStack() as stack:
        # The Recorder starts timing this wait, and `late` opens inside it.
        instrumentation.current().stream_op(
            "wait_event", stream, {}, lambda: stack.enter_context(late)
        )
        assert late.is_open
        stream.record_event()  # begun after both opened: both record it
    assert [e.name for e in early.events] == ["wait_event", "record_event"]
    assert [e.name for e in late.events] == ["record_event"]
    assert all(e.start >= late.started_ns for e in late.events)


# ------------------------------------------------------------------ profiles


def test_profiles_nest_and_each_sees_what_happened_while_it_was_open():
    x = leaf([1.0])
    with profiler.profile() as outer:
        chain(x, 1).backward()
        with profiler.profile() as inner:
            chain(x, 2).backward()
        assert profiler.is_active() and not inner.is_open and outer.is_open
        chain(x, 3).backward()
    assert len(nodes(inner)) == 2 + 2
    assert len(nodes(outer)) == (1 + 2) + (2 + 2) + (3 + 2)
    assert {id(e) for e in inner.events} <= {id(e) for e in outer.events}


def test_a_profile_cannot_be_opened_twice():
    prof = profiler.profile()
    with prof:
        pass
    with pytest.raises(RuntimeError, match="already used"), prof:
        pass


def test_table_summarizes_by_name_and_rejects_an_unknown_sort_key():
    x = leaf([1.0])
    with profiler.profile() as prof:
        chain(x, 5).backward()
    summary = {s.name: s for s in prof.key_averages()}
    assert summary["MulBackward0"].count == 5
    assert summary["MulBackward0"].total_ns == sum(
        e.duration for e in prof.events if e.name == "MulBackward0"
    )
    table = prof.table()
    assert table.splitlines()[0].split()[:3] == ["name", "kind", "count"]
    assert "MulBackward0" in table and "AccumulateGrad" in table
    assert len(summary) == 3
    assert prof.table(sort_by="count", limit=2).splitlines()[-1] == "... 1 more rows (limit=2)"
    with pytest.raises(ValueError, match="sort_by"):
        prof.table(sort_by="alphabet")


# ------------------------------------------------------------------ exports


def profile_of_a_small_program(side_stream=None):
    x = leaf([1.0, 2.0])
    y = x * 2.0
    y.grad_fn.stream = side_stream or Stream("sim:0")  # as if its forward ran there
    y.register_hook(lambda g: None)
    loss = y.exp().sum()
    with profiler.profile() as prof:
        loss.backward()
        Stream("sim:0").wait_stream(Stream("sim:0"))
    return prof


def test_chrome_trace_follows_the_trace_event_format(tmp_path: Path):
    side_stream = Stream("sim:0")
    prof = profile_of_a_small_program(side_stream)
    path = prof.export_chrome_trace(tmp_path / "trace.json")
    assert path == tmp_path / "trace.json"
    trace = json.loads(path.read_text(encoding="utf-8"))

    assert isinstance(trace, dict) and isinstance(trace["traceEvents"], list)
    complete = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    metadata = [e for e in trace["traceEvents"] if e["ph"] == "M"]
    assert {e["ph"] for e in trace["traceEvents"]} == {"X", "M"}
    assert len(complete) == len(prof.events)
    for event in complete:
        assert isinstance(event["name"], str) and event["name"]
        assert event["cat"] in profiler.KINDS
        assert isinstance(event["ts"], int | float) and event["ts"] >= 0
        assert isinstance(event["dur"], int | float) and event["dur"] >= 0
        assert isinstance(event["pid"], int) and isinstance(event["tid"], int)
        assert isinstance(event["args"], dict)
        assert {"device", "stream", "graph_task_id", "reentrant_depth"} <= set(event["args"])
    for event in metadata:
        assert {"name", "ph", "pid", "tid", "args"} <= set(event)
    thread_names = {e["tid"]: e["args"]["name"] for e in metadata if e["name"] == "thread_name"}
    assert {e["tid"] for e in complete} <= set(thread_names)
    assert threading.current_thread().name in thread_names.values()
    cats = {e["cat"] for e in complete}
    assert cats == {"node", "hook", "stream"}
    mul = next(e for e in complete if e["name"] == "MulBackward0")
    assert mul["args"]["stream"] == f"sim:0 stream {side_stream.id}"
    assert mul["args"]["device"] == "sim:0"
    assert mul["args"]["sequence_nr"] >= 0


def test_plot_timeline_writes_a_png_with_a_row_per_thread_and_stream(tmp_path: Path):
    pytest.importorskip("matplotlib")
    prof = profile_of_a_small_program()
    path = prof.plot_timeline(tmp_path / "timeline.png")
    assert path == tmp_path / "timeline.png"
    data = path.read_bytes()
    assert data.startswith(PNG_SIGNATURE) and len(data) > 5_000
    rows = {(e.thread, e.stream) for e in prof.events}
    assert len(rows) >= 3  # the thread alone, the node's stream, the waiting stream


def test_plot_timeline_names_a_bar_only_where_its_name_fits_inside_it(tmp_path: Path):
    """A name wider than its bar would run into its neighbours' or off the axes: left out."""
    pytest.importorskip("matplotlib")
    import matplotlib.pyplot as plt

    from jaxstream.profiler import timeline

    figure, axes = plt.subplots(figsize=(6.0, 2.0))
    axes.set_xlim(0.0, 10.0)
    bars = [(0.0, 6.0, 0.0, 0.8, "wide"), (6.0, 0.2, 0.0, 0.8, "NarrowBarWithALongName0"),
            (9.9, 0.1, 0.0, 0.8, "AtTheEdge")]
    timeline._label_bars(figure, axes, bars)
    shown = {text.get_text(): text for text in axes.texts}
    assert set(shown) == {"wide"}
    renderer = figure.canvas.get_renderer()
    left, right = (axes.transData.transform((x, 0.0))[0] for x in (0.0, 6.0))
    extent = shown["wide"].get_window_extent(renderer)
    assert left <= extent.x0 and extent.x1 <= right
    plt.close(figure)


def test_plot_timeline_of_an_empty_profile_is_an_error(tmp_path: Path):
    with profiler.profile() as prof:
        pass
    with pytest.raises(ValueError, match="no events"):
        prof.plot_timeline(tmp_path / "empty.png")
    assert not (tmp_path / "empty.png").exists()


def test_plot_timeline_without_matplotlib_says_what_to_install(tmp_path: Path, monkeypatch):
    prof = profile_of_a_small_program()
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(ImportError, match="needs matplotlib"):
        prof.plot_timeline(tmp_path / "timeline.png")
