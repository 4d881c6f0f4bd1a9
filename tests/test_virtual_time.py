"""Virtual time on sim devices: the cost model, the clocks, and what streams are predicted to gain.

The predictions are checked against the model's own bounds (roofline, serial
sums), never against wall-clock time. Most clocks here charge the host the
driver's launch call only (`DEVICE_ONLY`), to hold the device's side of the model
to its bounds; tests/test_virtual_time_host.py holds the host's side.
"""

import json

import numpy as np
import pytest

import jaxstream as js
from jaxstream.devices import profiles
from jaxstream.devices.kernel_cost import op_cost
from jaxstream.devices.virtual_host import HostCosts
from jaxstream.devices.virtual_schedule import Kernel, Marker, Schedule, Wait

pytestmark = pytest.mark.usefixtures("no_leaked_threads")  # conftest.py

DEVICE = "sim:0"
H100 = profiles.H100
DEVICE_ONLY = HostCosts(op_s=0.0, node_s=0.0)
SOME_HOST = HostCosts(op_s=5e-6, node_s=10e-6)
"""A host cost per op well below the kernels' below, and fixed: what the machine's
calibration says (jaxstream/devices/virtual_host_costs.json) is no business of these tests."""


@pytest.fixture(params=["here", "on an H200"])
def any_machine(request, monkeypatch):
    """This machine, and a GPU machine, where `virtual_time()`'s "auto" is the GPU's profile
    with the host costs calibrated there: a test pins what its claim depends on."""
    if request.param != "here":
        monkeypatch.setattr(profiles, "machine_gpu_name", lambda: "NVIDIA H200")


def _leaf(shape, seed=0, requires_grad=False):
    data = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    return js.tensor(data, device=DEVICE, requires_grad=requires_grad)


def _branches(operands, streams, per_branch, serialize=False):
    """Per branch, `per_branch` matmuls of its operands on `streams[k % len]`, under one clock.

    With `serialize`, each stream first waits for the previous one.
    """
    caller = js.current_stream(DEVICE)
    with js.sim.virtual_time("h100", host_costs=DEVICE_ONLY) as clock:
        previous = caller
        for k, (a, b) in enumerate(operands):
            s = streams[k % len(streams)]
            s.wait_stream(previous if serialize else caller)
            with js.stream(s):
                for _ in range(per_branch):
                    js.matmul(a, b)
            previous = s
        for s in streams:
            caller.wait_stream(s)
        caller.synchronize()
    return clock


def _speedup(operands, per_branch, serialize=False):
    """makespan on 4 streams / makespan on 1 stream."""
    four = _branches(operands, [js.Stream(DEVICE) for _ in range(4)], per_branch, serialize)
    one = _branches(operands, [js.Stream(DEVICE)], per_branch)
    return four.makespan / one.makespan


def test_small_kernels_on_four_streams_finish_much_sooner():
    # 256 x 256 outputs are 4 tiles of 132 SMs: each matmul fills 3% of the device.
    operands = [(_leaf((256, 512), k), _leaf((512, 256), k + 10)) for k in range(4)]
    assert _speedup(operands, per_branch=4) < 0.4


def test_large_matmuls_on_four_streams_share_the_device():
    # 1536 x 1536 outputs are 144 tiles: each matmul fills the device.
    operands = [(_leaf((1536, 128), k), _leaf((128, 1536), k + 10)) for k in range(4)]
    assert _speedup(operands, per_branch=2) > 0.9


def test_branches_serialized_by_wait_stream_gain_nothing():
    operands = [(_leaf((256, 512), k), _leaf((512, 256), k + 10)) for k in range(4)]
    assert _speedup(operands, per_branch=4, serialize=True) > 0.99


def test_a_kernel_lasts_at_least_its_roofline_and_a_full_one_not_much_more():
    a, b = _leaf((2048, 256)), _leaf((256, 2048), 1)
    small_a, small_b = _leaf((64, 64)), _leaf((64, 64), 1)
    with js.sim.virtual_time(H100) as clock:
        js.matmul(a, b)
        js.matmul(small_a, small_b)
        js.current_stream(DEVICE).synchronize()
    full, small = clock.kernels
    for kernel in (full, small):
        roofline = max(kernel.details["flops"] / H100.matmul_rate("float32"),
                       kernel.details["bytes"] / H100.memory_bandwidth)
        assert kernel.end - kernel.start >= roofline + H100.kernel_latency_s
    assert full.details["occupancy"] == 1.0
    assert full.details["flops"] == 2 * 2048 * 2048 * 256
    assert full.details["bytes"] == 4 * (2048 * 256 * 2 + 2048 * 2048)
    full_roofline = full.details["flops"] / H100.matmul_rate("float32")
    assert full.end - full.start == pytest.approx(full_roofline + H100.kernel_latency_s)
    assert small.details["occupancy"] < 0.01


def test_cost_model_counts_einsum_vector_kernels_and_dtypes():
    x = np.zeros((8, 16), np.float32)
    w = np.zeros((16, 32), np.float32)
    out = np.zeros((8, 32), np.float32)
    einsum = op_cost("einsum", [x, w], {"subscripts": "ij,jk->ik"}, out, H100)
    assert einsum.flops == 2 * 8 * 16 * 32
    assert einsum.rate == H100.matmul_flops["float32"]
    half = op_cost("matmul", [x.astype(np.float16), w.astype(np.float16)], {},
                   out.astype(np.float16), H100)
    assert half.rate == H100.matmul_flops["float16"]
    assert half.bytes == 2 * (8 * 16 + 16 * 32 + 8 * 32)
    add = op_cost("add", [x, 1.0], {}, x, H100)
    assert (add.flops, add.bytes) == (8 * 16, 2 * 4 * 8 * 16)
    big = op_cost("exp", [np.zeros(1 << 22, np.float32)], {}, np.zeros(1 << 22, np.float32), H100)
    assert big.occupancy == 1.0


def test_events_order_the_stream_clocks():
    a, b = _leaf((512, 512)), _leaf((512, 512), 1)
    producer, consumer = js.Stream(DEVICE), js.Stream(DEVICE)
    for s in (producer, consumer):
        s.wait_stream(js.current_stream(DEVICE))
    with js.sim.virtual_time() as clock:
        with js.stream(producer):
            js.matmul(a, b)
            done = producer.record_event()
        consumer.wait_event(done)
        with js.stream(consumer):
            js.tanh(a)
        js.current_stream(DEVICE).synchronize()
    made, used = clock.kernels
    assert used.start >= made.end
    assert clock.busy(producer) == pytest.approx(made.end - made.start)
    assert clock.busy(consumer) == pytest.approx(used.end - used.start)
    assert clock.busy(js.Stream(DEVICE)) == 0.0


def test_launches_are_asynchronous_and_host_reads_wait(any_machine):
    a = _leaf((1024, 1024))
    with js.sim.virtual_time("h100", host_costs=SOME_HOST) as clock:
        first = js.matmul(a, a)
        js.matmul(first, a)
        first.sum().item()
        js.tanh(a)
    first_mm, second_mm, total, read, after = clock.kernels
    assert first_mm.ready < first_mm.end  # the host went on while the kernel ran
    assert second_mm.start == pytest.approx(first_mm.end)
    assert read.name == "copy to host" and read.start >= total.end
    # the host waited for the read before it launched the next kernel, then issued it
    op_host = clock.host_costs.op_s + H100.host_launch_s
    assert after.ready == pytest.approx(read.end + op_host)
    assert clock.makespan == pytest.approx(after.end)


def test_values_are_still_computed_and_views_launch_no_kernel():
    a, b = _leaf((4, 3)), _leaf((3, 5), 1)
    with js.sim.virtual_time() as clock:
        product = js.matmul(a, b)
        flat = product.reshape(20)
        got = flat.numpy()
    np.testing.assert_allclose(got, (a.numpy() @ b.numpy()).reshape(20), rtol=1e-6)
    assert [k.name for k in clock.kernels] == ["matmul", "copy to host"]


def test_only_kernels_inside_the_block_count():
    a = _leaf((64, 64))
    js.tanh(a)
    with js.sim.virtual_time() as clock:
        js.exp(a)
    js.tanh(a)
    assert [k.name for k in clock.kernels] == ["exp"]
    assert clock.makespan > 0


def test_devices_do_not_share_their_sms(any_machine):
    big = np.ones((1 << 22,), np.float32)
    on = [js.tensor(big.copy(), device=f"sim:{i}") for i in (0, 1)]
    # The second launch is issued while the first kernel runs only where the host's cost
    # of an op is below the kernel's: the device's side alone, on a profile named.
    with js.sim.virtual_time("h100", host_costs=DEVICE_ONLY) as clock:
        for t in on:
            js.exp(t)
    first, second = clock.kernels
    assert second.start < first.end  # they overlap, each at full speed
    assert second.end - second.start == pytest.approx(first.end - first.start)


def test_the_engine_backward_is_timed_with_its_stream_syncs():
    x = _leaf((128, 128), requires_grad=True)
    weights = [_leaf((128, 128), k + 1, requires_grad=True) for k in range(2)]
    side = [js.Stream(DEVICE) for _ in weights]
    caller = js.current_stream(DEVICE)
    sums = []
    for s, w in zip(side, weights, strict=True):
        s.wait_stream(caller)
        with js.stream(s):
            sums.append(js.tanh(js.matmul(x, w)).sum())
    for s in side:
        caller.wait_stream(s)
    loss = js.stack(sums).sum()
    with js.sim.virtual_time() as clock:
        loss.backward()
        x.grad.numpy()
    streams = set(clock.streams())
    assert set(side) <= streams  # each branch's backward ran on its own stream
    matmuls = [k for k in clock.kernels if k.name == "matmul"]
    assert len(matmuls) == 4  # the two grads of each branch's matmul
    read = clock.kernels[-1]
    assert read.name == "copy to host"
    assert all(k.end <= read.start for k in matmuls)  # the engine's syncs ordered them
    js.autograd.shutdown_engine_threads()


def test_chrome_trace_has_a_track_per_stream(tmp_path, any_machine):
    a = _leaf((256, 256))
    streams = [js.Stream(DEVICE) for _ in range(3)]
    for s in streams:
        s.wait_stream(js.current_stream(DEVICE))
    with js.sim.virtual_time("a100", host_costs=SOME_HOST) as clock:
        for s in streams:
            with js.stream(s):
                js.exp(a)
    host = [e for e in json.loads(json.dumps(clock.chrome_trace()))["traceEvents"]
            if e["pid"] == 0 and e["ph"] == "X"]
    assert len(host) == 1 and host[0]["args"]["launches"] == 3  # issued back to back
    for s in streams:  # `a` was read on them: order its memory's next user after them
        js.current_stream(DEVICE).wait_stream(s)
    path = clock.export_chrome_trace(tmp_path / "virtual.json")
    trace = json.loads(path.read_text())
    spans = [e for e in trace["traceEvents"] if e["ph"] == "X" and e["pid"] != 0]
    assert len(spans) == 3 and {e["tid"] for e in spans} == {s.id for s in streams}
    names = {e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "thread_name"}
    assert trace["otherData"]["verdict"] == "host-bound"  # three tiny kernels
    assert names == {f"stream {s.id}" for s in streams}
    assert trace["otherData"]["profile"] == "a100"


def test_the_profiler_timeline_draws_virtual_time(tmp_path):
    a = _leaf((256, 256))
    with js.sim.virtual_time() as clock:
        js.exp(a)
    path = js.profiler.profile().plot_timeline(tmp_path / "virtual.png", clock=clock)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with js.sim.virtual_time() as empty:
        pass
    with pytest.raises(ValueError, match="saw no sim kernels"):
        js.profiler.profile().plot_timeline(tmp_path / "empty.png", clock=empty)


def test_unknown_profile_lists_the_known_ones():
    with pytest.raises(ValueError, match="a100, h100, h200, t4 and 'auto'"):
        js.sim.virtual_time("h200x")


def test_clocks_do_not_nest_and_are_used_once():
    with js.sim.virtual_time() as outer:
        with pytest.raises(RuntimeError, match="cannot be nested"):
            with js.sim.virtual_time("t4"):
                pass
    with pytest.raises(RuntimeError, match="already used"):
        with outer:
            pass


def test_a_clock_is_read_after_its_block():
    clock = js.sim.virtual_time()
    with pytest.raises(RuntimeError, match="once the `with js.sim.virtual_time"):
        _ = clock.makespan
    with clock:
        with pytest.raises(RuntimeError, match="this clock is open"):
            clock.busy(js.current_stream(DEVICE))
    assert clock.makespan == 0.0
    # a launch that reaches the clock after its block ended (another thread's) is ignored
    clock.launch(js.current_stream(DEVICE), "late", op_cost("exp", [], {}, None, H100))
    assert clock.kernels == []


def _kernel(stream, occupancy, work=1.0, latency=0.0, ready=0.0, pool="sm"):
    return Kernel(name="k", stream=stream, pool=pool, ready=ready, latency=latency, work=work,
                  occupancy=occupancy)


@pytest.mark.parametrize(
    ("occupancies", "ends"),
    [
        ((0.5, 0.5), (1.0, 1.0)),  # they fit side by side: full speed
        ((1.0, 1.0), (2.0, 2.0)),  # each gets half the device
        ((1.0, 0.25), (1.25, 1.25)),  # 1.25 demanded: both at 1 / 1.25 of their speed
    ],
)
def test_kernels_share_a_pool_as_processors_share_time(occupancies, ends):
    schedule = Schedule()
    kernels = [_kernel(f"s{i}", o) for i, o in enumerate(occupancies)]
    for kernel in kernels:
        schedule.push(kernel.stream, kernel)
    assert schedule.run_all() == pytest.approx(max(ends))
    assert [k.end for k in kernels] == pytest.approx(list(ends))


def test_a_kernel_speeds_up_when_its_neighbour_ends_and_latency_fills_nothing():
    schedule = Schedule()
    short, long = _kernel("a", 1.0, work=1.0), _kernel("b", 1.0, work=3.0, latency=0.5)
    schedule.push("a", short)
    schedule.push("b", long)
    schedule.run_all()
    # a runs alone while b waits out its latency, then both share until a is done
    assert short.end == pytest.approx(0.5 + 2 * 0.5)
    assert long.end == pytest.approx(short.end + (3.0 - 0.5))


def test_pools_and_issue_times_are_respected():
    schedule = Schedule()
    on_sms, on_copy = _kernel("a", 1.0), _kernel("b", 1.0, pool="copy")
    late = _kernel("a", 0.1, ready=5.0)
    for kernel in (on_sms, on_copy, late):
        schedule.push(kernel.stream, kernel)
    schedule.run_all()
    assert on_sms.end == on_copy.end == pytest.approx(1.0)
    assert late.start == pytest.approx(5.0)


def test_a_wait_holds_its_stream_until_the_marker_is_reached():
    schedule = Schedule()
    first = _kernel("a", 0.1, work=2.0)
    schedule.push("a", first)
    mark = Marker(ready=0.0)
    schedule.push("a", mark)
    schedule.push("b", Wait(ready=0.0, marker=mark))
    second = _kernel("b", 0.1)
    schedule.push("b", second)
    assert schedule.run_until(mark) == pytest.approx(2.0)
    schedule.run_all()
    assert second.start == pytest.approx(2.0)


def test_event_synchronize_and_query_move_the_host_clock():
    a = _leaf((1024, 1024))
    with js.sim.virtual_time("h100", host_costs=DEVICE_ONLY) as clock:
        js.matmul(a, a)
        done = js.current_stream(DEVICE).record_event()
        done.synchronize()
        js.tanh(a)
        assert js.current_stream(DEVICE).query()
        js.exp(a)
    product, tanh, exp = clock.kernels
    assert tanh.ready == pytest.approx(product.end + H100.host_launch_s)
    assert exp.ready == pytest.approx(tanh.end + H100.host_launch_s)


def test_the_cost_is_the_same_on_every_backend():
    data = np.random.default_rng(0).standard_normal((96, 64)).astype(np.float32)
    seen = []
    for backend in ("numpy", "jax"):
        a = js.tensor(data, device=DEVICE, backend=backend)
        with js.sim.virtual_time() as clock:
            product = js.matmul(a, a.T)
            js.tanh(product).sum().item()
        seen.append([(k.name, k.details, k.end - k.start) for k in clock.kernels])
    assert seen[0] == seen[1]
