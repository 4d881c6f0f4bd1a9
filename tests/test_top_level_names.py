"""PyTorch's top-level names that jaxstream had only as methods or under `js.nn.functional`
(jaxstream/ops/top_level_names.py, top_level_nn.py), and the new Tensor methods (`x.where`,
`swapdims`, `positive`, `msort`, `diagflat`, `dist`, `renorm`, `hardshrink`, `prelu`), against
torch: parameter names (torch's schemas'), values, gradients to the second order, returned
structures and errors."""

from __future__ import annotations

import inspect
import warnings

import numpy as np
import pytest
from ops_oracle import check_against_torch, same_structure, uniform_values

import jaxstream as js

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.oracle

NAMES = [
    "clone", "detach", "permute", "numel", "swapaxes", "swapdims", "broadcast_to",
    "broadcast_tensors", "broadcast_shapes", "atleast_1d", "atleast_2d", "atleast_3d", "hstack",
    "vstack", "dstack", "column_stack", "row_stack", "split_with_sizes", "meshgrid", "rsub",
    "positive", "msort", "diagflat", "dist", "renorm", "relu_", "selu", "selu_", "celu",
    "celu_", "threshold", "threshold_", "prelu", "hardshrink", "rrelu", "rrelu_", "pdist",
    "channel_shuffle", "pixel_shuffle", "pixel_unshuffle", "conv3d", "conv_transpose1d",
    "conv_transpose2d", "conv_transpose3d", "max_pool1d", "max_pool2d", "max_pool3d",
    "avg_pool1d", "adaptive_avg_pool1d", "adaptive_max_pool1d", "alpha_dropout",
    "feature_alpha_dropout", "bilinear", "cosine_similarity", "pairwise_distance",
    "layer_norm", "group_norm", "batch_norm", "rms_norm", "embedding", "kl_div",
    "margin_ranking_loss", "cosine_embedding_loss", "hinge_embedding_loss",
    "triplet_margin_loss", "poisson_nll_loss", "binary_cross_entropy_with_logits",
]
# hsplit, vsplit and dsplit take torch's documented `indices_or_sections` (torch's keyword is
# `sections` or `indices` by overload); the draws take key= for torch's generator=.
SPLITS = ["hsplit", "vsplit", "dsplit"]


def _torchs_parameters(name):
    """The parameter names of torch's top-level `name`: its Python signature, else its first
    schema's (`self` is `input` in Python)."""
    try:
        return list(inspect.signature(getattr(torch, name)).parameters)
    except (TypeError, ValueError):
        schema = next(s for s in torch._C._jit_get_schemas_for_operator(f"aten::{name}")
                      if s.overload_name in ("", "input", "Tensor", "int", "from"))
        return ["input" if a.name == "self" else a.name for a in schema.arguments]


def test_the_names_are_torchs_with_its_parameters():
    for name in NAMES + SPLITS:
        assert name in js.__all__ and callable(getattr(js, name)), name
    for name in NAMES:
        ours = [p for p in inspect.signature(getattr(js, name)).parameters if p != "key"]
        theirs = [p for p in _torchs_parameters(name) if p != "generator"]
        assert ours == theirs, name
    for name in SPLITS:
        assert list(inspect.signature(getattr(js, name)).parameters) == [
            "input", "indices_or_sections"]


def _w(shape, seed=7):
    return np.random.default_rng(seed).uniform(-1, 1, shape)


TARGET = np.array([1.0, -1.0, -1.0, 1.0])
INDICES = np.array([[0, 3], [3, 1]])


def _fixed(lib, values, **kwargs):
    return (js.tensor if lib is js else torch.tensor)(values, **kwargs)


def _joined(tensors):
    return sum(t * (i + 1) for i, t in enumerate(tensors))


# name -> (a function of the library and the inputs, the inputs' shapes, their range)
DIFFERENTIABLE = {
    "clone": (lambda lib, x: lib.clone(x), [(2, 3)], None),
    "permute": (lambda lib, x: lib.permute(x, (2, 0, 1)), [(2, 3, 2)], None),
    "swapaxes": (lambda lib, x: lib.swapaxes(x, 0, -1), [(2, 3, 2)], None),
    "swapdims": (lambda lib, x: lib.swapdims(x, 1, 0), [(2, 3)], None),
    "broadcast_to": (lambda lib, x: lib.broadcast_to(x, (2, 2, 3)), [(2, 1)], None),
    "broadcast_tensors": (lambda lib, x, y: _joined(lib.broadcast_tensors(x, y)),
                          [(2, 1), (3,)], None),
    "atleast_3d": (lambda lib, x: lib.atleast_3d(x), [(3,)], None),
    "hstack": (lambda lib, x, y: lib.hstack([x, y]), [(2, 3), (2, 2)], None),
    "hstack_vectors": (lambda lib, x, y: lib.hstack((x, y)), [(3,), (2,)], None),
    "vstack": (lambda lib, x, y: lib.vstack([x, y]), [(2, 3), (3,)], None),
    "row_stack": (lambda lib, x, y: lib.row_stack([x, y]), [(3,), (3,)], None),
    "dstack": (lambda lib, x, y: lib.dstack([x, y]), [(2, 3), (2, 3)], None),
    "column_stack": (lambda lib, x, y: lib.column_stack([x, y]), [(3,), (3, 2)], None),
    "meshgrid_xy": (lambda lib, x, y: lib.meshgrid(x, y, indexing="xy")[0] * 2
                    + lib.meshgrid([x, y], indexing="xy")[1], [(2,), (3,)], None),
    "rsub": (lambda lib, x, y: lib.rsub(x, y, alpha=2), [(2, 3), (3,)], None),
    "rsub_number": (lambda lib, x: lib.rsub(x, 3.0), [(2, 3)], None),
    "msort": (lambda lib, x: lib.msort(x), [(3, 2)], None),
    "diagflat": (lambda lib, x: lib.diagflat(x, 1), [(2, 2)], None),
    "dist": (lambda lib, x, y: lib.dist(x, y), [(2, 3), (3,)], None),
    "dist_3": (lambda lib, x, y: lib.dist(x, y, 3), [(2, 3), (2, 3)], None),
    "renorm": (lambda lib, x: lib.renorm(x, 2, 1, 1.5), [(3, 4)], None),
    "renorm_3": (lambda lib, x: lib.renorm(x, 3, 0, 2.0), [(3, 4)], None),
    "selu": (lambda lib, x: lib.selu(x), [(2, 3)], None),
    "celu": (lambda lib, x: lib.celu(x, 0.5), [(2, 3)], None),
    "threshold": (lambda lib, x: lib.threshold(x, 0.1, 20.0), [(2, 3)], None),
    "prelu": (lambda lib, x, w: lib.prelu(x, w), [(2, 3), (3,)], None),
    "hardshrink": (lambda lib, x: lib.hardshrink(x, 0.6), [(2, 3)], None),
    "rrelu_eval": (lambda lib, x: lib.rrelu(x, 0.1, 0.3), [(2, 3)], None),
    "channel_shuffle": (lambda lib, x: lib.channel_shuffle(x, 2), [(1, 4, 2)], None),
    "pixel_shuffle": (lambda lib, x: lib.pixel_shuffle(x, 2), [(1, 4, 1, 2)], None),
    "pixel_unshuffle": (lambda lib, x: lib.pixel_unshuffle(x, 2), [(1, 1, 2, 4)], None),
    "conv3d": (lambda lib, x, w: lib.conv3d(x, w, None, 1, 1), [(1, 1, 2, 2, 2),
                                                                (2, 1, 2, 2, 2)], None),
    "conv_transpose1d": (lambda lib, x, w, b: lib.conv_transpose1d(x, w, b, 2, 1, 1),
                         [(1, 2, 3), (2, 3, 2), (3,)], None),
    "conv_transpose2d": (lambda lib, x, w: lib.conv_transpose2d(x, w, None, 2),
                         [(1, 2, 2, 2), (2, 1, 2, 2)], None),
    "conv_transpose3d": (lambda lib, x, w: lib.conv_transpose3d(x, w),
                         [(1, 1, 2, 2, 2), (1, 1, 2, 2, 2)], None),
    "max_pool1d": (lambda lib, x: lib.max_pool1d(x, 2), [(1, 2, 6)], None),
    "max_pool2d": (lambda lib, x: lib.max_pool2d(x, 2, (), 1, 1, True), [(1, 1, 3, 3)], None),
    "max_pool3d": (lambda lib, x: lib.max_pool3d(x, 2, 1), [(1, 1, 3, 2, 2)], None),
    "avg_pool1d": (lambda lib, x: lib.avg_pool1d(x, 3, 2, 1), [(1, 2, 6)], None),
    "adaptive_avg_pool1d": (lambda lib, x: lib.adaptive_avg_pool1d(x, 4), [(1, 2, 6)], None),
    "adaptive_max_pool1d": (lambda lib, x: lib.adaptive_max_pool1d(x, 3)[0], [(1, 2, 6)],
                            None),
    "bilinear": (lambda lib, x, y, w, b: lib.bilinear(x, y, w, b),
                 [(2, 3), (2, 2), (4, 3, 2), (4,)], None),
    "cosine_similarity": (lambda lib, x, y: lib.cosine_similarity(x, y, 0), [(2, 3), (2, 3)],
                          None),
    "pairwise_distance": (lambda lib, x, y: lib.pairwise_distance(x, y, 1.0, 1e-6, True),
                          [(2, 3), (2, 3)], None),
    "layer_norm": (lambda lib, x, w, b: lib.layer_norm(x, (3,), w, b, 1e-5, False),
                   [(2, 3), (3,), (3,)], None),
    "group_norm": (lambda lib, x, w, b: lib.group_norm(x, 2, w, b), [(2, 4, 2), (4,), (4,)],
                   None),
    "batch_norm": (lambda lib, x, w, b: lib.batch_norm(x, w, b, None, None, True, 0.1, 1e-5,
                                                       True), [(4, 3), (3,), (3,)], None),
    "rms_norm": (lambda lib, x, w: lib.rms_norm(x, [3], w), [(2, 3), (3,)], None),
    "embedding": (lambda lib, w: lib.embedding(w, _fixed(lib, INDICES), 1), [(4, 2)], None),
    "embedding_no_padding": (lambda lib, w: lib.embedding(w, _fixed(lib, INDICES)), [(4, 2)],
                             None),
    "kl_div_none": (lambda lib, x, t: lib.kl_div(x, t, 0), [(2, 3), (2, 3)], (0.1, 1.0)),
    "kl_div_default": (lambda lib, x, t: lib.kl_div(x, t), [(2, 3), (2, 3)], (0.1, 1.0)),
    "kl_div_mean": (lambda lib, x, t: lib.kl_div(x, t, reduction=1), [(2, 3), (2, 3)],
                    (0.1, 1.0)),
    "kl_div_sum_log": (lambda lib, x, t: lib.kl_div(x, t, 2, log_target=True),
                       [(2, 3), (2, 3)], None),
    "margin_ranking_loss": (lambda lib, x, y: lib.margin_ranking_loss(
        x, y, _fixed(lib, TARGET), 0.2, 0), [(4,), (4,)], None),
    "cosine_embedding_loss": (lambda lib, x, y: lib.cosine_embedding_loss(
        x, y, _fixed(lib, TARGET), 0.1), [(4, 3), (4, 3)], None),
    "hinge_embedding_loss": (lambda lib, x: lib.hinge_embedding_loss(
        x, _fixed(lib, TARGET), 0.5), [(4,)], None),  # unreduced by default, as torch's
    "triplet_margin_loss": (lambda lib, a, p, n: lib.triplet_margin_loss(
        a, p, n, 0.5, 2.0, 1e-6, True), [(2, 3), (2, 3), (2, 3)], None),
    "poisson_nll_loss": (lambda lib, x, t: lib.poisson_nll_loss(x, t, False, True, 1e-8, 2),
                         [(4,), (4,)], (0.5, 3.0)),
    "binary_cross_entropy_with_logits": (
        lambda lib, x, t: lib.binary_cross_entropy_with_logits(
            x, t, None, _fixed(lib, np.array([0.5, 2.0, 1.0, 3.0])), 1), [(4,), (4,)],
        (0.0, 1.0)),
    "where_method": (lambda lib, x, y: x.where(x > 0, y), [(2, 3), (3,)], None),
    "swapdims_method": (lambda lib, x: x.swapdims(0, 1), [(2, 3)], None),
    "positive_method": (lambda lib, x: x.positive() * 2, [(2, 3)], None),
    "msort_method": (lambda lib, x: x.msort(), [(3, 2)], None),
    "diagflat_method": (lambda lib, x: x.diagflat(-1), [(3,)], None),
    "dist_method": (lambda lib, x, y: x.dist(y), [(2, 3), (2, 3)], None),
    "renorm_method": (lambda lib, x: x.renorm(2, 0, 1.0), [(3, 4)], None),
    "hardshrink_method": (lambda lib, x: x.hardshrink(), [(2, 3)], None),
    "prelu_method": (lambda lib, x, w: x.prelu(w), [(2, 3), (1,)], None),
}


def test_differentiable_names_match_torch_to_the_second_order():
    """(No 1-norms: torch's second derivative of one imports its compiler, seconds long.)"""
    for i, (name, (fn, shapes, bounds)) in enumerate(DIFFERENTIABLE.items()):
        low, high = bounds or (-2.0, 2.0)
        try:
            check_against_torch(torch, lambda *xs, f=fn: f(js, *xs),
                                lambda *xs, f=fn: f(torch, *xs),
                                uniform_values(i, *shapes, low=low, high=high), "numpy")
        except (AssertionError, TypeError) as error:
            raise AssertionError(name) from error


def test_pdist_matches_torch_to_the_first_order():
    """torch has no second derivative of pdist."""
    values = uniform_values(3, (3, 2))[0]
    x, tx = js.tensor(values, requires_grad=True), torch.tensor(values, requires_grad=True)
    ours, theirs = js.pdist(x, 3), torch.pdist(tx, 3)
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=1e-12)
    w = np.array([1.0, -2.0, 0.5])
    (grad,), (tgrad,) = js.grad((ours * js.tensor(w)).sum(), [x]), torch.autograd.grad(
        (theirs * torch.tensor(w)).sum(), [tx])
    np.testing.assert_allclose(grad.numpy(), tgrad.numpy(), rtol=1e-10)


@pytest.mark.parametrize("name", ["hstack", "renorm", "layer_norm", "meshgrid_xy", "kl_div_mean"])
def test_names_on_jax_match_torch(name):
    fn, shapes, bounds = DIFFERENTIABLE[name]
    low, high = bounds or (-2.0, 2.0)
    check_against_torch(torch, lambda *xs: fn(js, *xs), lambda *xs: fn(torch, *xs),
                        uniform_values(1, *shapes, low=low, high=high), "jax", compiled=True)


def _pair(values, **kwargs):
    return js.tensor(values, **kwargs), torch.tensor(values, **kwargs)


def test_structures_match_torch():
    """What each returns (a tensor, a tuple of views, a Size, the input itself) and holds."""
    m, tm = _pair(np.arange(24.0).reshape(2, 3, 4))
    v, tv = _pair(np.arange(4.0))
    s, ts = _pair(np.array(2.5))
    for call in (lambda lib, x, y, z: lib.atleast_1d(z), lambda lib, x, y, z: lib.atleast_2d(y),
                 lambda lib, x, y, z: lib.atleast_1d(x, y, z),
                 lambda lib, x, y, z: lib.atleast_2d([z, y]),
                 lambda lib, x, y, z: lib.atleast_3d((z, y, x)),
                 lambda lib, x, y, z: lib.broadcast_tensors(x, y, z),
                 lambda lib, x, y, z: lib.hsplit(x, 3), lambda lib, x, y, z: lib.hsplit(y, [1]),
                 lambda lib, x, y, z: lib.vsplit(x, [1, 5]), lambda lib, x, y, z: lib.dsplit(x, 2),
                 lambda lib, x, y, z: lib.split_with_sizes(x, [1, 2], 1),
                 lambda lib, x, y, z: lib.meshgrid(y, z, y, indexing="ij"),
                 lambda lib, x, y, z: lib.meshgrid([y, z], indexing="xy"),
                 lambda lib, x, y, z: lib.adaptive_max_pool1d(x, 2),
                 lambda lib, x, y, z: lib.detach(x)):
        same_structure(call(js, m, v, s), call(torch, tm, tv, ts), "numpy")
    assert js.numel(m) == torch.numel(tm) == 24 and js.positive(m) is m
    assert js.atleast_1d(v) is v and js.atleast_3d(m) is m
    shape = js.broadcast_shapes((2, 1), 3, [1, 1, 3])
    theirs = torch.broadcast_tensors(torch.empty(2, 1), torch.empty(3), torch.empty(1, 1, 3))
    assert isinstance(shape, js.Size) and shape == tuple(theirs[0].shape)  # (torch's
    # broadcast_shapes imports its compiler on a first call, seconds long)
    assert all(t._base is m for t in js.hsplit(m, 3)) and js.detach(m)._base is None
    assert js.clone(m, memory_format=torch.contiguous_format) is not m


def test_meshgrid_without_indexing_warns_and_takes_ij():
    with pytest.warns(UserWarning, match="it will be required to pass the indexing argument"):
        ours = js.meshgrid(js.arange(2), js.arange(3))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        same_structure(ours, torch.meshgrid(torch.arange(2), torch.arange(3)), "numpy")


def test_in_place_names_and_the_eval_draws_match_torch():
    """The top-level in-place activations change their input; rrelu and the alpha dropouts
    outside training are deterministic (and draw from key= in training)."""
    values = np.linspace(-2.0, 2.0, 6).reshape(2, 3)
    for call in (lambda lib, t: lib.relu_(t), lambda lib, t: lib.selu_(t),
                 lambda lib, t: lib.celu_(t, 0.5), lambda lib, t: lib.threshold_(t, 0.5, -3.0),
                 lambda lib, t: lib.rrelu_(t, 0.2, 0.4), lambda lib, t: t.relu_()):
        ours, theirs = _pair(values)
        assert call(js, ours) is ours and ours._version == 1
        np.testing.assert_allclose(ours.numpy(), call(torch, theirs).numpy(), rtol=1e-12)
    x, tx = _pair(values)
    for name in ("alpha_dropout", "feature_alpha_dropout"):
        np.testing.assert_array_equal(getattr(js, name)(x, 0.5, False).numpy(),
                                      getattr(torch, name)(tx, 0.5, False).numpy())
        kept = getattr(js, name)(x[None], 0.5, True, key=3)
        np.testing.assert_array_equal(kept.numpy(), getattr(js, name)(x[None], 0.5, True,
                                                                      key=3).numpy())
    trained = js.rrelu(x, 0.1, 0.3, True, key=2)
    slope = trained.numpy()[values < 0] / values[values < 0]
    assert np.all((slope >= 0.1) & (slope <= 0.3))
    assert js.max_pool2d(x[None], 2).shape == (1, 1, 1)  # the values only, stride = kernel


def _raises_as_torch(ours, theirs, phrase=None):
    """Both raise; torch's words (less its `torch.` prefix) are in ours, or `phrase` is."""
    with pytest.raises(Exception) as their_error:
        theirs()
    with pytest.raises(Exception) as our_error:
        ours()
    expected = phrase or str(their_error.value).removeprefix("torch.")
    assert expected in str(our_error.value), (str(our_error.value), expected)


def test_errors_are_torchs():
    m, tm = _pair(np.ones((3, 4)))
    v, tv = _pair(np.ones(3))
    cases = [
        (lambda lib, m, v: lib.hsplit(m, 3), None),
        (lambda lib, m, v: lib.hsplit(m.sum(), 1), None),
        (lambda lib, m, v: lib.vsplit(v, 1), None),
        (lambda lib, m, v: lib.dsplit(m, 2), None),
        (lambda lib, m, v: lib.hstack([]), None),
        (lambda lib, m, v: lib.meshgrid(v, indexing="ji"), None),
        (lambda lib, m, v: lib.meshgrid(m, indexing="ij"),
         "Expected 0D or 1D tensor in the tensor list"),
        (lambda lib, m, v: lib.meshgrid(v, v.long(), indexing="ij"), None),
        (lambda lib, m, v: lib.renorm(v, 2, 0, 1.0), None),
        (lambda lib, m, v: lib.renorm(m, -1, 0, 1.0), None),
        (lambda lib, m, v: lib.renorm(m, 2, 0, -1.0), None),
        (lambda lib, m, v: lib.positive(v > 0), None),
        (lambda lib, m, v: lib.dist(v.long(), v.long()), None),
        (lambda lib, m, v: lib.renorm(m.long(), 2, 0, 1.0), None),
        (lambda lib, m, v: lib.broadcast_tensors(m, v), "must match the size"),
        (lambda lib, m, v: lib.split_with_sizes(m, [1, 1]),
         "split_with_sizes expects split_sizes to sum exactly to 3"),
        (lambda lib, m, v: lib.kl_div(m, m, "mean"), "argument 'reduction'"),
        (lambda lib, m, v: lib.permute(m, (0,)), "number of dimensions in the tensor input"),
    ]
    for call, phrase in cases:
        _raises_as_torch(lambda c=call: c(js, m, v), lambda c=call: c(torch, tm, tv), phrase)
    with pytest.raises(RuntimeError, match=r"size of tensor a \(2\) must match the size of "
                                           r"tensor b \(3\)"):  # torch's words are its own
        js.broadcast_shapes((2,), (3,))
