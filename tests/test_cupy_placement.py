"""Where a new tensor goes when no device is named (Note [New tensors with no device] in
jaxstream/construction.py): the cpu, or CuPy's current GPU for the cupy backend, which has
no arrays on the cpu. Run on any machine through the CuPy stand-in (Note [The CuPy
stand-in] in experiments/harness/cupy_stand_in.py).
"""

from __future__ import annotations

import types

import jax
import numpy as np
import pytest

import jaxstream as js
from experiments.harness import cupy_stand_in

HOST = np.linspace(-1.0, 1.0, 6, dtype=np.float32)

MAKERS = {
    "tensor": lambda: js.tensor(HOST, backend="cupy", requires_grad=True),
    "Tensor": lambda: js.Tensor(HOST, backend="cupy"),
    "python_list": lambda: js.tensor([1.0, 2.0], backend="cupy"),
    "of_a_cpu_tensor": lambda: js.Tensor(js.tensor(HOST), backend="cupy"),
    "of_a_sim_tensor": lambda: js.Tensor(js.tensor(HOST, device="sim:0"), backend="cupy"),
    "zeros": lambda: js.zeros(2, 3, backend="cupy"),
    "full": lambda: js.full((2,), 7.0, backend="cupy", requires_grad=True),
    "eye": lambda: js.eye(3, backend="cupy"),
    "arange": lambda: js.arange(4, backend="cupy"),
    "linspace": lambda: js.linspace(0.0, 1.0, 5, backend="cupy"),
    "randn": lambda: js.randn(2, 3, key=0, backend="cupy"),
    "rand": lambda: js.rand(2, 3, key=0, backend="cupy"),
    "randint": lambda: js.randint(0, 5, (4,), key=0, backend="cupy"),
    "to_backend": lambda: js.tensor(HOST).to(backend="cupy"),
    "to_backend_from_sim": lambda: js.tensor(HOST, device="sim:0").to(backend="cupy"),
}


@pytest.fixture
def fake_cupy(monkeypatch):
    """The stand-in's two GPUs, with NumPy's generators as CuPy's `cupy.random`."""
    random = types.SimpleNamespace(default_rng=np.random.default_rng)
    monkeypatch.setattr(cupy_stand_in.module, "random", random, raising=False)
    with cupy_stand_in.installed():
        yield


@pytest.mark.parametrize("make", MAKERS.values(), ids=MAKERS)
def test_a_cupy_tensor_given_no_device_is_on_cupys_current_gpu(fake_cupy, make) -> None:
    """As `cupy.asarray` is: on the current device, which `cupy.cuda.Device(i).use()`
    changes, and so does a jaxstream stream block of that GPU."""
    t = make()
    assert (t.backend, t.device) == ("cupy", js.device("cuda:0"))
    assert cupy_stand_in.gpu_of(t.array) == 0
    cupy_stand_in.Device(1).use()
    try:
        assert cupy_stand_in.gpu_of(cupy_stand_in.asarray(HOST)) == 1, "CuPy's own rule"
        t = make()
    finally:
        cupy_stand_in.Device(0).use()
    assert t.device == "cuda:1" and cupy_stand_in.gpu_of(t.array) == 1
    with js.stream(js.Stream("cuda:1")):
        t = make()
    assert t.device == "cuda:1" and cupy_stand_in.gpu_of(t.array) == 1


def test_a_cupy_tensor_given_no_device_still_computes_and_differentiates(fake_cupy) -> None:
    x = js.tensor(HOST, backend="cupy", requires_grad=True)
    (x * js.ones(6, backend="cupy")).tanh().sum().backward()
    assert (x.grad.backend, x.grad.device) == ("cupy", js.device("cuda:0"))
    np.testing.assert_allclose(x.grad.numpy(), 1.0 - np.tanh(HOST) ** 2, rtol=1e-6)


FACTORIES = {
    "tensor": lambda **where: js.tensor(HOST, **where),
    "zeros": lambda **where: js.zeros(2, **where),
    "full": lambda **where: js.full((2,), 7.0, **where),
    "eye": lambda **where: js.eye(2, **where),
    "arange": lambda **where: js.arange(3, **where),
    "linspace": lambda **where: js.linspace(0.0, 1.0, 3, **where),
    "randn": lambda **where: js.randn(2, key=0, **where),
    "randint": lambda **where: js.randint(0, 5, (2,), key=0, **where),
}


@pytest.mark.parametrize("make", FACTORIES.values(), ids=FACTORIES)
def test_a_backend_that_cannot_hold_arrays_on_the_device_asked_for_is_refused(fake_cupy, make):
    """Never another backend's tensor in its place: the backend asked for is the one given."""
    with pytest.raises(RuntimeError, match=r"cannot make a cupy tensor on cpu: .*cuda device"):
        make(backend="cupy", device="cpu")
    with pytest.raises(RuntimeError, match=r"cannot make a cupy tensor on sim:0"):
        make(backend="cupy", device="sim:0")
    with pytest.raises(RuntimeError, match=r"cannot make a numpy tensor on cuda:0"):
        make(backend="numpy", device="cuda:0")
    t = make(device="cuda:0")  # no backend asked for: the device's
    assert (t.backend, t.device) == ("cupy", js.device("cuda:0"))


@pytest.mark.parametrize("backend", ["numpy", "jax"])
def test_host_backends_given_no_device_stay_on_the_cpu(backend: str) -> None:
    """Not on JAX's default device, which on a GPU machine (and in the GPU twin) is not
    jaxstream's cpu: the default place of a backend that holds cpu arrays is the cpu."""
    cpu = jax.devices("cpu")[0]
    made = [js.tensor(HOST, backend=backend), js.zeros(2, backend=backend),
            js.randn(2, key=0, backend=backend), js.Tensor([1.0], backend=backend)]
    for t in made:
        assert (t.backend, t.device) == (backend, js.device("cpu"))
        if backend == "jax":
            assert t.array.devices() == {cpu}


def test_host_memory_of_another_library_is_copied_into_a_cupy_tensor(fake_cupy, monkeypatch):
    """CuPy imports no host memory by DLPack ("CPU arrays cannot be directly imported to
    CuPy"): a JAX cpu array, or a tensor of one, is copied in through the host instead."""

    def from_dlpack(producer):
        if int(producer.__dlpack_device__()[0]) == 1:
            raise TypeError("CPU arrays cannot be directly imported to CuPy")
        return cupy_stand_in.asarray(np.from_dlpack(producer))

    monkeypatch.setattr(cupy_stand_in.module, "from_dlpack", from_dlpack)
    on_jax_cpu = jax.device_put(HOST, jax.devices("cpu")[0])
    made = [js.tensor(on_jax_cpu, backend="cupy"),
            js.Tensor(js.tensor(HOST, backend="jax"), backend="cupy"),
            js.tensor(on_jax_cpu, backend="cupy", device="cuda:1", dtype="float64")]
    for t, dev in zip(made, ["cuda:0", "cuda:0", "cuda:1"], strict=True):
        assert (t.backend, t.device) == ("cupy", js.device(dev))
        assert cupy_stand_in.gpu_of(t.array) == t.device.index
        np.testing.assert_array_equal(t.numpy(), HOST)
    assert made[2].dtype == np.float64


def test_a_cupy_array_made_a_cpu_tensor_is_copied_by_cupy(fake_cupy, monkeypatch) -> None:
    """`js.tensor(cupy_array, device="cpu")` copies through the backend's `host_copy`
    (`cupy.asnumpy` on its stream), as CuPy refuses `np.asarray` of its arrays; the result
    is the cpu's own writeable copy, with the dtype asked for, and that one copy where the
    dtype is the array's own. (GPU 1's arrays: the stand-in's GPU 0 arrays are NumPy's own.)"""
    with cupy_stand_in.Device(1):
        gpu = cupy_stand_in.asarray(HOST)
    backend = js.tensor(gpu).array_backend
    assert backend.name == "cupy"
    copies = []
    original = cupy_stand_in.module.asnumpy
    monkeypatch.setattr(cupy_stand_in.module, "asnumpy",
                        lambda *args, **kwargs: copies.append(original(*args, **kwargs))
                        or copies[-1])
    same_dtype = js.tensor(gpu, device="cpu")
    assert len(copies) == 1 and same_dtype.array is copies[0], "one copy, the cpu's own"
    assert same_dtype.array.flags.writeable
    t = js.tensor(gpu, device="cpu", dtype="float64")
    assert len(copies) == 2
    assert (t.backend, t.device, t.dtype) == ("numpy", js.device("cpu"), np.dtype("float64"))
    np.testing.assert_array_equal(t.numpy(), HOST.astype(np.float64))
    t.array[0] = 5.0
    assert gpu[0] == HOST[0], "a copy, not a view of the GPU's array"
    with pytest.raises(RuntimeError, match="cupy arrays live on CUDA GPUs"):
        js.tensor(gpu, backend="cupy", device="cpu")
