"""Arrays and lists are accepted wherever the neural-net and elementwise functions take a
tensor (targets, labels, masks, bounds, biases): they join the other operand's backend and
device. Before, `cross_entropy(logits, labels)` with NumPy labels raised AttributeError."""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np
import pytest
from helpers import arr

import jaxstream as js

PLACES = [("numpy", "cpu"), ("jax", "cpu"), ("numpy", "sim:1"), ("jax", "sim:1")]
LABELS = {
    "numpy": lambda: np.array([0, 2, 1]), "list": lambda: [0, 2, 1],
    "jax": lambda: jnp.asarray([0, 2, 1]), "numpy_int32": lambda: np.array([0, 2, 1], np.int32),
}


def _logits(backend, device, requires_grad=True):
    values = np.arange(12, dtype=np.float32).reshape(3, 4) / 7
    return js.tensor(values, backend=backend, device=device, requires_grad=requires_grad)


def _on(t, backend, device):
    return t.backend == backend and t.device == js.device(device)


@pytest.mark.parametrize("backend, device", PLACES)
@pytest.mark.parametrize("labels", sorted(LABELS))
@pytest.mark.parametrize("loss", ["cross_entropy", "nll_loss"])
def test_losses_take_labels_as_arrays_and_lists(loss, labels, backend, device):
    logits = _logits(backend, device)
    fn = getattr(js, loss)
    expected = fn(logits, js.tensor(np.array([0, 2, 1]), backend=backend, device=device))
    out = fn(logits, LABELS[labels]())
    assert _on(out, backend, device)
    np.testing.assert_allclose(arr(out), arr(expected), rtol=1e-6)
    (g,) = js.grad(out, logits)
    assert _on(g, backend, device)


@pytest.mark.parametrize("backend, device", PLACES)
def test_cross_entropy_takes_probabilities_as_an_array(backend, device):
    probs = np.full((3, 4), 0.25, np.float32)
    out = js.cross_entropy(_logits(backend, device), probs)
    assert _on(out, backend, device) and out.dtype == np.float32


@pytest.mark.parametrize("backend, device", PLACES)
def test_mse_loss_takes_an_array_on_either_side(backend, device):
    x = _logits(backend, device)
    target = np.ones((3, 4), np.float32)
    for out in (js.mse_loss(x, target), js.mse_loss(target, x)):
        assert _on(out, backend, device)
        np.testing.assert_allclose(arr(out), np.mean((arr(x) - 1) ** 2), rtol=1e-6)


@pytest.mark.parametrize("backend, device", PLACES)
def test_masks_bounds_biases_and_einsum_operands_may_be_arrays(backend, device):
    x = _logits(backend, device)
    w = np.ones((2, 4), np.float32)
    outs = [
        js.where(np.array([True, False, True, False]), x, 0.0),
        js.clip(x, min=np.zeros(4, np.float32), max=np.full(4, 1.0, np.float32)),
        js.linear(x, w, np.ones(2, np.float32)), js.linear(x, w),
        js.einsum("ij,kj->ik", x, w), x @ w.T, js.maximum(x, np.zeros(4, np.float32)),
    ]
    for out in outs:
        assert _on(out, backend, device) and out.requires_grad


@pytest.mark.parametrize("labels", sorted(LABELS))
def test_one_hot_takes_labels_as_arrays_and_lists(labels):
    assert arr(js.one_hot(LABELS[labels](), 3)).tolist() == [[1, 0, 0], [0, 0, 1], [0, 1, 0]]


def test_functions_of_one_input_take_an_array_where_js_tensor_would_put_it():
    x = np.arange(4, dtype=np.float32)
    for out in (js.softmax(x), js.log_softmax(x), js.logsumexp(x),
                js.dropout(x, 0.5, training=False)):
        assert _on(out, "numpy", "cpu") and out.dtype == np.float32
