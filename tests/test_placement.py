"""Arrays are made where they are asked for (Note [JAX devices of jaxstream devices] in
jaxstream/devices/xla.py): creation, random draws, moves, modules and optimizer state, on
every device this machine has, whatever JAX's default device is. `make test-gpu-twin` runs
this module where JAX's default device is sim:0's, as a GPU is on a GPU machine."""

from __future__ import annotations

from contextlib import nullcontext

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxstream as js
from jaxstream.devices import cuda_device_count, twin

DEVICES = ["cpu", "sim:0", "sim:1"]


def home(device) -> jax.Device:
    """The JAX device that holds `device`'s JAX arrays."""
    dev = js.device(device)
    return dev.kind.jax_device(dev.index)


def assert_on(t: js.Tensor, device) -> None:
    assert t.device == device
    assert t.array.devices() == {home(device)}, f"{t.device} tensor on {t.array.devices()}"


FACTORIES = {
    "tensor": lambda **k: js.tensor([1.0, 2.0], **k),
    "tensor of numpy": lambda **k: js.tensor(np.ones(3, np.float32), **k),
    "zeros": lambda **k: js.zeros(2, 3, **k),
    "full": lambda **k: js.full((2,), 7.0, **k),
    "eye": lambda **k: js.eye(3, **k),
    "arange": lambda **k: js.arange(4, **k),
    "linspace": lambda **k: js.linspace(0.0, 1.0, 5, **k),
    "rand": lambda **k: js.rand(2, 2, key=0, **k),
    "randn": lambda **k: js.randn(2, 2, key=1, **k),
    "randint": lambda **k: js.randint(0, 5, (3,), key=2, **k),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", FACTORIES)
def test_jax_factories_make_their_array_on_the_device_asked_for(name, device):
    t = FACTORIES[name](backend="jax", device=device)
    assert_on(t, device)
    assert_on(js.zeros_like(t), device)
    assert_on(js.full_like(t, 3), device)


@pytest.mark.parametrize("name", FACTORIES)
def test_data_without_a_device_goes_to_the_cpu_on_the_jax_backend(name):
    assert_on(FACTORIES[name](backend="jax"), "cpu")


def holder_of(jax_device: jax.Device) -> str:
    """The jaxstream device whose JAX arrays `jax_device` holds: the first of this machine's
    devices that has it, the cpu before the sim devices that share it outside the twin."""
    names = ["cpu", *(f"cuda:{i}" for i in range(cuda_device_count())),
             *(f"sim:{i}" for i in range(js.sim.device_count()))]
    return next(name for name in names if home(name) == jax_device)


@pytest.mark.parametrize("default", [None, *DEVICES])
def test_an_unplaced_jax_array_stays_where_jax_put_it(default):
    """`jnp.ones` goes to JAX's default device: the cpu's here, sim:0's in the twin, a GPU on
    a GPU machine; or the one JAX is told to use (`jax.default_device`)."""
    with nullcontext() if default is None else jax.default_device(home(default)):
        array = jnp.ones(3)
    (where,) = array.devices()
    t = js.tensor(array)
    assert t.array.devices() == {where}
    assert t.device == holder_of(where)
    if twin.enabled:
        assert t.device == (default or "sim:0")
    assert_on(js.tensor(array, device="cpu"), "cpu")


@pytest.mark.parametrize("device", DEVICES)
def test_ops_run_where_their_inputs_are(device):
    """JAX runs an op whose inputs are all uncommitted on its default device, wherever they
    are: jaxstream's arrays off that device are committed to theirs."""
    x = js.tensor(np.linspace(0.1, 1.0, 4, dtype=np.float32), backend="jax", device=device,
                  requires_grad=True)
    y = (x * 2.5 + 1.0).tanh().sum()
    assert_on(y, device)
    y.backward()
    assert_on(x.grad, device)


@pytest.mark.parametrize("source", DEVICES)
@pytest.mark.parametrize("target", DEVICES)
def test_moves_of_jax_tensors_land_on_the_target_and_the_gradient_comes_back(source, target):
    x = js.tensor(np.asarray([1.0, -2.0, 3.0], np.float32), backend="jax", device=source,
                  requires_grad=True)
    y = x.to(target)
    assert_on(y, target)
    (y * y).sum().backward()
    js.synchronize("sim:0")
    js.synchronize("sim:1")
    assert_on(x.grad, source)
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, -4.0, 6.0])


@pytest.mark.parametrize("device", DEVICES)
def test_a_module_moved_to_jax_and_its_optimizer_state_stay_on_the_device(device):
    model = js.nn.Linear(3, 2, key=0).to(device, backend="jax")
    for p in model.parameters():
        assert_on(p, device)
    opt = js.optim.Adam(model.parameters(), lr=0.1)
    x = js.tensor(np.ones((4, 3), np.float32), backend="jax", device=device)
    model(x).sum().backward()
    opt.step()
    for p in model.parameters():
        assert_on(p, device)
    for leaf in jax.tree.leaves(opt.state):
        assert leaf.devices() == {home(device)}


def test_a_jax_array_asked_for_elsewhere_is_moved_there_not_mislabelled():
    on_sim = js.tensor(np.ones(2, np.float32), backend="jax", device="sim:1")
    assert_on(js.tensor(on_sim.array, device="cpu"), "cpu")
    assert_on(js.tensor(on_sim.array, device="sim:0"), "sim:0")
