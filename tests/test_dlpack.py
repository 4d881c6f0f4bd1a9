"""DLPack exchange: `js.from_dlpack`, `Tensor.__dlpack__` / `__dlpack_device__`, zero-copy."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxstream as js
from experiments.harness import cupy_stand_in
from jaxstream import sanitizer
from jaxstream.devices import cuda as cuda_kind
from jaxstream.jax_interop import jax_function

CPU_DEVICE = (1, 0)  # (kDLCPU, device 0)


def _aligned(n: int, alignment: int = 64) -> np.ndarray:
    """A float32 array whose buffer XLA's CPU client can adopt without copying."""
    buffer = np.zeros(n * 4 + alignment, np.uint8)
    start = (-buffer.ctypes.data) % alignment
    array = buffer[start : start + n * 4].view(np.float32)
    array[:] = np.arange(n)
    return array


def _on_jax_cpu(array: np.ndarray) -> jax.Array:
    """`array` on JAX's cpu device, jaxstream's `cpu`: an unplaced JAX array is on JAX's
    default device, which on a GPU machine (and in the GPU twin) is not the cpu."""
    return jax.device_put(array, jax.devices("cpu")[0])


@pytest.mark.parametrize(
    "make", [lambda: np.ones(3, np.float32), lambda: _on_jax_cpu(np.ones(3, np.float32))],
    ids=["numpy", "jax"],
)
def test_cpu_tensors_report_the_cpu_device(make) -> None:
    t = js.tensor(make())
    assert t.device == "cpu"
    assert tuple(t.__dlpack_device__()) == CPU_DEVICE


def test_numpy_tensor_reaches_jax_without_a_copy() -> None:
    array = _aligned(16)
    t = js.tensor(array)
    imported = jax.dlpack.from_dlpack(t)
    assert imported.unsafe_buffer_pointer() == array.ctypes.data
    np.testing.assert_array_equal(imported, array)


def test_from_dlpack_shares_memory_with_numpy_and_jax() -> None:
    array = np.arange(6, dtype=np.float32)
    t = js.from_dlpack(array)
    assert t.backend == "numpy" and np.shares_memory(t.numpy(), array)
    device_array = _on_jax_cpu(np.arange(6.0, dtype=np.float32))
    u = js.from_dlpack(device_array)
    assert (u.backend, u.device) == ("jax", js.device("cpu"))
    assert u.data.unsafe_buffer_pointer() == device_array.unsafe_buffer_pointer()


def test_from_dlpack_of_a_strided_view_keeps_its_strides() -> None:
    base = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = js.from_dlpack(base.T)
    assert np.shares_memory(t.numpy(), base)
    np.testing.assert_array_equal(t.numpy(), base.T)


def test_non_contiguous_tensor_is_made_contiguous_for_jax() -> None:
    base = np.arange(24, dtype=np.float32).reshape(4, 6)
    x = js.tensor(base[:, ::2].T, requires_grad=True)
    seen = []

    def f(a: jax.Array) -> jax.Array:
        seen.append(a.shape)
        return (a * a).sum()

    jax_function(f)(x).backward()
    assert seen == [(3, 4)]
    np.testing.assert_array_equal(x.grad.numpy(), 2 * base[:, ::2].T)


def test_versioned_capsule_is_offered_when_asked() -> None:
    t = js.tensor(np.ones(4, np.float32))
    assert "dltensor_versioned" in repr(t.__dlpack__(max_version=(1, 0)))
    assert "dltensor" in repr(t.__dlpack__(stream=None))


@pytest.mark.parametrize("stream", [-1, 1, 5])
@pytest.mark.parametrize(
    "make",
    [lambda: np.ones(3, np.float32), lambda: _on_jax_cpu(np.ones(3, np.float32))],
    ids=["numpy", "jax"],
)
def test_cpu_tensors_accept_only_the_none_stream(make, stream: int) -> None:
    """The array API: "On CPU and other device types without streams, only None is accepted"."""
    t = js.tensor(make())
    assert t.device == "cpu"
    assert t.__dlpack__(stream=None) is not None
    with pytest.raises(ValueError, match=r"stream=.* a cpu tensor takes None: it has no streams"):
        t.__dlpack__(stream=stream)


@pytest.mark.parametrize("backend", ["numpy", "jax"])
def test_accelerator_tensors_take_the_array_api_streams_and_their_own(backend) -> None:
    """On an accelerator: None, -1, 1, 2, or a stream of the tensor's device (sim stands in
    for cuda, whose runtime would read any other number as a pointer and may crash)."""
    t = js.tensor(np.ones(3, np.float32), backend=backend, device="sim:0")
    side = js.Stream("sim:0")
    for stream in (None, -1, 1, 2, side, js.current_stream("sim:0")):
        np.testing.assert_array_equal(np.from_dlpack(_Capsule(t, stream)), np.ones(3))
    refused = [0, 5, 2**40, -2, 2.0, True, "1", js.Stream("sim:1"), js.xla_stream("sim:0")]
    for stream in refused:
        with pytest.raises(ValueError, match=r"takes None, -1 .*, a js.Stream of sim:0 or its"):
            t.__dlpack__(stream=stream)


class _Capsule:
    """A producer that exports `t` with `stream=`, as a consumer on that stream would ask."""

    def __init__(self, t, stream) -> None:
        self.t, self.stream = t, stream

    def __dlpack__(self, **kwargs):
        kwargs.pop("stream", None)
        return self.t.__dlpack__(stream=self.stream, **kwargs)

    def __dlpack_device__(self):
        return self.t.__dlpack_device__()


def test_a_consumer_stream_waits_for_the_tensor_and_reads_it_there() -> None:
    """A sim tensor exported to a side stream is read there, after the producer's stream (a
    read there without that wait would be a race), and with no host sync: a write on the
    producer's stream that follows is a race until the producer waits for the side stream."""
    producer = js.current_stream("sim:0")
    t = js.tensor(np.ones(3, np.float32), device="sim:0") * 2.0
    side = js.Stream("sim:0")
    t.__dlpack__(stream=side)
    with pytest.raises(js.StreamRaceError, match="write-after-read"):
        sanitizer.check_write(t.array, producer, "overwrite")
    producer.wait_stream(side)
    sanitizer.check_write(t.array, producer, "overwrite")


def test_jax_function_outputs_export_back_to_numpy_without_a_copy() -> None:
    y = jax_function(lambda a: a * 2)(js.tensor(_aligned(8)))
    assert y.backend == "numpy"
    again = np.from_dlpack(y)
    assert np.shares_memory(again, y.numpy())
    assert not again.flags.writeable


# ---------------------------------------------------------------- PyTorch
def test_torch_tensor_round_trip_without_copies() -> None:
    torch = pytest.importorskip("torch")
    source = torch.arange(6, dtype=torch.float32)
    t = js.from_dlpack(source)
    assert t.backend == "numpy" and t.data.ctypes.data == source.data_ptr()
    back = torch.from_dlpack(t)
    assert back.data_ptr() == source.data_ptr()
    on_jax = js.tensor(_on_jax_cpu(np.arange(4.0, dtype=np.float32)))
    assert torch.from_dlpack(on_jax).data_ptr() == on_jax.data.unsafe_buffer_pointer()


def test_gradient_of_a_torch_tensor_through_jaxstream() -> None:
    torch = pytest.importorskip("torch")
    source = torch.linspace(-1, 1, 5)
    x = js.from_dlpack(source).requires_grad_()
    js.tanh(x).sum().backward()
    reference = source.clone().requires_grad_()
    torch.tanh(reference).sum().backward()
    np.testing.assert_allclose(torch.from_dlpack(x.grad).numpy(), reference.grad.numpy(), rtol=1e-6)


# ---------------------------------------------------------------- CuPy (GPU)
@pytest.mark.cuda
def test_cupy_tensor_round_trip_without_copies() -> None:
    import cupy

    source = cupy.arange(8, dtype=cupy.float32)
    t = js.from_dlpack(source)
    assert t.backend == "cupy" and t.data.data.ptr == source.data.ptr
    assert tuple(t.__dlpack_device__()) == (2, source.device.id)
    assert cupy.from_dlpack(t).data.ptr == source.data.ptr


@pytest.mark.cuda
def test_cupy_imports_a_tensor_on_its_current_stream_after_the_tensors_stream() -> None:
    """`cupy.from_dlpack(t)` in a CuPy stream block passes that stream's handle, which jaxstream
    takes, ordering it after the stream the tensor was made on (Note [DLPack streams]). The
    same handle once the stream is no longer current cannot be checked, and is refused."""
    import cupy

    producer = js.Stream("cuda:0")
    consumer = cupy.cuda.Stream(non_blocking=True)
    with js.stream(producer):
        source = js.tensor(cupy.arange(1 << 20, dtype=cupy.float32)) * 2
        with consumer:
            total = float(cupy.from_dlpack(source).sum())
        with pytest.raises(ValueError, match="cannot be checked without CUDA"):
            source.__dlpack__(stream=consumer.ptr)
    # A float32 sum of ~1e12 rounds: compared with the exact float64 one to float32's precision.
    np.testing.assert_allclose(total, float(np.arange(1 << 20, dtype=np.float64).sum() * 2),
                               rtol=1e-5)


@pytest.mark.cuda
@pytest.mark.parametrize("backend", ["cupy", "jax"])
def test_cuda_tensors_cross_to_cupy_and_jax_and_refuse_unknown_handles(backend) -> None:
    """JAX's from_dlpack passes the stream XLA waits on, CuPy's its current stream: both
    taken. A number that is no stream jaxstream can vouch for is refused before any library
    reads it as a pointer (a stray 5 once crashed the process in JAX's `__dlpack__`)."""
    import cupy

    t = js.tensor(np.arange(6, dtype=np.float32), device="cuda:0", backend=backend)
    np.testing.assert_array_equal(np.asarray(jax.dlpack.from_dlpack(t)), np.arange(6))
    consumer = cupy.cuda.Stream(non_blocking=True)
    with consumer:
        np.testing.assert_array_equal(cupy.asnumpy(cupy.from_dlpack(t)), np.arange(6))
    for bogus in (5, 0, consumer.ptr):
        with pytest.raises(ValueError, match=r"takes None, -1 .*, a js.Stream of cuda:0"):
            t.__dlpack__(stream=bogus)


@pytest.mark.cuda
def test_cupy_tensor_through_a_jax_function_keeps_its_backend() -> None:
    import cupy

    x = js.tensor(cupy.linspace(-1, 1, 6, dtype=cupy.float32), requires_grad=True)
    y = jax_function(lambda a: jnp.sin(a).sum())(x)
    y.backward()
    assert x.grad.backend == "cupy"
    np.testing.assert_allclose(cupy.asnumpy(x.grad.data), np.cos(cupy.asnumpy(x.data)), rtol=1e-5)


@pytest.mark.parametrize("backend", ["numpy", "jax"])
def test_a_tensor_that_requires_grad_is_exported_only_detached_as_in_torch(torch, backend) -> None:
    t = js.tensor([1.0, 2.0], backend=backend, requires_grad=True)
    reference = torch.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(BufferError) as theirs:
        np.from_dlpack(reference)
    with pytest.raises(BufferError, match="use tensor.detach") as ours:
        np.from_dlpack(t)
    assert str(ours.value).startswith(str(theirs.value))
    assert "shape (2,)" in str(ours.value)
    np.testing.assert_array_equal(np.from_dlpack(t.detach()), [1.0, 2.0])
    assert torch.from_dlpack((t * 2).detach()).tolist() == [2.0, 4.0]


# ---------------------------------------------------------------- CUDA stream handles, stand-in
@pytest.fixture
def fake_cupy():
    """jaxstream's cuda devices over the CuPy stand-in (Note [The CuPy stand-in])."""
    with cupy_stand_in.installed():
        yield


class _Export:
    """A CuPy array's export as the stand-in cannot make it: records each `stream=` it is
    given and CuPy's current stream then, the one CuPy orders the consumer after."""

    def __init__(self, array) -> None:
        self.array, self.calls = array, []

    def __dlpack__(self, *, stream=None, **kwargs):
        self.calls.append((stream, cupy_stand_in.get_current_stream()))
        return self.array.__dlpack__(**kwargs)


def _exported_cuda_tensor() -> tuple[js.Tensor, _Export]:
    t = js.tensor(np.ones(3, np.float32), device="cuda:0", backend="cupy")
    t.array = export = _Export(t.array)
    return t, export


def test_a_cuda_tensor_takes_cupys_current_stream_and_orders_it_after_its_own(fake_cupy):
    """What `cupy.from_dlpack(t)` does in a stream block: the handle of CuPy's current stream,
    passed on with the tensor's stream current, not the consumer (which would order nothing)."""
    t, export = _exported_cuda_tensor()
    consumer = cupy_stand_in.Stream(non_blocking=True)
    with consumer:
        t.__dlpack__(stream=consumer.ptr)
    assert export.calls == [(consumer.ptr, js.current_stream("cuda:0").native)]
    side = js.Stream("cuda:0")
    with js.stream(side), consumer:
        t.__dlpack__(stream=consumer.ptr)
    assert export.calls[-1] == (consumer.ptr, side.native), "the caller's jaxstream stream"
    with consumer:  # another stream current in CuPy: still ordered after the tensor's
        t.__dlpack__(stream=side.native.ptr)
    assert export.calls[-1] == (side.native.ptr, js.current_stream("cuda:0").native)


def test_a_cuda_tensor_takes_the_stream_jax_waits_on(fake_cupy, monkeypatch):
    """What `jax.dlpack.from_dlpack(t)` passes: read from JAX's device, where it has one.
    XLA hands out the streams of a pool round-robin, a different one at each import, so
    every stream of the pool is taken, whichever JAX's call drew."""

    class Gpu:
        def __init__(self, *pool: int) -> None:
            self.pool, self.calls = pool, 0

        def get_stream_for_external_ready_events(self) -> int:
            if not self.pool:
                raise RuntimeError("UNIMPLEMENTED")
            self.calls += 1
            return self.pool[(self.calls - 1) % len(self.pool)]

    t, export = _exported_cuda_tensor()
    gpu = Gpu(0x7F00, 0x7F10, 0x7F20)
    monkeypatch.setattr(cuda_kind, "jax_gpus", lambda: (gpu,))
    drawn = (0x7F10, 0x7F20, 0x7F00)
    for handle in drawn:
        t.__dlpack__(stream=handle)
    assert export.calls == [(h, js.current_stream("cuda:0").native) for h in drawn]
    with pytest.raises(ValueError, match="stream=32560 is not a stream of cuda:0"):
        t.__dlpack__(stream=0x7F30)
    monkeypatch.setattr(cuda_kind, "jax_gpus", lambda: (Gpu(),))
    with pytest.raises(ValueError, match="stream=32512 is not a stream of cuda:0"):
        t.__dlpack__(stream=0x7F00)


def test_a_handle_jaxstream_cannot_vouch_for_never_reaches_the_array(fake_cupy):
    """A number that is not a live stream of the tensor's device, as far as jaxstream and the
    libraries it can ask know, is refused before CuPy or JAX reads it as a pointer."""
    t, export = _exported_cuda_tensor()
    elsewhere = cupy_stand_in.Stream()  # made on device 0, never current
    with cupy_stand_in.Device(1):
        on_one = cupy_stand_in.Stream()
        with on_one:
            refused = [5, 0, -2, 2**40, elsewhere.ptr, on_one.ptr, js.Stream("cuda:1").native.ptr]
            for stream in refused:
                with pytest.raises(ValueError, match=r"make that stream CuPy's current one"):
                    t.__dlpack__(stream=stream)
    assert export.calls == []
