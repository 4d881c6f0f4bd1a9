"""The functionals and modules that draw (ops/random_functional.py, nn/random_layers.py):
gumbel_softmax, rrelu, alpha_dropout and feature_alpha_dropout, RReLU, AlphaDropout and
FeatureAlphaDropout. Their draws are not torch's, so these test what the draw must be (sums
to 1, one-hot, slopes within bounds, mean 0 and variance 1 kept) and compare with torch
everything that does not depend on it: the values outside training, the values a dropped
or kept element takes, the gradients given the draw, reprs, warnings and errors; on the
NumPy (float64) and JAX (float32) backends."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest
from helpers import arr
from ops_oracle import close

import jaxstream as js
import jaxstream.nn.functional as F

torch = pytest.importorskip("torch")
tnn, TF = torch.nn, torch.nn.functional

pytestmark = pytest.mark.oracle
BACKENDS = ["numpy", "jax"]
RNG = np.random.default_rng(0)
LOGITS = RNG.standard_normal((3, 5))
SIGNED = np.concatenate([RNG.standard_normal((3, 4)), np.zeros((3, 1))], axis=1)  # with 0s
W = RNG.standard_normal((3, 5))


def _tensor(values, backend, requires_grad=False):
    dtype = np.float64 if backend == "numpy" else np.float32
    return js.tensor(np.asarray(values, dtype=dtype), backend=backend,
                     requires_grad=requires_grad)


def _grad(y, x, w=W):
    return arr(js.grad((y * _tensor(w, x.backend)).sum(), [x])[0])


# ------------------------------------------------------------------ gumbel_softmax
@pytest.mark.parametrize("backend", BACKENDS)
def test_gumbel_softmax_draws_a_distribution_with_the_softmax_gradient(backend):
    x = _tensor(LOGITS, backend, True)
    for dim, tau in ((-1, 1.0), (0, 0.5)):
        y = F.gumbel_softmax(x, tau=tau, dim=dim, key=4)
        values = arr(y)
        close(values.sum(dim), np.ones(values.shape[1 - dim % 2]), backend, "sums")
        assert ((values > 0) & (values < 1)).all()
        close(values, arr(F.gumbel_softmax(x, tau, dim=dim, key=4)), backend, "same key")
        assert not np.allclose(values, arr(F.gumbel_softmax(x, tau, dim=dim, key=5)))
        # given the draw, the gradient is softmax's (torch's, at logits with that softmax) / tau
        z = torch.tensor(np.log(values).astype(np.float64), requires_grad=True)
        (expected,) = torch.autograd.grad((torch.softmax(z, dim) * torch.tensor(W)).sum(), z)
        close(_grad(y, x), expected.numpy() / tau, backend, "gradient")


@pytest.mark.parametrize("backend", BACKENDS)
def test_hard_gumbel_softmax_is_one_hot_with_the_soft_gradient(backend):
    x = _tensor(LOGITS, backend, True)
    soft, hard = F.gumbel_softmax(x, key=7), F.gumbel_softmax(x, hard=True, key=7)
    one_hot = np.eye(5)[arr(soft).argmax(-1)]
    close(arr(hard), one_hot, backend, "one-hot of the soft sample's largest entry")
    close(_grad(hard, x), _grad(soft, x), backend, "straight-through gradient")
    hard_rows = F.gumbel_softmax(x, hard=True, dim=0, key=7)
    close(arr(hard_rows).sum(0), np.ones(5), backend, "one per column")


def test_gumbel_softmax_draws_from_the_global_generator_without_a_key():
    state = js.get_rng_state()
    try:
        js.manual_seed(11)
        first = arr(F.gumbel_softmax(js.tensor(LOGITS)))
        js.manual_seed(11)
        np.testing.assert_array_equal(arr(F.gumbel_softmax(js.tensor(LOGITS))), first)
        assert not np.array_equal(arr(F.gumbel_softmax(js.tensor(LOGITS))), first)
    finally:
        js.set_rng_state(state)


def test_gumbel_softmax_warns_and_refuses_as_torch():
    with warnings.catch_warnings(record=True) as theirs:
        warnings.simplefilter("always")
        TF.gumbel_softmax(torch.tensor(LOGITS), eps=1e-3)
    with warnings.catch_warnings(record=True) as ours:
        warnings.simplefilter("always")
        F.gumbel_softmax(js.tensor(LOGITS), eps=1e-3, key=0)
    assert [str(w.message) for w in ours] == [str(w.message) for w in theirs]
    with pytest.raises(RuntimeError, match="Exponential distribution is a continuous"):
        TF.gumbel_softmax(torch.tensor([[1, 2]]))
    with pytest.raises(RuntimeError, match="Exponential distribution is a continuous"):
        F.gumbel_softmax(js.tensor([[1, 2]]))


# ------------------------------------------------------------------ rrelu
@pytest.mark.parametrize("backend", BACKENDS)
def test_rrelu_in_training_draws_slopes_within_bounds(backend):
    x = _tensor(SIGNED, backend, True)
    y = F.rrelu(x, 0.1, 0.3, training=True, key=2)
    values, inputs = arr(y), SIGNED
    negative = inputs < 0
    slopes = values[negative] / inputs[negative]
    assert ((slopes >= 0.1 - 1e-6) & (slopes <= 0.3 + 1e-6)).all()
    assert len(np.unique(slopes.round(5))) == len(slopes)  # a slope of its own each
    close(values[inputs >= 0], inputs[inputs >= 0], backend, "non-negative part")
    close(values, arr(F.rrelu(x, 0.1, 0.3, True, key=2)), backend, "same key")
    grad = _grad(y, x, np.ones(SIGNED.shape))
    close(grad[negative], slopes, backend, "gradient: the drawn slope")
    close(grad[inputs > 0], 1.0, backend, "gradient above 0")
    assert (grad[inputs == 0] >= 0.1 - 1e-6).all()  # a drawn slope at 0, as torch


def test_rrelu_slopes_are_uniform_over_a_large_sample():
    slopes = -arr(F.rrelu(-js.ones(20000, dtype="float64"), 0.2, 0.6, True, key=9))
    assert 0.2 <= slopes.min() < 0.21 and 0.59 < slopes.max() <= 0.6
    assert abs(slopes.mean() - 0.4) < 0.01 and abs(slopes.var() - 0.4 ** 2 / 12) < 0.002


@pytest.mark.parametrize("backend", BACKENDS)
def test_rrelu_outside_training_is_torchs(backend):
    x, tx = _tensor(SIGNED, backend, True), torch.tensor(SIGNED, requires_grad=True)
    for ours, theirs in ((F.rrelu(x), TF.rrelu(tx)),
                         (F.rrelu(x, 0.2, 0.5, False), TF.rrelu(tx, 0.2, 0.5, False))):
        close(ours, theirs.detach().numpy(), backend, "value")
        (expected,) = torch.autograd.grad((theirs * torch.tensor(W)).sum(), tx)
        close(_grad(ours, x), expected.numpy(), backend, "gradient")


def f_tensor(f, values):
    """`values` in `f`'s library (torch's functional or ours)."""
    return torch.tensor(values) if f is TF else js.tensor(values)


def test_rrelu_in_place_and_the_module_as_torch():
    x = js.tensor(SIGNED) * 1.0
    assert F.rrelu_(x, training=True, key=1) is x and x._version == 1
    close(x, arr(F.rrelu(js.tensor(SIGNED), training=True, key=1)), "numpy", "rrelu_")
    for args in ((), (0.1, 0.3, True)):
        ours, theirs = js.nn.RReLU(*args), tnn.RReLU(*args)
        assert repr(ours) == repr(theirs)
        close(ours(js.tensor(SIGNED), key=3), arr(F.rrelu(js.tensor(SIGNED), *args[:2],
                                                          training=True, key=3)), "numpy",
              "training")
        ours.eval()
        theirs.eval()
        close(ours(js.tensor(SIGNED)), theirs(torch.tensor(SIGNED)).numpy(), "numpy", "eval")
    for call in (lambda f: f.rrelu(f_tensor(f, SIGNED), 0.5, 0.1),
                 lambda f: f.rrelu(f_tensor(f, SIGNED), 0.5, 0.1, training=True)):
        with pytest.raises(RuntimeError, match="Lower bound should be less than or equal"):
            call(TF)
        with pytest.raises(RuntimeError, match="Lower bound should be less than or equal"):
            call(F)


# ------------------------------------------------------------------ alpha dropout
def _torch_alpha_dropout(name, inputs):
    """torch's value of a dropped element (the least: the inputs are positive), and the
    scale and shift of a kept one, from a draw of torch's (seeded, so never all kept)."""
    with torch.random.fork_rng():
        torch.manual_seed(0)
        out = getattr(TF, name)(torch.tensor(inputs), 0.3, True).numpy()
    kept = ~np.isclose(out, out.min())
    scale, shift = np.polyfit(inputs[kept], out[kept], 1)
    return out.min(), scale, shift


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", ["alpha_dropout", "feature_alpha_dropout"])
def test_alpha_dropout_sets_and_scales_as_torch(name, backend):
    values = np.abs(RNG.standard_normal((4, 6, 2))) + 0.1  # positive: a dropped one is below
    low, scale, shift = _torch_alpha_dropout(name, values)
    x = _tensor(values, backend, True)
    y = getattr(F, name)(x, 0.3, True, key=5)
    out = arr(y)
    dropped = np.isclose(out, low, rtol=1e-5)
    assert dropped.any() and (~dropped).any()
    close(out[~dropped], values[~dropped] * scale + shift, backend, "kept")
    grad = _grad(y, x, np.ones(values.shape))
    close(grad, np.where(dropped, 0.0, scale), backend, "gradient: the kept elements' scale")
    if name == "feature_alpha_dropout":
        assert (dropped == dropped[..., :1]).all()  # whole channels
    close(out, arr(getattr(F, name)(x, 0.3, True, key=5)), backend, "same key")


@pytest.mark.parametrize("name", ["alpha_dropout", "feature_alpha_dropout"])
def test_alpha_dropout_keeps_mean_zero_and_variance_one(name):
    x = js.tensor(RNG.standard_normal((400, 250, 1)))
    for p in (0.2, 0.5):
        out = arr(getattr(F, name)(x, p, True, key=6))
        assert abs(out.mean()) < 0.03 and abs(out.var() - 1.0) < 0.05


@pytest.mark.parametrize("name", ["alpha_dropout", "feature_alpha_dropout"])
def test_alpha_dropout_outside_training_and_at_the_ends_is_torchs(name):
    ours, theirs = getattr(F, name), getattr(TF, name)
    x, tx = js.tensor(LOGITS), torch.tensor(LOGITS)
    assert ours(x) is x and theirs(tx) is tx  # training=False by default: the identity
    assert ours(x, 0.0, True) is x and theirs(tx, 0.0, True) is tx
    np.testing.assert_array_equal(arr(ours(x, 1.0, True)), theirs(tx, 1.0, True).numpy())
    y = x * 1.0
    assert ours(y, 0.5, True, True, key=1) is y and y._version == 1
    calls = [lambda f, t: f(t, 1.5)]
    if name == "feature_alpha_dropout":  # a channel needs a batch axis too
        calls.append(lambda f, t: f(t[0], 0.5, True))
    for call in calls:
        with pytest.raises(Exception) as expected:
            call(theirs, tx)
        with pytest.raises(expected.type, match=re.escape(str(expected.value))):
            call(ours, x)


@pytest.mark.parametrize("name", ["AlphaDropout", "FeatureAlphaDropout"])
def test_alpha_dropout_modules_as_torch(name):
    functional = F.alpha_dropout if name == "AlphaDropout" else F.feature_alpha_dropout
    for args in ((), (0.2, True)):
        ours, theirs = getattr(js.nn, name)(*args), getattr(tnn, name)(*args)
        assert repr(ours) == repr(theirs)
        x = js.tensor(LOGITS) * 1.0
        y = ours(x, key=2)
        assert y is not x and x._version == 0  # as torch's, never in place
        np.testing.assert_array_equal(arr(y), arr(functional(x, ours.p, True, key=2)))
        ours.eval()
        assert ours(x) is x
    with pytest.raises(ValueError, match="dropout probability has to be between 0 and 1"):
        getattr(js.nn, name)(1.5)
