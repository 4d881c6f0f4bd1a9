"""The short cuts of a training step outside the losses: the seed of `loss.backward()` (Note
[The seed of a scalar output] in autograd/api.py), the optimizer's assignment of new
values, and a kernel that reads an array for its shape alone on JAX. Each is checked
against the general path it skips: the seed against `ones_like`, a rebound parameter
against its views, a placed result against its input's device (which the GPU twin, where
JAX's default device is another one, tells apart).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import jaxstream as js
from jaxstream.ops.creation import ones_like

PLACES = [("numpy", None), ("jax", None), ("numpy", "sim:0")]


def _seed_of(loss: js.Tensor) -> js.Tensor:
    seen = []
    loss.register_hook(lambda g: seen.append(g))
    loss.backward()
    (g,) = seen
    return g


def _jax_devices(t: js.Tensor) -> set | None:
    return set(t.array.devices()) if t.backend == "jax" else None


@pytest.mark.parametrize(("backend", "device"), PLACES)
@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_the_seed_is_ones_like_the_loss(backend: str, device: str | None, dtype: str) -> None:
    x = js.tensor(np.array([0.5, -1.0, 2.0], dtype), backend=backend, device=device,
                  requires_grad=True)
    loss = (x * x).sum()
    seed, want = _seed_of(loss), ones_like(loss)
    assert (seed.shape, seed.dtype, seed.backend, seed.device) == (
        want.shape, want.dtype, want.backend, want.device)
    assert _jax_devices(seed) == _jax_devices(loss) == _jax_devices(want)
    assert np.asarray(seed.numpy()).tolist() == 1.0
    assert not seed.requires_grad and seed.grad_fn is None
    np.testing.assert_array_equal(x.grad.numpy(), 2 * np.asarray(x.detach().numpy()))


def test_the_seed_of_a_float64_loss_and_of_a_one_element_loss() -> None:
    x = js.tensor(np.array([[3.0]]), requires_grad=True)
    loss = x * 2.0  # one element, not 0-d: the seed has its shape
    seed = _seed_of(loss)
    assert seed.shape == (1, 1) and seed.dtype == np.float64
    assert x.grad.numpy().tolist() == [[2.0]]


def test_a_loss_of_several_elements_still_needs_a_gradient() -> None:
    x = js.tensor(np.ones(3, np.float32), requires_grad=True)
    with pytest.raises(RuntimeError, match="grad can be implicitly created only for scalar"):
        (x * 2.0).backward()


@pytest.mark.parametrize("fill", ["zero_", "fill_"])
def test_a_jax_kernel_that_reads_only_a_shape_keeps_the_tensors_device(fill: str) -> None:
    t = js.tensor(np.ones(3, np.float32), backend="jax")
    u = t * 2.0
    (u.zero_() if fill == "zero_" else u.fill_(3.0))
    assert _jax_devices(u) == _jax_devices(t)
    assert u.numpy().tolist() == ([0.0] * 3 if fill == "zero_" else [3.0] * 3)


def test_numel_counts_elements() -> None:
    for shape in [(), (0, 3), (2, 3, 4), (1,)]:
        t = js.tensor(np.zeros(shape, np.float32))
        assert t.numel() == math.prod(shape) and type(t.numel()) is int


@pytest.mark.parametrize("backend", ["numpy", "jax"])  # the packed exchange, and the other
def test_a_step_updates_a_parameters_live_views(backend: str) -> None:
    w = js.tensor(np.arange(6, dtype=np.float32).reshape(2, 3), backend=backend,
                  requires_grad=True)
    b = js.tensor(np.zeros(3, np.float32), backend=backend, requires_grad=True)
    with js.no_grad():
        row = w[1]  # a view of w: it must see the update
    opt = js.optim.SGD([w, b], lr=0.5)
    (w.sum() * 2.0 + b.sum()).backward()
    version = w._version
    opt.step()
    want = np.arange(6, dtype=np.float32).reshape(2, 3) - 1.0
    np.testing.assert_array_equal(w.numpy(), want)
    np.testing.assert_array_equal(row.numpy(), want[1])
    np.testing.assert_array_equal(b.numpy(), -0.5 * np.ones(3, np.float32))
    assert w._version > version and w.is_leaf and w.grad_fn is None


def test_a_parameter_that_is_a_view_updates_its_base() -> None:
    base = js.tensor(np.zeros((2, 2), np.float32))
    w = base[0]  # a view of a tensor that needs no grad, made a leaf that does
    w.requires_grad_(True)
    opt = js.optim.SGD([w], lr=1.0)
    (w * js.tensor(np.array([1.0, 2.0], np.float32))).sum().backward()
    opt.step()
    np.testing.assert_array_equal(w.numpy(), [-1.0, -2.0])
    np.testing.assert_array_equal(base.numpy(), [[-1.0, -2.0], [0.0, 0.0]])


def test_a_step_without_gradients_changes_nothing() -> None:
    w = js.tensor(np.ones(2, np.float32), requires_grad=True)
    opt = js.optim.SGD([w], lr=1.0)
    before = w.array
    assert opt.step(lambda: 7) == 7
    assert w.array is before and w._version == 0


def test_final_callbacks_and_leaf_streams_still_run_after_the_short_post_processing() -> None:
    calls = []
    x = js.tensor(np.ones(2, np.float32), requires_grad=True)
    y = x * 3.0
    y.register_hook(lambda g: js.autograd.queue_callback(lambda: calls.append("done")))
    y.sum().backward()
    assert calls == ["done"]
    on_sim = js.tensor(np.ones(2, np.float32), device="sim:0", requires_grad=True)
    (on_sim * 2.0).sum().backward()  # a leaf on a stream: the caller waits for it
    np.testing.assert_array_equal(on_sim.grad.numpy(), [2.0, 2.0])
    assert js.is_grad_enabled()
