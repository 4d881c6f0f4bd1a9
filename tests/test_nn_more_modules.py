"""The layers and losses of nn/more_layers.py and nn/more_losses.py against torch's modules
with the same parameters: outputs, input and parameter gradients, repr, state_dict keys and
errors, on both backends; the functionals' second gradients through `check_against_torch`."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from helpers import arr
from ops_oracle import check_against_torch, close, uniform_values

import jaxstream as js
import jaxstream.nn.functional as F

torch = pytest.importorskip("torch")
tnn, TF = torch.nn, torch.nn.functional

pytestmark = pytest.mark.oracle
BACKENDS = ["numpy", "jax"]
RNG = np.random.default_rng(0)
X4 = RNG.standard_normal((2, 4, 6, 8))
X3 = RNG.standard_normal((2, 4, 7))
PROBS = RNG.uniform(0.1, 1.0, (3, 4))
RATES = RNG.uniform(0.1, 3.0, (3, 4))
SIGNS = np.array([1.0, -1.0, 1.0])


def _float(backend):
    return np.float64 if backend == "numpy" else np.float32


def _ours(values, backend, requires_grad=True):
    return js.tensor(np.asarray(values, dtype=_float(backend)), backend=backend,
                     requires_grad=requires_grad)


def _same_module(ours, theirs, inputs, backend, grad_inputs=None):
    """Load `theirs`' state into `ours`; outputs and gradients (inputs, parameters) agree."""
    theirs = theirs.double()
    ours.load_state_dict({k: _ours(v.detach().numpy(), backend, False)
                          for k, v in theirs.state_dict().items()})
    assert list(ours.state_dict()) == list(theirs.state_dict())
    grad_inputs = range(len(inputs)) if grad_inputs is None else grad_inputs
    xs = [_ours(v, backend, i in grad_inputs) for i, v in enumerate(inputs)]
    txs = [torch.tensor(np.asarray(v, dtype=np.float64), requires_grad=i in grad_inputs)
           for i, v in enumerate(inputs)]
    y, ty = ours(*xs), theirs(*txs)
    close(y, ty.detach().numpy(), backend, "output")
    w = RNG.standard_normal(ty.shape)
    ours_wrt = [xs[i] for i in grad_inputs] + list(ours.parameters())
    theirs_wrt = [txs[i] for i in grad_inputs] + list(theirs.parameters())
    if not ours_wrt:
        return
    grads = js.grad((y * _ours(w, backend, False)).sum(), ours_wrt)
    tgrads = torch.autograd.grad((ty * torch.tensor(w)).sum(), theirs_wrt)
    for i, (g, tg) in enumerate(zip(grads, tgrads, strict=True)):
        close(g, tg.numpy(), backend, f"gradient {i}")


# name: (ours, torch's, inputs[, indices of the inputs that take gradients])
MODULES = {
    "GroupNorm": (lambda m: m.GroupNorm(2, 4), X4),
    "GroupNorm no affine": (lambda m: m.GroupNorm(4, 4, eps=1e-3, affine=False), X3),
    "RMSNorm": (lambda m: m.RMSNorm([6, 8]), X4),
    "RMSNorm eps": (lambda m: m.RMSNorm(7, eps=1e-3, elementwise_affine=False), X3),
    "MaxPool1d": (lambda m: m.MaxPool1d(3, 2, padding=1), X3),
    "AvgPool1d": (lambda m: m.AvgPool1d(3, 2, 1, count_include_pad=False), X3),
    "Upsample nearest": (lambda m: m.Upsample(scale_factor=2), X4),
    "Upsample bilinear": (lambda m: m.Upsample(size=(7, 9), mode="bilinear",
                                               align_corners=True), X4),
    "ZeroPad1d": (lambda m: m.ZeroPad1d((1, 2)), X3),
    "ZeroPad2d": (lambda m: m.ZeroPad2d((1, 2, 0, 3)), X4),
    "ConstantPad1d": (lambda m: m.ConstantPad1d(2, 3.5), X3),
    "ConstantPad2d": (lambda m: m.ConstantPad2d((1, 0, 2, 1), -1.0), X4),
    "ReflectionPad1d": (lambda m: m.ReflectionPad1d((2, 1)), X3),
    "ReflectionPad2d": (lambda m: m.ReflectionPad2d(2), X4),
    "ReplicationPad1d": (lambda m: m.ReplicationPad1d(3), X3),
    "ReplicationPad2d": (lambda m: m.ReplicationPad2d((1, 2, 3, 0)), X4),
    "CircularPad1d": (lambda m: m.CircularPad1d((1, 2)), X3),
    "CircularPad2d": (lambda m: m.CircularPad2d(1), X4),
    "AdaptiveAvgPool1d": (lambda m: m.AdaptiveAvgPool1d(3), X3),
    "AdaptiveAvgPool2d": (lambda m: m.AdaptiveAvgPool2d((4, None)), X4),
    "AdaptiveMaxPool1d": (lambda m: m.AdaptiveMaxPool1d(4), X3),
    "AdaptiveMaxPool2d": (lambda m: m.AdaptiveMaxPool2d((4, 3)), X4),
    "PixelShuffle": (lambda m: m.PixelShuffle(2), X4),
    "PixelUnshuffle": (lambda m: m.PixelUnshuffle(2), X4),
}
PAIRED = {
    "Bilinear": (lambda m: m.Bilinear(3, 4, 5), RNG.standard_normal((6, 3)),
                 RNG.standard_normal((6, 4))),
    "CosineSimilarity": (lambda m: m.CosineSimilarity(dim=-1), PROBS, RATES),
    "PairwiseDistance": (lambda m: m.PairwiseDistance(p=3.0, keepdim=True), PROBS, RATES),
    "KLDivLoss": (lambda m: m.KLDivLoss(reduction="batchmean"), np.log(PROBS), RATES / 3),
    "KLDivLoss log_target": (lambda m: m.KLDivLoss(reduction="sum", log_target=True),
                             np.log(PROBS), np.log(RATES)),
    "MarginRankingLoss": (lambda m: m.MarginRankingLoss(0.2), PROBS[0, :3], RATES[0, :3],
                          SIGNS),
    "CosineEmbeddingLoss": (lambda m: m.CosineEmbeddingLoss(0.1, reduction="none"),
                            PROBS - 0.5, RATES - 1, SIGNS),
    "TripletMarginLoss": (lambda m: m.TripletMarginLoss(swap=True), PROBS, RATES, PROBS * RATES),
    "GaussianNLLLoss": (lambda m: m.GaussianNLLLoss(full=True), PROBS, RATES, RATES[:, 0]),
    "PoissonNLLLoss": (lambda m: m.PoissonNLLLoss(full=True), PROBS, RATES * 2),
    "PoissonNLLLoss rates": (lambda m: m.PoissonNLLLoss(log_input=False, reduction="sum"),
                             PROBS, RATES),
}
NO_TARGET_GRAD = {"MarginRankingLoss": (0, 1), "CosineEmbeddingLoss": (0, 1),
                  "PoissonNLLLoss": (0,), "PoissonNLLLoss rates": (0,)}


# On NumPy here; on JAX in `test_the_new_functionals_on_jax_in_one_program`.
@pytest.mark.parametrize("backend", ["numpy"])
@pytest.mark.parametrize("name", list(MODULES))
def test_modules_match_torch(name, backend):
    make, x = MODULES[name]
    kwargs = {"dtype": _float(backend), "backend": backend} if "Norm" in name else {}
    ours, theirs = make(js.nn) if not kwargs else _with_factory(make, kwargs), make(tnn)
    assert repr(ours) == repr(theirs)
    _same_module(ours, theirs, [x], backend)


def _with_factory(make, kwargs):
    """The module `make` builds, with the factory arguments added."""
    class Factory:
        def __getattr__(self, name):
            return lambda *a, **k: getattr(js.nn, name)(*a, **k, **kwargs)
    return make(Factory())


@pytest.mark.parametrize("backend", ["numpy"])
@pytest.mark.parametrize("name", list(PAIRED))
def test_two_input_modules_and_losses_match_torch(name, backend):
    make, *inputs = PAIRED[name]
    ours = (_with_factory(make, {"dtype": _float(backend), "backend": backend})
            if name == "Bilinear" else make(js.nn))
    theirs = make(tnn)
    assert repr(ours) == repr(theirs)
    _same_module(ours, theirs, inputs, backend, NO_TARGET_GRAD.get(name))


# name: (ours(f, *inputs), inputs): second gradients through the functionals, on NumPy
SECOND_ORDER = {
    "group_norm": (lambda f, x, w, b: f.group_norm(x, 2, w, b), [X3, *uniform_values(1, 4, 4)]),
    "rms_norm": (lambda f, x, w: f.rms_norm(x, [7], w), [X3, RNG.standard_normal(7)]),
    "bilinear": (lambda f, a, b, w, c: f.bilinear(a, b, w, c),
                 uniform_values(2, (4, 2), (4, 3), (5, 2, 3), (5,))),
    "adaptive_avg_pool2d": (lambda f, x: f.adaptive_avg_pool2d(x, (2, 4)), [X4]),
    "adaptive_max_pool1d": (lambda f, x: f.adaptive_max_pool1d(x, 3), [X3]),
    "kl_div": (lambda f, x, t: f.kl_div(x, t, reduction="batchmean"), [np.log(PROBS), RATES]),
    "triplet_margin_loss": (lambda f, a, p, n: f.triplet_margin_loss(a, p, n, margin=2.0),
                            [PROBS, RATES, PROBS * RATES]),
    "gaussian_nll_loss": (lambda f, x, t, v: f.gaussian_nll_loss(x, t, v),
                          [PROBS, RATES, RATES]),
    "cosine_embedding_loss": (
        lambda f, a, b: f.cosine_embedding_loss(a, b, js_or_torch(f, SIGNS)), [PROBS, RATES]),
}


def js_or_torch(f, values):
    """A constant for `f`'s library (ours or torch's functional)."""
    return torch.tensor(values) if f is TF else js.tensor(values)


@pytest.mark.parametrize("name", list(SECOND_ORDER))
def test_functionals_second_gradients(name):
    call, values = SECOND_ORDER[name]
    check_against_torch(torch, lambda *xs: call(F, *xs), lambda *xs: call(TF, *xs), values,
                        "numpy")


def _pieces(functional, cat, x4, weight, bias):
    """The new normalization, pooling and shuffle functionals' results, flattened into one
    vector (the layers wrap these and functionals tested on JAX elsewhere; the losses and
    rms_norm are pointwise compositions of ops tested there)."""
    outs = [functional.group_norm(x4, 2, weight, bias), functional.adaptive_avg_pool2d(x4, (4, 3)),
            functional.adaptive_max_pool2d(x4, (4, 3)), functional.pixel_shuffle(x4, 2)]
    return cat([out.reshape(-1) for out in outs])


def test_the_new_functionals_on_jax_in_one_program():
    """The new functionals on JAX, to the second order, compiled as one program
    (each new shape would compile every op again)."""
    check_against_torch(
        torch, lambda *xs: _pieces(F, js.cat, *xs), lambda *xs: _pieces(TF, torch.cat, *xs),
        [X4[..., :4], *uniform_values(3, 4, 4)], "jax", compiled=True)


@pytest.mark.parametrize("backend", BACKENDS)
def test_adaptive_max_pool_indices(backend):
    for n, x, size in [(1, X3, 4), (2, X4, (3, 4))]:
        ours = getattr(F, f"adaptive_max_pool{n}d")(_ours(x, backend), size, True)
        theirs = getattr(TF, f"adaptive_max_pool{n}d")(torch.tensor(x), size, True)
        close(ours[0], theirs[0].numpy(), backend, "values")
        np.testing.assert_array_equal(arr(ours[1]), theirs[1].numpy())


@pytest.mark.parametrize("backend", BACKENDS)
def test_channel_dropout_zeroes_whole_channels(backend):
    x = _ours(np.abs(X4) + 1, backend)
    for layer, inputs in [(js.nn.Dropout2d(0.5), x), (js.nn.Dropout1d(0.5), x[0])]:
        ratio = arr(layer(inputs, key=3) / inputs)
        per_channel = ratio.reshape(ratio.shape[: -1 if inputs.ndim == 3 else -2] + (-1,))
        assert np.all(per_channel == per_channel[..., :1])
        assert set(np.unique(per_channel)) <= {0.0, 2.0}
        layer.eval()
        assert layer(inputs) is inputs
    assert arr(F.dropout2d(x, 1.0)).sum() == 0


@pytest.mark.parametrize("shape", [(2, 3, 4), (2, 3), (2, 3, 4, 5, 6)])
def test_dropout2d_warns_as_torch(shape):
    with warnings.catch_warnings(record=True) as theirs:
        warnings.simplefilter("always")
        TF.dropout2d(torch.ones(shape))
    with warnings.catch_warnings(record=True) as ours:
        warnings.simplefilter("always")
        F.dropout2d(js.ones(shape))
    assert [str(w.message) for w in ours] == [str(w.message) for w in theirs]


def test_kl_div_mean_warns_as_torch():
    with warnings.catch_warnings(record=True) as theirs:
        warnings.simplefilter("always")
        expected = tnn.KLDivLoss()(torch.tensor(np.log(PROBS)), torch.tensor(RATES))
    with warnings.catch_warnings(record=True) as ours:
        warnings.simplefilter("always")
        got = js.nn.KLDivLoss()(js.tensor(np.log(PROBS)), js.tensor(RATES))
    assert [str(w.message) for w in ours] == [str(w.message) for w in theirs]
    close(got, expected.numpy(), "numpy", "mean")


def test_legacy_reduction_arguments():
    with pytest.warns(UserWarning, match="size_average and reduce"):
        loss = js.nn.MarginRankingLoss(reduce=False)
    assert loss.reduction == "none"


def _raises_like_torch(ours, theirs):
    with pytest.raises(Exception) as expected:
        theirs()
    with pytest.raises(expected.type):
        ours()


def test_errors_where_torch_raises():
    x3, t3 = js.tensor(X3), torch.tensor(X3)
    cases = [  # (layer, the input it is called on, or None: the constructor raises)
        (lambda m: m.GroupNorm(3, 4), None),
        (lambda m: m.Upsample(), X3),
        (lambda m: m.Upsample(size=3, scale_factor=2.0), X3),
        (lambda m: m.ReflectionPad1d((1, 2, 3)), X3),
        (lambda m: m.ReflectionPad1d(7), X3),
        (lambda m: m.CircularPad2d(1), X3[0]),
        (lambda m: m.Dropout1d(1.5), None),
        (lambda m: m.TripletMarginLoss(margin=0.0), None),
    ]
    for make, x in cases:
        def call(library, wrap, make=make, x=x):
            layer = make(library)
            return layer if x is None else layer(wrap(x))
        _raises_like_torch(lambda call=call: call(js.nn, js.tensor),
                           lambda call=call: call(tnn, torch.tensor))
    _raises_like_torch(lambda: F.group_norm(x3, 3), lambda: TF.group_norm(t3, 3))
    _raises_like_torch(lambda: F.dropout1d(js.tensor(X4)), lambda: TF.dropout1d(torch.tensor(X4)))
    _raises_like_torch(lambda: F.pixel_shuffle(x3, 2), lambda: TF.pixel_shuffle(t3, 2))
    _raises_like_torch(lambda: F.gaussian_nll_loss(x3, x3, x3[:, :2]),
                       lambda: TF.gaussian_nll_loss(t3, t3, t3[:, :2]))


def test_bilinear_initialisation_is_pure_and_in_bounds():
    a, b = js.nn.Bilinear(4, 3, 2, key=1), js.nn.Bilinear(4, 3, 2, key=1)
    np.testing.assert_array_equal(arr(a.weight), arr(b.weight))
    assert np.abs(arr(a.weight)).max() <= 0.5 and np.abs(arr(a.bias)).max() <= 0.5
