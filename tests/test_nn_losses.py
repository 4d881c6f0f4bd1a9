"""The losses (binary cross entropy of probabilities and of logits, L1, smooth L1, Huber),
the loss modules and the distances (cdist, pairwise_distance, cosine_similarity) against
torch: values, first and second gradients, node names, weights, errors, on both backends."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from helpers import arr, error_text
from ops_oracle import check_against_torch, close, tensor_of, uniform_values

import jaxstream as js
import jaxstream.nn.functional as F

pytestmark = pytest.mark.oracle

REDUCTIONS = ["mean", "sum", "none"]
RNG = np.random.default_rng(0)
PROBABILITIES = RNG.uniform(0.05, 0.95, (3, 4))
TARGETS = RNG.uniform(0.0, 1.0, (3, 4))
WEIGHT = RNG.uniform(0.5, 1.5, (4,))


def _constant(values, backend):
    return tensor_of(values, backend, requires_grad=False)


# name: (ours(F, x, t, constant, reduction), its input values); `constant(values)` makes a
# weight (ours or torch's).
LOSSES = {
    "binary_cross_entropy": (
        lambda f, x, t, c, r: f.binary_cross_entropy(x, t, c(WEIGHT), reduction=r),
        [PROBABILITIES, TARGETS]),
    "binary_cross_entropy_with_logits": (
        lambda f, x, t, c, r: f.binary_cross_entropy_with_logits(x, t, reduction=r),
        [PROBABILITIES * 6 - 3, TARGETS]),
    "bce_with_logits weighted": (
        lambda f, x, t, c, r: f.binary_cross_entropy_with_logits(
            x, t, c(WEIGHT[:1]), reduction=r, pos_weight=c(WEIGHT * 2)),
        [PROBABILITIES * 6 - 3, TARGETS]),
    "l1_loss": (lambda f, x, t, c, r: f.l1_loss(x, t, reduction=r),
                uniform_values(1, (3, 4), (3, 4))),
    "smooth_l1_loss": (lambda f, x, t, c, r: f.smooth_l1_loss(x, t, reduction=r, beta=0.8),
                       uniform_values(1, (3, 4), (3, 4))),
    "smooth_l1_loss beta 0": (lambda f, x, t, c, r: f.smooth_l1_loss(x, t, reduction=r, beta=0),
                              uniform_values(2, (3, 4), (3, 4))),
    "huber_loss": (lambda f, x, t, c, r: f.huber_loss(x, t, reduction=r, delta=0.7),
                   uniform_values(1, (3, 4), (3, 4))),
}


# On NumPy here; on JAX in `test_the_losses_and_distances_on_jax_in_one_program`.
@pytest.mark.parametrize("name", list(LOSSES))
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_losses_match_torch(torch, name, reduction):
    call, values = LOSSES[name]
    check_against_torch(
        torch, lambda x, t: call(F, x, t, lambda v: _constant(v, "numpy"), reduction),
        lambda x, t: call(torch.nn.functional, x, t, torch.tensor, reduction), values, "numpy")


def test_the_losses_and_distances_on_jax_in_one_program(torch):
    """Every loss and distance on JAX, to the second order, compiled as one program (each
    new shape would compile every op again)."""

    def pieces(functional, constant, cdist, x, t):
        losses = [call(functional, x if name == "l1_loss" else x * 0.2 + 0.5, t, constant,
                       "none") for name, (call, _) in LOSSES.items()]
        distances = [cdist(x, t, 2.0), functional.pairwise_distance(x, t),
                     functional.cosine_similarity(x, t)]
        return [piece.reshape(-1) for piece in losses + distances]

    check_against_torch(
        torch, lambda x, t: js.cat(pieces(F, lambda v: _constant(v, "jax"), js.cdist, x, t)),
        lambda x, t: torch.cat(pieces(torch.nn.functional, torch.tensor, _differences_norm, x, t)),
        [PROBABILITIES * 4 - 2, TARGETS], "jax", compiled=True)


@pytest.mark.parametrize("name", ["binary_cross_entropy", "bce_with_logits weighted",
                                  "smooth_l1_loss", "huber_loss"])
def test_losses_run_eagerly_on_jax(torch, name):
    """Each loss kernel compiled on its own, and its backward (one compiled call), outside
    `js.compile`: values and gradients are torch's."""
    call, values = LOSSES[name]
    ours = [tensor_of(v, "jax") for v in values]
    theirs = [torch.tensor(v, requires_grad=True) for v in values]
    loss = call(F, *ours, lambda v: _constant(v, "jax"), "sum")
    t_loss = call(torch.nn.functional, *theirs, torch.tensor, "sum")
    close(loss, t_loss.detach().numpy(), "jax", "loss")
    loss.backward()
    t_loss.backward()
    for x, tx in zip(ours, theirs, strict=True):
        close(x.grad, tx.grad.numpy(), "jax", f"gradient of {name}")


@pytest.mark.parametrize("name", sorted(LOSSES))
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_loss_nodes_are_named_as_torch_names_them(torch, name, reduction):
    call, values = LOSSES[name]
    ours = call(F, *(tensor_of(v, "numpy") for v in values), js.tensor, reduction)
    theirs = call(torch.nn.functional,
                  *(torch.tensor(v, requires_grad=True) for v in values), torch.tensor, reduction)
    assert ours.grad_fn.name() == theirs.grad_fn.name()


def test_bce_with_logits_is_finite_at_any_size(torch):
    logits = [[1000.0, -1000.0, 0.0], [-1000.0, 1000.0, 30.0]]
    targets = [[0.0, 1.0, 0.5], [0.0, 1.0, 1.0]]
    check_against_torch(torch, lambda x, t: F.binary_cross_entropy_with_logits(x, t),
                        lambda x, t: torch.nn.functional.binary_cross_entropy_with_logits(x, t),
                        [logits, targets], "numpy")
    assert np.isfinite(arr(F.binary_cross_entropy_with_logits(js.tensor(logits),
                                                              js.tensor(targets))))


def test_bce_floors_each_log_at_minus_100(torch):
    x, t = [0.0, 1.0, 0.5], [1.0, 0.0, 0.5]
    ours = F.binary_cross_entropy(js.tensor(x), js.tensor(t), reduction="none")
    theirs = torch.nn.functional.binary_cross_entropy(torch.tensor(x), torch.tensor(t),
                                                      reduction="none")
    np.testing.assert_allclose(arr(ours), theirs.numpy(), rtol=1e-6)
    assert arr(ours)[0] == 100.0


def test_the_legacy_arguments_are_torchs(torch):
    x, t = tensor_of(PROBABILITIES, "numpy"), tensor_of(TARGETS, "numpy")
    with pytest.warns(UserWarning, match="please use reduction='sum' instead"):
        ours = F.binary_cross_entropy(x, t, size_average=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = torch.nn.functional.binary_cross_entropy(
            torch.tensor(PROBABILITIES), torch.tensor(TARGETS), size_average=False)
    close(ours, theirs.numpy(), "numpy", "loss")


@pytest.mark.parametrize("call, error, phrase", [
    (lambda x, t: F.binary_cross_entropy(x * 3, t), RuntimeError,
     "all elements of input should be between 0 and 1"),
    (lambda x, t: F.binary_cross_entropy(x, t[:2]), ValueError,
     r"Using a target size \(\[2, 4\]\) that is different to the input size \(\[3, 4\]\)"),
    (lambda x, t: F.binary_cross_entropy_with_logits(x, t[:, :1]), ValueError,
     r"Target size \(\[3, 1\]\) must be the same as input size \(\[3, 4\]\)"),
    (lambda x, t: F.binary_cross_entropy_with_logits(x, t, pos_weight=x[0]), RuntimeError,
     "not differentiable with respect to argument 'pos_weight'"),
    (lambda x, t: F.smooth_l1_loss(x, t, beta=-1.0), RuntimeError,
     "smooth_l1_loss does not support negative values for beta"),
    (lambda x, t: F.huber_loss(x, t, delta=0.0), RuntimeError,
     "huber_loss does not support non-positive values for delta"),
    (lambda x, t: F.l1_loss(x, t[:2]), RuntimeError,
     r"The size of tensor a \(3\) must match the size of tensor b \(2\)"),
    (lambda x, t: F.l1_loss(x, t, reduction="avg"), ValueError,
     "'avg' is not a valid value for reduction"),
    (lambda x, t: F.huber_loss(x, t, weight=t[0]), ValueError,
     "Weights and input must have the same size"),
], ids=["range", "bce size", "logits size", "weight grad", "beta", "delta", "broadcast",
        "reduction", "weight"])
def test_loss_errors_say_what_is_wrong(call, error, phrase):
    with pytest.raises(error, match=phrase):
        call(tensor_of(PROBABILITIES, "numpy"), tensor_of(TARGETS, "numpy", False))


# ------------------------------------------------------------------ loss modules
MODULES = [
    ("MSELoss", {"reduction": "sum"}, uniform_values(3, (3, 4), (3, 4))),
    ("L1Loss", {}, uniform_values(3, (3, 4), (3, 4))),
    ("SmoothL1Loss", {"beta": 0.5, "reduction": "none"}, uniform_values(3, (3, 4), (3, 4))),
    ("HuberLoss", {"delta": 0.5}, uniform_values(3, (3, 4), (3, 4))),
    ("BCELoss", {"weight": WEIGHT}, [PROBABILITIES, TARGETS]),
    ("BCEWithLogitsLoss", {"pos_weight": WEIGHT}, [PROBABILITIES, TARGETS]),
    ("CrossEntropyLoss", {"label_smoothing": 0.1}, [PROBABILITIES, np.array([0, 3, 1])]),
    ("NLLLoss", {"ignore_index": 1}, [PROBABILITIES, np.array([0, 3, 1])]),
]


@pytest.mark.parametrize("name, kwargs, values", MODULES, ids=[m[0] for m in MODULES])
def test_loss_modules_match_torch(torch, name, kwargs, values):
    ours = getattr(js.nn, name)(**{k: js.tensor(v) if isinstance(v, np.ndarray) else v
                                   for k, v in kwargs.items()})
    theirs = getattr(torch.nn, name)(**{k: torch.tensor(v) if isinstance(v, np.ndarray) else v
                                        for k, v in kwargs.items()})
    x, t = tensor_of(values[0], "numpy"), js.tensor(values[1])
    loss, t_loss = ours(x, t), theirs(torch.tensor(values[0]), torch.tensor(values[1]))
    close(loss, t_loss.numpy(), "numpy", name)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert ours.reduction == theirs.reduction


def test_loss_modules_keep_weights_as_buffers_that_move_with_them(torch):
    module = js.nn.BCEWithLogitsLoss(weight=js.ones(4), pos_weight=js.ones(4) * 2)
    assert [name for name, _ in module.named_buffers()] == ["weight", "pos_weight"]
    module.to("jax")
    assert module.pos_weight.backend == "jax"
    with pytest.warns(UserWarning, match="please use reduction='none' instead"):
        assert js.nn.L1Loss(reduce=False).reduction == "none"
    class_weighted = js.nn.CrossEntropyLoss(weight=js.tensor([1.0, 2.0, 3.0, 4.0])).to("jax")
    assert class_weighted.weight.backend == "jax"
    loss = class_weighted(js.zeros(3, 4, backend="jax"), js.tensor([0, 1, 3], backend="jax"))
    np.testing.assert_allclose(loss.item(), np.log(4.0), rtol=1e-6)


# ------------------------------------------------------------------ distances
def _differences_norm(a, b, p):
    """torch's cdist as the norm of the differences, which torch differentiates twice."""
    return (a.unsqueeze(-2) - b.unsqueeze(-3)).norm(p=p, dim=-1)


# (p=1's second derivative makes torch import its compiler, for seconds.)
@pytest.mark.parametrize("p", [2.0, 3.0, float("inf")])
def test_cdist_matches_torch(torch, p):
    """To the second order against the norm of the differences that it computes, and to the
    first against torch's cdist (which has no second derivative), at a zero distance too
    (its gradient is 0; the second one there is NaN in torch's norm, finite in ours)."""
    backend = "numpy"
    x1, x2 = uniform_values(4, (2, 3, 4), (5, 4))
    check_against_torch(
        torch, lambda a, b: js.cdist(a, b, p),
        lambda a, b: _differences_norm(a, b, p), [x1, x2], backend)
    x1[0, 2] = x2[1]
    values = [x1, x2]
    a, b = (tensor_of(v, backend) for v in values)
    ta, tb = (torch.tensor(v, requires_grad=True) for v in values)
    y, ty = js.cdist(a, b, p), torch.cdist(ta, tb, p)
    close(y, ty.detach().numpy(), backend, "value")
    for g, tg in zip(js.grad(y.sum(), [a, b]), torch.autograd.grad(ty.sum(), [ta, tb]),
                     strict=True):
        close(g, tg.numpy(), backend, "gradient")


@pytest.mark.parametrize("call", [
    lambda f, a, b: f.pairwise_distance(a, b),
    lambda f, a, b: f.pairwise_distance(a, b, 3.0, 1e-3, True),
    lambda f, a, b: f.cosine_similarity(a, b),
    lambda f, a, b: f.cosine_similarity(a[0], b, -1),
], ids=["pairwise", "pairwise p=3 keepdim", "cosine", "cosine broadcast"])
def test_pairwise_distance_and_cosine_similarity_match_torch(torch, call):
    check_against_torch(torch, lambda a, b: call(F, a, b),
                        lambda a, b: call(torch.nn.functional, a, b),
                        uniform_values(6, (3, 4), (3, 4)), "numpy")


@pytest.mark.parametrize("call, error, phrase", [
    (lambda a, b: js.cdist(a, b[:, :3]), RuntimeError,
     "X1 and X2 must have the same number of columns. X1: 4 X2: 3"),
    (lambda a, b: js.cdist(a[0], b), RuntimeError,
     "cdist only supports at least 2D tensors, X1 got: 1D"),
    (lambda a, b: js.cdist(a, b, -1.0), RuntimeError, "cdist only supports non-negative p"),
    (lambda a, b: js.cdist(a, b, 0.5), NotImplementedError, "p=0.5 is not supported"),
    (lambda a, b: js.cdist(a, b, compute_mode="fast"), ValueError,
     "fast is not a valid value for compute_mode"),
    (lambda a, b: F.cosine_similarity(a, b[:2]), RuntimeError,
     r"The size of tensor a \(3\) must match the size of tensor b \(2\)"),
], ids=["columns", "1-D", "negative p", "small p", "compute_mode", "broadcast"])
def test_distance_errors_say_what_is_wrong(call, error, phrase):
    with pytest.raises(error, match=phrase):
        call(*(tensor_of(v, "numpy") for v in uniform_values(7, (3, 4), (3, 4))))


def test_cdist_is_a_top_level_op(torch):
    assert "cdist" in js.__all__
    message = error_text(pytest.raises(RuntimeError, js.cdist, js.ones(2, 3), js.ones(2, 4)))
    assert "cdist of shapes (2, 3) and (2, 4)" in message
