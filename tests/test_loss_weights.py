"""PyTorch's `weight=` of the losses against torch's: per class for cross_entropy and nll_loss
(values, node names, gradients, the "mean" over the counted targets' total weight, label
smoothing, class probabilities, ignored targets, spatial and unbatched inputs), per element
for mse, l1 and huber (the weight's own gradient too), the loss modules' weight buffers, and
the errors."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import arr

import jaxstream as js
import jaxstream.nn.functional as F

torch = pytest.importorskip("torch")
TF = torch.nn.functional

pytestmark = pytest.mark.oracle
BACKENDS = ["numpy", "jax"]
RNG = np.random.default_rng(7)
CLASS_WEIGHT = RNG.uniform(0.2, 2.0, 4)
# (input shape, targets): a batch with an ignored target, a spatial batch, one sample
CASES = {
    "batch": (RNG.standard_normal((5, 4)), np.array([0, 3, -100, 1, 3])),
    "spatial": (RNG.standard_normal((2, 4, 2, 3)), RNG.integers(0, 4, (2, 2, 3))),
    "unbatched": (RNG.standard_normal(4), np.array(2)),
}


def _dtype(backend):
    return np.float64 if backend == "numpy" else np.float32


def _ours(values, backend, requires_grad=False):
    values = np.asarray(values)
    if values.dtype.kind == "f":
        values = values.astype(_dtype(backend))
    return js.tensor(values, backend=backend, requires_grad=requires_grad)


def _tolerance(backend):
    return {"rtol": 1e-10, "atol": 1e-12} if backend == "numpy" else {"rtol": 2e-5, "atol": 1e-6}


def _agree(loss, theirs, wrt, theirs_wrt, backend, create_graph=False):
    """Values, node names and the gradients of a weighted sum of the losses agree."""
    np.testing.assert_allclose(arr(loss), theirs.detach().numpy(), **_tolerance(backend))
    assert loss.grad_fn.name() == theirs.grad_fn.name()
    w = RNG.standard_normal(theirs.shape)
    grads = js.grad((loss * _ours(w, backend)).sum(), wrt, create_graph=create_graph)
    their_grads = torch.autograd.grad((theirs * torch.tensor(w)).sum(), theirs_wrt,
                                      create_graph=create_graph)
    for g, tg in zip(grads, their_grads, strict=True):
        np.testing.assert_allclose(arr(g), tg.detach().numpy(), **_tolerance(backend))
    return grads, their_grads


# Every case on NumPy; one on JAX, which compiles each kernel again per shape.
@pytest.mark.parametrize(("backend", "case"), [*(("numpy", c) for c in sorted(CASES)),
                                               ("jax", "spatial")])
@pytest.mark.parametrize("name", ["cross_entropy", "nll_loss"])
def test_class_weights_match_torch(backend, case, name):
    x, target = CASES[case]
    for reduction in ("mean", "sum", "none"):
        ours_x, theirs_x = _ours(x, backend, True), torch.tensor(x, requires_grad=True)
        loss = getattr(F, name)(ours_x, _ours(target, backend), _ours(CLASS_WEIGHT, backend),
                                reduction=reduction)
        theirs = getattr(TF, name)(theirs_x, torch.tensor(target),
                                   torch.tensor(CLASS_WEIGHT), reduction=reduction)
        _agree(loss, theirs, [ours_x], [theirs_x], backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_label_smoothing_weighs_the_smoothing_term_and_goes_to_the_second_order(backend):
    x, target = CASES["batch"]
    for reduction in ("mean", "sum", "none"):
        ours_x, theirs_x = _ours(x, backend, True), torch.tensor(x, requires_grad=True)
        loss = F.cross_entropy(ours_x, _ours(target, backend), _ours(CLASS_WEIGHT, backend),
                               reduction=reduction, label_smoothing=0.3)
        theirs = TF.cross_entropy(theirs_x, torch.tensor(target), torch.tensor(CLASS_WEIGHT),
                                  reduction=reduction, label_smoothing=0.3)
        second_order = backend == "numpy"  # on JAX each second-order kernel compiles again
        (g,), (tg,) = _agree(loss, theirs, [ours_x], [theirs_x], backend, second_order)
        if not second_order:
            continue
        (h,) = js.grad((g * g).sum(), [ours_x])
        (th,) = torch.autograd.grad((tg * tg).sum(), [theirs_x])
        np.testing.assert_allclose(arr(h), th.numpy(), **_tolerance(backend))


@pytest.mark.parametrize("backend", BACKENDS)
def test_class_probabilities_are_weighted_and_the_mean_is_over_samples(backend):
    x = RNG.standard_normal((5, 4))
    probabilities = RNG.dirichlet(np.ones(4), 5)
    for reduction, smoothing in (("mean", 0.0), ("sum", 0.2), ("none", 0.0)):
        ours_x, theirs_x = _ours(x, backend, True), torch.tensor(x, requires_grad=True)
        loss = F.cross_entropy(ours_x, _ours(probabilities, backend),
                               _ours(CLASS_WEIGHT, backend), reduction=reduction,
                               label_smoothing=smoothing)
        theirs = TF.cross_entropy(theirs_x, torch.tensor(probabilities),
                                  torch.tensor(CLASS_WEIGHT), reduction=reduction,
                                  label_smoothing=smoothing)
        _agree(loss, theirs, [ours_x], [theirs_x], backend)


@pytest.mark.parametrize(("backend", "name"), [("numpy", "mse_loss"), ("numpy", "l1_loss"),
                                               ("numpy", "huber_loss"), ("jax", "huber_loss")])
def test_element_weights_match_torch_and_get_their_gradient(backend, name):
    a, b = RNG.standard_normal((3, 4)), RNG.standard_normal((3, 4))
    weight = RNG.uniform(0.0, 2.0, (3, 4))
    for reduction in ("mean", "sum", "none"):
        ours = [_ours(a, backend, True), _ours(weight, backend, True)]
        theirs = [torch.tensor(a, requires_grad=True), torch.tensor(weight, requires_grad=True)]
        loss = getattr(F, name)(ours[0], _ours(b, backend), reduction=reduction,
                                weight=ours[1])
        their_loss = getattr(TF, name)(theirs[0], torch.tensor(b), reduction=reduction,
                                       weight=theirs[1])
        np.testing.assert_allclose(arr(loss), their_loss.detach().numpy(), **_tolerance(backend))
        grads = js.grad(loss.sum(), ours)
        their_grads = torch.autograd.grad(their_loss.sum(), theirs)
        for g, tg in zip(grads, their_grads, strict=True):
            np.testing.assert_allclose(arr(g), tg.numpy(), **_tolerance(backend))


def test_the_loss_modules_hold_their_weight_as_a_buffer():
    x, target = CASES["batch"][0], np.array([0, 3, 1, 1, 3])
    for ours, theirs in ((js.nn.CrossEntropyLoss, torch.nn.CrossEntropyLoss),
                         (js.nn.NLLLoss, torch.nn.NLLLoss)):
        module = ours(weight=js.tensor(CLASS_WEIGHT), ignore_index=3)
        torch_module = theirs(weight=torch.tensor(CLASS_WEIGHT), ignore_index=3)
        assert list(module.state_dict()) == list(torch_module.state_dict()) == ["weight"]
        loss = module(js.tensor(x), js.tensor(target))
        np.testing.assert_allclose(arr(loss), torch_module(torch.tensor(x),
                                                           torch.tensor(target)).numpy())


def test_class_weights_of_the_wrong_shape_dtype_or_requiring_grad_are_refused():
    x, target = js.tensor(CASES["batch"][0]), js.tensor(CASES["batch"][1])
    with pytest.raises(RuntimeError, match=r"defined either for all 4 classes or no classes "
                                           r"but got weight tensor of shape: \[3\]"):
        F.cross_entropy(x, target, js.tensor(np.ones(3)))
    with pytest.raises(RuntimeError, match="expected scalar type Double but found Float"):
        F.nll_loss(x, target, js.tensor(np.ones(4, np.float32)))
    with pytest.raises(RuntimeError, match="not differentiable with respect to argument "
                                           "'weight'.*weight.detach()"):
        F.cross_entropy(x, target, js.tensor(np.ones(4), requires_grad=True))


def test_element_weights_of_another_size_are_refused():
    a = js.tensor(np.ones((3, 4)))
    with pytest.raises(ValueError, match=r"Weights and input must have the same size.*\(4,\)"):
        F.mse_loss(a, a, weight=js.tensor(np.ones(4)))
    with pytest.raises(ValueError, match="not a valid value for reduction"):
        F.l1_loss(a, a, reduction="average", weight=js.tensor(np.ones((3, 4))))
