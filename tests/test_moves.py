"""Moves between backends and devices: `Tensor.to`, `js.tensor` of DLPack producers, `numpy()`.

Every pair this machine has is tested (numpy and jax, on cpu, sim:0 and sim:1),
with gradients through `to` (ToCopyBackward0) against the float64 derivative; the CUDA paths
run where a GPU with CuPy is present, and their error paths everywhere else.
"""

from __future__ import annotations

import itertools

import jax
import numpy as np
import pytest

import jaxstream as js
import jaxstream.devices
from jaxstream.devices import cuda as cuda_kind
from jaxstream.devices import cuda_device_count, xla

pytestmark = pytest.mark.usefixtures("no_leaked_threads")  # conftest.py

PLACES = [(backend, dev) for backend in ("numpy", "jax") for dev in ("cpu", "sim:0", "sim:1")]
PAIRS = list(itertools.permutations(PLACES, 2))


def make(backend: str, dev: str, values=(1.0, -2.0, 3.0), requires_grad: bool = False):
    return js.tensor(np.asarray(values, np.float32), backend=backend, device=dev,
                     requires_grad=requires_grad)


def settle():
    """Order every sim stream before the host's next reads (tests read values at the end)."""
    for dev in ("sim:0", "sim:1"):
        js.current_stream(dev).synchronize()
        js.xla_stream(dev).synchronize()


@pytest.mark.parametrize(("source", "target"), PAIRS, ids=lambda p: "-".join(p))
def test_to_moves_values_between_every_pair(source, target):
    t = make(*source)
    moved = t.to(target[1], backend=target[0])
    assert (moved.backend, str(moved.device)) == target
    settle()
    np.testing.assert_array_equal(moved.numpy(), [1.0, -2.0, 3.0])
    if source[1] != target[1]:
        assert not np.shares_memory(moved.numpy(), t.numpy()), "another device is a copy"


@pytest.mark.parametrize(("source", "target"), PAIRS, ids=lambda p: "-".join(p))
def test_gradients_flow_back_through_to(source, target):
    x = make(*source, requires_grad=True)
    y = x.to(target[1], backend=target[0])
    assert y.grad_fn.name() == "ToCopyBackward0"
    (js.sin(y) * y).sum().backward()
    settle()
    # d/dv sum(sin(v) * v) in float64 NumPy: jax.grad would run on JAX's default device (a
    # GPU's sin differs by an ulp); float32's rounding allows an ulp or two of each term.
    v = np.asarray([1.0, -2.0, 3.0])
    assert (x.grad.backend, str(x.grad.device)) == source
    np.testing.assert_allclose(x.grad.numpy(), np.sin(v) + v * np.cos(v), rtol=1e-6, atol=1e-6)


def test_to_with_nothing_to_change_returns_the_tensor():
    t = make("jax", "sim:1")
    assert t.to("sim:1") is t and t.to(backend="jax") is t


def test_to_a_backend_alone_keeps_the_device():
    t = make("numpy", "sim:1").to(backend="jax")
    assert (t.backend, str(t.device)) == ("jax", "sim:1")


def test_js_tensor_of_a_foreign_cpu_dlpack_producer_goes_to_numpy(torch):
    source = torch.arange(4, dtype=torch.float32)
    t = js.tensor(source)
    assert t.backend == "numpy" and np.shares_memory(t.numpy(), source.numpy())
    assert js.from_dlpack(source).backend == "numpy"


def test_js_tensor_of_a_numpy_array_for_a_sim_device_while_another_is_current():
    js.set_device("sim:0")
    t = js.tensor(np.ones(2, np.float32), backend="jax", device="sim:1")
    assert (t.backend, str(t.device)) == ("jax", "sim:1")


class CudaProducer:
    """A DLPack producer in CUDA memory (device type 2), as CuPy's or torch's GPU tensors."""

    def __dlpack_device__(self):
        return (2, 0)

    def __dlpack__(self, stream=None):
        raise AssertionError("never read: there is nowhere to import it here")


INSTALL = r"pip install 'jaxstream\[cuda13\]' \(CUDA 13\) or 'jaxstream\[cuda12\]' \(CUDA 12\)"
needs_no_gpu = pytest.mark.skipif(cuda_device_count() > 0, reason="a GPU is present")


@needs_no_gpu
def test_moves_to_cuda_without_a_gpu_name_what_is_missing():
    t = make("numpy", "cpu")
    with pytest.raises(RuntimeError, match=f"cuda:0 is unavailable.*{INSTALL}"):
        t.to("cuda:0")
    with pytest.raises(RuntimeError, match=f"CuPy is not installed: {INSTALL}"):
        t.to(backend="cupy")
    with pytest.raises(RuntimeError, match="cuda:0 is unavailable"):
        js.tensor(CudaProducer())
    with pytest.raises(RuntimeError, match="cuda:0 is unavailable"):
        js.tensor(np.ones(2), device="cuda:0")


@pytest.fixture
def one_gpu_without_cupy(monkeypatch):
    """A machine where JAX or the driver sees one GPU but CuPy is not installed."""
    monkeypatch.setattr(cuda_kind, "_cupy", lambda: None)
    monkeypatch.setattr(cuda_kind.CudaKind, "device_count", lambda self: 1)


@needs_no_gpu
def test_without_cupy_cuda_streams_and_cupy_arrays_name_the_missing_package(one_gpu_without_cupy):
    with pytest.raises(ImportError, match=f"CuPy is not installed: {INSTALL}"):
        js.Stream("cuda:0")
    default = js.default_stream("cuda:0")
    assert default.native is None, "no CuPy: the default stream is a host-side one"
    with pytest.raises(RuntimeError, match="CuPy is not installed"):
        js.tensor(CudaProducer())
    with pytest.raises(RuntimeError, match="CuPy is not installed"):
        make("numpy", "cpu").to("cuda:0")


@needs_no_gpu
def test_a_backend_that_cannot_hold_the_device_says_so(one_gpu_without_cupy):
    t = make("numpy", "cpu")
    with pytest.raises(RuntimeError, match="on the numpy backend: numpy arrays live in host"):
        t.to("cuda:0", backend="numpy")
    with pytest.raises(RuntimeError, match="on the jax backend: JAX sees no GPU cuda:0"):
        t.to("cuda:0", backend="jax")
    with pytest.raises(RuntimeError, match="cannot make a jax tensor on cuda:0: JAX sees no"):
        js.tensor(np.ones(2, np.float32), backend="jax", device="cuda:0")


@pytest.fixture
def jax_gpu_is_its_cpu(one_gpu_without_cupy, monkeypatch):
    """JAX's cpu device plays its GPU 0: cuda:0 arrays are JAX arrays, and there is no CuPy."""
    fake = (jax.devices("cpu")[0],)
    for module in (cuda_kind, jaxstream.devices):
        monkeypatch.setattr(module, "jax_gpus", lambda: fake)


@needs_no_gpu
def test_jax_arrays_on_a_gpu_need_no_cupy(jax_gpu_is_its_cpu):
    gpu = js.device("cuda:0")
    x = js.tensor(np.array([1.0, 2.0], np.float32), backend="jax", device=gpu,
                  requires_grad=True)
    y = (x * x).sum()
    assert y.device == gpu and y.item() == 5.0
    y.backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 4.0])
    assert js.default_stream(gpu).native is None, "no CuPy: no CuPy stream was asked for"
    # XLA's stream, natively (Note [XLA's stream]): a recorded point completes with XLA's work.
    stream = js.xla_stream(gpu)
    assert isinstance(stream.native, xla.XlaStream)
    event = stream.record_event()
    event.synchronize()
    assert event.query() and stream.query()
    js.default_stream(gpu).wait_event(event)  # a host wait: nothing native can wait for it


def test_a_move_to_another_device_on_its_side_stream_and_the_gradient_back():
    """The sim twin of the two-GPU test below: a copy between devices, ordered by events."""
    x = make("numpy", "sim:0", requires_grad=True)
    side = js.Stream("sim:1")
    with js.stream(side):
        y = x.to("sim:1") * 2.0
        assert y.device == "sim:1"
        y.sum().backward()
    js.synchronize("sim:0")
    assert x.grad.device == "sim:0"
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0, 2.0])


# --- on a GPU ------------------------------------------------------------------------------


@pytest.mark.cuda
class TestCuda:
    def test_every_pair_with_cuda(self):
        import cupy

        places = [("numpy", "cpu"), ("jax", "cpu"), ("numpy", "sim:0"), ("cupy", "cuda:0")]
        if jax.devices()[0].platform == "gpu":
            places.append(("jax", "cuda:0"))
        for source, target in itertools.permutations(places, 2):
            t = make(*source)
            moved = t.to(target[1], backend=target[0])
            assert (moved.backend, str(moved.device)) == target
            np.testing.assert_array_equal(moved.numpy(), [1.0, -2.0, 3.0])
        assert isinstance(make("numpy", "cpu").to("cuda:0").array, cupy.ndarray)

    def test_gradients_through_a_move_to_the_gpu(self):
        x = make("numpy", "cpu", requires_grad=True)
        (x.to("cuda:0") * 2.0).sum().backward()
        np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0, 2.0])

    def test_cupy_arrays_and_producers_import_without_numpy(self):
        import cupy

        array = cupy.arange(3, dtype=cupy.float32)
        assert js.tensor(array).backend == "cupy"
        assert js.from_dlpack(array).device == "cuda:0"
        np.testing.assert_array_equal(js.tensor(array).numpy(), [0.0, 1.0, 2.0])

    def test_a_tensor_for_gpu_1_is_made_there_and_read_from_gpu_0(self):
        if cuda_device_count() < 2:
            pytest.skip("needs two CUDA GPUs")
        js.set_device("cuda:0")
        t = js.tensor(np.ones(3, np.float32), backend="cupy", device="cuda:1")
        assert t.device == "cuda:1" and t.array.device.id == 1
        np.testing.assert_array_equal(t.numpy(), [1.0, 1.0, 1.0])

    def test_a_move_between_two_gpus_is_ordered_and_its_gradient_comes_back(self):
        if cuda_device_count() < 2:
            pytest.skip("needs two CUDA GPUs")
        x = make("cupy", "cuda:0", requires_grad=True)
        side = js.Stream("cuda:1")
        with js.stream(side):
            y = x.to("cuda:1") * 2.0  # side waits for cuda:0's stream, then a peer copy
            assert y.device == "cuda:1" and y.array.device.id == 1
            y.sum().backward()
        js.synchronize("cuda:0")
        assert x.grad.device == "cuda:0"
        np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0, 2.0])
