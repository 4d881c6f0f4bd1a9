"""The host side of virtual time: a host that issues in program order, what it is charged, and
what it leaves streams to gain (Note [Virtual time] in jaxstream/devices/virtual_time.py).

The model is held to its own structure, never to wall-clock time: a host-bound workload gains
nothing from streams, one whose kernels hide the host does, serialized streams gain nothing, no
kernel beats its roofline, and the host's time follows the number of ops, not their size.
"""

import json
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import jaxstream as js
from jaxstream.devices import profiles
from jaxstream.devices.virtual_host import HOST_COSTS_ENV, HostCosts, host_costs, store_calibration
from jaxstream.profiler.timeline import _timeline_rows
from jaxstream.profiler.virtual import HOST_ROW, virtual_events

pytestmark = pytest.mark.usefixtures("no_leaked_threads")  # conftest.py

DEVICE = "sim:0"
H100 = profiles.H100
GPU_LIKE = HostCosts(op_s=50e-6, node_s=90e-6)
"""What jaxstream's host spends per op and per node on a GPU: tens of microseconds."""
BRANCHES = 4


def _leaf(shape, seed=0, requires_grad=False):
    data = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    return js.tensor(data, device=DEVICE, requires_grad=requires_grad)


def _run(op, operands, streams, per_branch, costs, serialize=False):
    """Per branch, `per_branch` ops `op` of its operands on `streams[k % len]`, under one clock;
    with `serialize`, each stream first waits for the previous one."""
    caller = js.current_stream(DEVICE)
    with js.sim.virtual_time("h100", host_costs=costs) as clock:
        previous = caller
        for k, branch in enumerate(operands):
            s = streams[k % len(streams)]
            s.wait_stream(previous if serialize else caller)
            with js.stream(s):
                for _ in range(per_branch):
                    op(*branch)
            previous = s
        for s in streams:
            caller.wait_stream(s)
        caller.synchronize()
    return clock


def _four_and_one(op, operands, per_branch, costs, serialize=False):
    four = _run(op, operands, [js.Stream(DEVICE) for _ in range(BRANCHES)], per_branch, costs,
                serialize)
    one = _run(op, operands, [js.Stream(DEVICE)], per_branch, costs)
    return four, one


def _small():
    return [(_leaf((1024,), k),) for k in range(BRANCHES)]


def _long():
    # A 128 x 128 output is one tile of 132 SMs, and a contraction of 4096 makes it last
    # about 260 us: long against the host's tens of microseconds, small against the device.
    return [(_leaf((128, 4096), k), _leaf((4096, 128), k + 10)) for k in range(BRANCHES)]


@pytest.mark.parametrize("costs", [None, GPU_LIKE], ids=["calibrated", "gpu-like"])
def test_a_host_bound_workload_gains_nothing_from_four_streams(costs):
    four, one = _four_and_one(js.tanh, _small(), per_branch=8, costs=costs)
    assert one.makespan / four.makespan <= 1.3
    assert four.verdict == one.verdict == "host-bound"
    assert one.host_share > 0.5


def test_kernels_long_enough_to_hide_the_host_gain_from_four_streams():
    four, one = _four_and_one(js.matmul, _long(), per_branch=2, costs=GPU_LIKE)
    assert one.makespan / four.makespan > 2.0
    assert one.verdict == "device-bound" and one.host_share < 0.5


def test_serialized_streams_gain_nothing():
    four, one = _four_and_one(js.matmul, _long(), per_branch=2, costs=GPU_LIKE, serialize=True)
    assert four.makespan >= one.makespan * 0.99


@pytest.mark.parametrize("workload", [_small, _long], ids=["small", "long"])
def test_no_kernel_beats_its_roofline_and_none_starts_before_it_was_issued(workload):
    op = js.matmul if workload is _long else js.tanh
    four, _ = _four_and_one(op, workload(), per_branch=2, costs=GPU_LIKE)
    for kernel in four.kernels:
        roofline = max(kernel.details["flops"] / H100.matmul_rate("float32"),
                       kernel.details["bytes"] / H100.memory_bandwidth)
        assert kernel.end - kernel.start >= roofline + H100.kernel_latency_s
        assert kernel.start >= kernel.ready
    issued = [kernel.ready for kernel in four.kernels]
    assert issued == sorted(issued)  # one host thread, in program order


@settings(max_examples=4, deadline=None)
@given(ops=st.integers(1, 6), size=st.sampled_from([16, 1 << 14, 1 << 18]))
def test_the_host_time_grows_with_the_number_of_ops_not_their_size(ops, size):
    x = _leaf((size,))
    with js.sim.virtual_time("h100", host_costs=GPU_LIKE) as clock:
        for _ in range(ops):
            js.exp(x).reshape(-1)  # the view launches nothing and costs the host nothing
    assert clock.host_busy == pytest.approx(ops * (GPU_LIKE.op_s + H100.host_launch_s))
    assert len(clock.host_spans) == 1 and clock.host_spans[0].ops == ops  # back to back


def test_a_backward_op_is_charged_its_share_of_a_node():
    costs = HostCosts(op_s=1e-6, node_s=30e-6, ops_per_node=3.0)
    x = _leaf((256,), requires_grad=True)
    loss = js.tanh(js.tanh(x)).sum()
    with js.sim.virtual_time("h100", host_costs=costs) as clock:
        loss.backward()
    js.autograd.shutdown_engine_threads()
    ops = [k for k in clock.kernels if k.details["engine"] == "sm"]
    copies = len(clock.kernels) - len(ops)
    assert ops and clock.host_busy == pytest.approx(
        len(ops) * (10e-6 + H100.host_launch_s) + copies * H100.host_launch_s
    )


def test_the_timeline_draws_the_host_above_the_streams(tmp_path):
    x, streams = _leaf((64,)), [js.Stream(DEVICE) for _ in range(2)]
    with js.sim.virtual_time("h100", host_costs=GPU_LIKE) as clock:
        for s in streams:
            s.wait_stream(js.current_stream(DEVICE))
            with js.stream(s):
                js.tanh(x)
    for s in streams:  # `x` was read on them: order its memory's next user after them
        js.current_stream(DEVICE).wait_stream(s)
    events = virtual_events(clock)
    assert events[0].kind == "host" and sum(e.kind == "kernel" for e in events) == 2
    rows = _timeline_rows(events)
    assert rows[HOST_ROW] == 0 and len(rows) == 3
    path = js.profiler.profile().plot_timeline(tmp_path / "host.png", clock=clock)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert clock.chrome_trace()["otherData"]["verdict"] == "host-bound"


def test_the_h200_is_the_h100_with_faster_memory():
    h200 = js.sim.virtual_time("h200").profile
    assert h200.memory_bandwidth == 4.8e12 and h200.memory_bandwidth > H100.memory_bandwidth
    for field in ("sms", "threads_per_sm", "vector_flops", "matmul_flops", "host_link"):
        assert getattr(h200, field) == getattr(H100, field)


@pytest.mark.parametrize(("gpu", "profile"), [
    ("NVIDIA H100 80GB HBM3", "h100"), ("NVIDIA H200", "h200"), ("NVIDIA A100-SXM4-80GB", "a100"),
    ("Tesla T4", "t4"), ("NVIDIA H100 PCIe", None), ("NVIDIA H200 NVL", None),
])
def test_a_gpu_is_matched_to_its_profile_by_name(gpu, profile):
    found = profiles.profile_for_gpu(gpu)
    assert (found and found.name) == profile


def test_auto_is_the_machines_gpu_else_the_default(monkeypatch):
    monkeypatch.setattr(profiles, "machine_gpu_name", lambda: None)
    assert js.sim.virtual_time().profile.name == profiles.DEFAULT_PROFILE
    monkeypatch.setattr(profiles, "machine_gpu_name", lambda: "NVIDIA H200")
    assert js.sim.virtual_time("auto").profile.name == "h200"
    monkeypatch.setattr(profiles, "machine_gpu_name", lambda: "NVIDIA GeForce RTX 4090")
    with pytest.warns(UserWarning, match="no device profile describes .*RTX 4090"):
        assert js.sim.virtual_time().profile.name == profiles.DEFAULT_PROFILE


def test_a_stored_calibration_is_read_per_profile_and_backend(tmp_path, monkeypatch):
    target = tmp_path / "costs.json"
    target.write_text(json.dumps({"default": {"source": "a CPU", "backends": {
        "cupy": {"op_us": 8.0, "node_us": 20.0, "ops_per_node": 2.0},
        "numpy": {"op_us": 5.0, "node_us": 9.0, "ops_per_node": 1.0},
    }}}))
    store_calibration("h200", {"cupy": HostCosts(op_s=60e-6, node_s=90e-6)}, "an H200", target)
    monkeypatch.setenv(HOST_COSTS_ENV, str(target))
    measured = js.sim.virtual_time("h200").host_costs
    assert (measured.op_s, measured.per_op(True)) == pytest.approx((60e-6, 90e-6))
    assert "the h200 GPU" in measured.source
    assert host_costs("h100", "cupy").per_op(True) == pytest.approx(10e-6)  # the default's
    assert host_costs("h200", "numpy").op_s == pytest.approx(5e-6)  # not measured there
    with pytest.raises(ValueError, match="no host costs for backend 'jax'.*cupy, numpy"):
        js.sim.virtual_time("h200", backend="jax")


def test_bad_host_costs_and_a_missing_calibration_say_what_to_do(tmp_path, monkeypatch):
    with pytest.raises(ValueError, match="non-negative seconds"):
        HostCosts(op_s=-1.0, node_s=0.0)
    with pytest.raises(ValueError, match="positive count of ops per node"):
        HostCosts(op_s=0.0, node_s=1.0, ops_per_node=0.0)
    monkeypatch.setenv(HOST_COSTS_ENV, str(tmp_path / "missing.json"))
    with pytest.raises(RuntimeError, match=f"cannot read its host calibration.*{HOST_COSTS_ENV}"):
        js.sim.virtual_time("h100")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # given costs need no calibration file
        assert js.sim.virtual_time("h100", host_costs=GPU_LIKE).host_costs is GPU_LIKE


STREAM_COSTS = HostCosts(op_s=20e-6, node_s=40e-6, product_op_s=60e-6, record_s=3e-6,
                         wait_s=5e-6, switch_s=7e-6)
"""Figures apart enough that a charge tells which figure it was."""
LAUNCH_S = STREAM_COSTS.op_s + H100.host_launch_s


def test_a_record_and_a_wait_cost_the_host_and_show_on_its_track():
    x, side = _leaf((64,)), js.Stream(DEVICE)
    with js.sim.virtual_time("h100", host_costs=STREAM_COSTS) as clock:
        js.tanh(x)
        side.wait_stream(js.current_stream(DEVICE))  # a record on the caller, a wait on side
    assert clock.host_busy == pytest.approx(LAUNCH_S + 3e-6 + 5e-6)
    spans = clock.host_spans
    assert [(span.kind, span.ops) for span in spans] == [("launch", 1), ("stream", 2)]
    assert spans[1].name == "2 stream ops, record_event first"
    assert spans[1].end - spans[1].start == pytest.approx(8e-6)
    trace = [e for e in clock.chrome_trace()["traceEvents"] if e["ph"] == "X" and e["pid"] == 0]
    assert [e["cat"] for e in trace] == ["host launch", "host stream"]
    assert trace[1]["args"] == {"stream_ops": 2}


def test_a_forward_switching_streams_pays_a_switch_per_change_of_launching_stream():
    x, streams = _leaf((64,)), [js.Stream(DEVICE) for _ in range(2)]
    caller = js.current_stream(DEVICE)
    for s in streams:  # ordered before the clock: it charges the switches only
        s.wait_stream(caller)
    with js.sim.virtual_time("h100", host_costs=STREAM_COSTS) as clock:
        for s in [*streams, streams[1], streams[0]]:  # changes: 0 -> 1, 1 -> 0
            with js.stream(s):
                js.tanh(x)
    for s in streams:
        caller.wait_stream(s)
    assert clock.host_busy == pytest.approx(4 * LAUNCH_S + 2 * 7e-6)
    assert [span.name for span in clock.host_spans if span.kind == "stream"] == [
        "stream switch", "stream switch"]


def test_a_backward_pays_no_switch_its_node_figure_holds_the_engines_own():
    x = _leaf((64,), requires_grad=True)
    loss = js.tanh(x).sum()
    with js.sim.virtual_time("h100", host_costs=STREAM_COSTS) as clock:
        loss.backward()
    js.autograd.shutdown_engine_threads()
    assert all(span.kind == "launch" for span in clock.host_spans)


def _chain_with_events(events):
    """A host-bound chain of 8 tanh, the first `events` of them after an event record."""
    x, caller = _leaf((1024,)), js.current_stream(DEVICE)
    with js.sim.virtual_time("h100", host_costs=STREAM_COSTS) as clock:
        for op in range(8):
            if op < events:
                caller.record_event()
            x = js.tanh(x)
    return clock


@pytest.mark.parametrize("events", [1, 4, 8])
def test_a_host_bound_chains_time_grows_with_its_events(events):
    without, clock = _chain_with_events(0), _chain_with_events(events)
    assert clock.verdict == without.verdict == "host-bound"
    assert clock.makespan - without.makespan == pytest.approx(events * 3e-6, rel=1e-6)
    assert clock.host_busy == pytest.approx(8 * LAUNCH_S + events * 3e-6)


def _products():
    a, b = _leaf((8, 16)), _leaf((16, 8), 1)
    return {
        "matmul": lambda: js.matmul(a, b), "linear": lambda: js.linear(a, b.T),
        "einsum": lambda: js.einsum("ij,jk->ik", a, b),
        "bmm": lambda: js.bmm(a[None], b[None]), "addmm": lambda: js.addmm(a @ b, a, b),
    }


@pytest.mark.parametrize("name", ["matmul", "linear", "einsum", "bmm", "addmm"])
def test_a_product_is_charged_the_product_figure_and_a_vector_op_the_op_figure(name):
    run = _products()[name]
    run()  # builds its operands' views outside the clock
    with js.sim.virtual_time("h100", host_costs=STREAM_COSTS) as clock:
        run()
    assert sum(k.name == name for k in clock.kernels) == 1  # addmm's operand: a matmul more
    assert clock.host_busy == pytest.approx(len(clock.kernels) * (60e-6 + H100.host_launch_s))
    no_product = HostCosts(op_s=20e-6, node_s=40e-6)  # unmeasured: the op figure stands in
    with js.sim.virtual_time("h100", host_costs=no_product) as clock:
        run()
    assert clock.host_busy == pytest.approx(len(clock.kernels) * LAUNCH_S)


def test_a_vector_op_keeps_the_op_figure():
    x = _leaf((4,))
    with js.sim.virtual_time("h100", host_costs=STREAM_COSTS) as clock:
        js.tanh(x)
    assert clock.host_busy == pytest.approx(LAUNCH_S)


def test_missing_figures_fall_back_to_the_defaults_and_the_source_says_so(tmp_path):
    target = tmp_path / "costs.json"
    target.write_text(json.dumps({
        "default": {"source": "a CPU", "backends": {
            "cupy": {"op_us": 8.0, "node_us": 20.0, "ops_per_node": 1.0, "product_op_us": 9.0,
                     "record_us": 3.0, "wait_us": 4.0, "switch_us": 2.0},
            "jax": {"op_us": 9.0, "node_us": 20.0, "ops_per_node": 1.0}}},
        "h200": {"source": "an H200", "backends": {
            "cupy": {"op_us": 26.0, "node_us": 66.0, "ops_per_node": 1.0}}},
    }))
    gpu = host_costs("h200", "cupy", target)
    assert (gpu.record_s, gpu.wait_s, gpu.switch_s) == pytest.approx((3e-6, 4e-6, 2e-6))
    assert gpu.product_op_s is None and gpu.per_op(False, product=True) == pytest.approx(26e-6)
    assert "record_us, wait_us, switch_us from the default entry" in gpu.source
    assert "no product_op_us: op_us stands in for products" in gpu.source
    cpu = host_costs("h100", "cupy", target)
    assert cpu.product_op_s == pytest.approx(9e-6) and "default entry" not in cpu.source
    unmeasured = host_costs("h200", "jax", target)
    assert unmeasured.stream_work("wait") == 0.0
    assert "record_us, wait_us, switch_us not measured (no host cost)" in unmeasured.source
    with pytest.raises(ValueError, match="non-negative seconds per op, per node and per stream"):
        HostCosts(op_s=0.0, node_s=0.0, wait_s=-1e-6)


def test_stored_figures_round_trip_and_unmeasured_ones_stay_out(tmp_path):
    target = tmp_path / "costs.json"
    target.write_text(json.dumps({"default": {"source": "a CPU", "backends": {}}}))
    store_calibration("h100", {"cupy": STREAM_COSTS, "jax": HostCosts(1e-6, 2e-6)}, "here",
                      target)
    stored = json.loads(target.read_text())["h100"]["backends"]
    assert set(stored["jax"]) == {"op_us", "node_us", "ops_per_node"}
    read = host_costs("h100", "cupy", target)
    for name in ("op_s", "node_s", "product_op_s", "record_s", "wait_s", "switch_s"):
        assert getattr(read, name) == pytest.approx(getattr(STREAM_COSTS, name))
