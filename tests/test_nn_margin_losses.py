"""The margin and hinge losses (ops/margin_losses.py, nn/margin_losses.py) and the other
deterministic functionals added beside them (pdist, channel_shuffle, Softmax2d,
ChannelShuffle, and the in-place spellings relu_ to threshold_) against torch's: values
for every reduction, gradients of the inputs (targets and weights where torch gives
them), second gradients, module reprs, constructor parameters and state_dict keys, and
torch's errors, on the NumPy (float64) and JAX (float32) backends."""

from __future__ import annotations

import inspect
import warnings

import numpy as np
import pytest
from ops_oracle import check_against_torch, close

import jaxstream as js
import jaxstream.nn.functional as F

torch = pytest.importorskip("torch")
tnn, TF = torch.nn, torch.nn.functional

pytestmark = pytest.mark.oracle
RNG = np.random.default_rng(0)
X, Y, Z = (RNG.standard_normal((3, 4)) for _ in range(3))
SIGNS = np.sign(RNG.standard_normal((3, 4)))
PROBS = RNG.uniform(size=(3, 4))
LABELS = np.array([1, 0, 3])
LABEL_LISTS = np.array([[3, 0, -1, 1], [0, 1, 2, 3], [-1, 1, 1, 1]])  # -1 ends each list
CLASS_WEIGHT = np.array([0.5, 1.0, 2.0, 3.0])
HINGE_TARGET = np.array([1.0, -1.0, 0.0, 2.0])  # torch adds both terms where it is not +-1
REDUCTIONS = ["none", "mean", "sum"]
LEAVES = {"x": X, "y": Y, "z": Z, "probs": PROBS, "weight": CLASS_WEIGHT,
          "channels": X.reshape(1, 4, 3), "images": X.reshape(1, 2, 2, 3)}
"""The differentiable inputs, by name; an input given as (values, "c" or "i") is a float or
an integer constant."""


class Library:
    """torch's or ours: its functional, its nn, and constants and leaves made in it."""

    def __init__(self, ours, backend="numpy"):
        self.ours, self.backend = ours, backend
        self.F, self.nn = (F, js.nn) if ours else (TF, tnn)
        self.float = np.float64 if backend == "numpy" else np.float32

    def c(self, values, requires_grad=False):
        if not self.ours:
            return torch.tensor(np.asarray(values, dtype=np.float64), requires_grad=requires_grad)
        return js.tensor(np.asarray(values, dtype=self.float), backend=self.backend,
                         requires_grad=requires_grad)

    def i(self, values):
        return js.tensor(values, backend=self.backend) if self.ours else torch.tensor(values)

    def made(self, spec, leaves):
        """The input `spec` names: a leaf of `leaves`, or a constant."""
        if isinstance(spec, str):
            return leaves[spec]
        values, kind = spec
        return self.i(values) if kind == "i" else self.c(values)


def _same_results(call, inputs, backend, values=LEAVES):
    """`call(library, *tensors)` agrees with torch's: its value and the gradients of the
    leaves it takes under a random cotangent."""
    names = [spec for spec in inputs if isinstance(spec, str)]
    ours_lib, theirs_lib = Library(True, backend), Library(False)
    leaves = {n: ours_lib.c(values[n], True) for n in names}
    t_leaves = {n: theirs_lib.c(values[n], True) for n in names}
    y = call(ours_lib, *(ours_lib.made(s, leaves) for s in inputs))
    ty = call(theirs_lib, *(theirs_lib.made(s, t_leaves) for s in inputs))
    close(y, ty.detach().numpy(), backend, "value")
    assert y.shape == tuple(ty.shape)
    w = RNG.standard_normal(ty.shape)
    grads = js.grad((y * ours_lib.c(w)).sum(), list(leaves.values()))
    tgrads = torch.autograd.grad((ty * torch.tensor(w)).sum(), list(t_leaves.values()))
    for name, g, tg in zip(names, grads, tgrads, strict=True):
        close(g, tg.numpy(), backend, f"gradient of {name}")


# name: (call(library, *inputs, **reduction arguments), inputs)
LOSSES = {
    "soft_margin_loss": (lambda L, x, t, **kw: L.F.soft_margin_loss(x, t, **kw),
                         ["x", (SIGNS, "c")]),
    "multi_margin_loss": (lambda L, x, t, **kw: L.F.multi_margin_loss(
        x, t, 1, 0.7, L.c(CLASS_WEIGHT), **kw), ["x", (LABELS, "i")]),
    "multi_margin_loss p=2": (lambda L, x, t, **kw: L.F.multi_margin_loss(x, t, p=2, **kw),
                              ["x", (LABELS, "i")]),
    "multilabel_margin_loss": (lambda L, x, t, **kw: L.F.multilabel_margin_loss(x, t, **kw),
                               ["x", (LABEL_LISTS, "i")]),
    "multilabel_soft_margin_loss": (lambda L, x, t, w, **kw: L.F.multilabel_soft_margin_loss(
        x, t, w, **kw), ["x", "probs", "weight"]),
    "hinge_embedding_loss": (lambda L, x, t, **kw: L.F.hinge_embedding_loss(x, t, 0.5, **kw),
                             ["x", (HINGE_TARGET, "c")]),
    "triplet_margin_with_distance_loss": (
        lambda L, a, p, n, **kw: L.F.triplet_margin_with_distance_loss(a, p, n, swap=True,
                                                                       **kw),
        ["x", "y", "z"]),
    "triplet_margin_with_distance_loss cosine": (
        lambda L, a, p, n, **kw: L.F.triplet_margin_with_distance_loss(
            a, p, n, distance_function=lambda u, v: 1.0 - L.F.cosine_similarity(u, v),
            margin=0.5, **kw),
        ["x", "y", "z"]),
}


# On NumPy here; on JAX in `test_everything_on_jax_in_one_program`.
@pytest.mark.parametrize("name", list(LOSSES))
def test_losses_match_torch_for_every_reduction(name):
    call, inputs = LOSSES[name]
    for reduction in REDUCTIONS:
        _same_results(lambda L, *xs, r=reduction: call(L, *xs, reduction=r), inputs, "numpy")


@pytest.mark.parametrize("call, target", [
    (lambda L, x, t: L.F.multi_margin_loss(x, t, reduction="none"), np.array(2)),
    (lambda L, x, t: L.F.multi_margin_loss(x, t, reduction="none"), np.array([2])),
    (lambda L, x, t: L.F.multilabel_margin_loss(x, t, reduction="none"), np.array([1, 1, -1, 0])),
], ids=["multi_margin_loss scalar target", "multi_margin_loss one target",
        "multilabel_margin_loss repeated label"])
def test_one_sample_as_torch(call, target):
    _same_results(call, ["row", (target, "i")], "numpy", {"row": X[0]})


@pytest.mark.parametrize("name", ["soft_margin_loss", "multi_margin_loss",
                                  "multilabel_margin_loss", "multilabel_soft_margin_loss",
                                  "hinge_embedding_loss"])
def test_the_legacy_arguments_warn_and_reduce_as_torch(name):
    call, inputs = LOSSES[name]
    ours_lib, theirs_lib = Library(True), Library(False)
    for legacy in ({"size_average": False}, {"reduce": False}):
        with pytest.warns(UserWarning, match="size_average and reduce args will be deprecated"):
            ours = call(ours_lib, *(ours_lib.made(s, {n: ours_lib.c(v) for n, v in
                                                      LEAVES.items()}) for s in inputs), **legacy)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            theirs = call(theirs_lib, *(theirs_lib.made(s, {n: theirs_lib.c(v) for n, v in
                                                            LEAVES.items()}) for s in inputs),
                          **legacy)
        close(ours, theirs.numpy(), "numpy", str(legacy))


def _constant(f, values):
    return torch.tensor(values) if f is TF else js.tensor(values)


# torch has no second derivative of multi_margin_loss, multilabel_margin_loss and pdist
SECOND_ORDER = {
    "multilabel_soft_margin_loss": (lambda f, x, t, w: f.multilabel_soft_margin_loss(x, t, w),
                                    [X, PROBS, CLASS_WEIGHT]),
    "soft_margin_loss": (lambda f, x: f.soft_margin_loss(x, _constant(f, SIGNS)), [X]),
    "triplet_margin_with_distance_loss": (
        lambda f, a, p, n: f.triplet_margin_with_distance_loss(a, p, n, margin=3.0), [X, Y, Z]),
}


@pytest.mark.parametrize("name", list(SECOND_ORDER))
def test_second_gradients_are_torchs(name):
    call, values = SECOND_ORDER[name]
    check_against_torch(torch, lambda *xs: call(F, *xs), lambda *xs: call(TF, *xs), values,
                        "numpy")


# ------------------------------------------------------------------ modules
# name: (make(library), inputs)
MODULES = {
    "SoftMarginLoss": (lambda L: L.nn.SoftMarginLoss(reduction="sum"), ["x", (SIGNS, "c")]),
    "MultiMarginLoss": (lambda L: L.nn.MultiMarginLoss(p=2, margin=0.5, weight=L.c(CLASS_WEIGHT)),
                        ["x", (LABELS, "i")]),
    "MultiLabelMarginLoss": (lambda L: L.nn.MultiLabelMarginLoss(reduction="none"),
                             ["x", (LABEL_LISTS, "i")]),
    "MultiLabelSoftMarginLoss": (lambda L: L.nn.MultiLabelSoftMarginLoss(L.c(CLASS_WEIGHT)),
                                 ["x", "probs"]),
    "HingeEmbeddingLoss": (lambda L: L.nn.HingeEmbeddingLoss(margin=2.0),
                           ["x", (HINGE_TARGET, "c")]),
    "TripletMarginWithDistanceLoss": (lambda L: L.nn.TripletMarginWithDistanceLoss(),
                                      ["x", "y", "z"]),
    "TripletMarginWithDistanceLoss module": (
        lambda L: L.nn.TripletMarginWithDistanceLoss(
            distance_function=L.nn.PairwiseDistance(p=1.0), margin=2.0, swap=True,
            reduction="none"),
        ["x", "y", "z"]),
    "ChannelShuffle": (lambda L: L.nn.ChannelShuffle(2), ["channels"]),
    "Softmax2d": (lambda L: L.nn.Softmax2d(), ["images"]),
}


def _module_pair(name, backend):
    """Our module and torch's, torch's state_dict loaded into ours (the same keys)."""
    make, _ = MODULES[name]
    ours_lib = Library(True, backend)
    ours, theirs = make(ours_lib), make(Library(False))
    state = theirs.state_dict()
    ours.load_state_dict({k: ours_lib.c(v.numpy()) for k, v in state.items()})
    assert list(ours.state_dict()) == list(state)
    return ours, theirs


@pytest.mark.parametrize("name", list(MODULES))
def test_modules_match_torch(name):
    ours, theirs = _module_pair(name, "numpy")
    assert repr(ours) == repr(theirs)
    _same_results(lambda L, *xs: (ours if L.ours else theirs)(*xs), MODULES[name][1], "numpy")


@pytest.mark.parametrize("name", [n for n in MODULES if " " not in n and n != "Softmax2d"])
def test_constructors_take_torchs_parameters(name):
    ours, theirs = getattr(js.nn, name), getattr(tnn, name)
    assert [(p.name, p.kind, p.default) for p in inspect.signature(ours).parameters.values()] \
        == [(p.name, p.kind, p.default) for p in inspect.signature(theirs).parameters.values()]


def test_class_weights_are_buffers_that_move_with_the_module():
    loss = js.nn.MultiMarginLoss(weight=js.tensor(CLASS_WEIGHT, dtype="float32"))
    assert [name for name, _ in loss.named_buffers()] == ["weight"]
    assert list(js.nn.MultiMarginLoss().state_dict()) == []
    loss.to("jax")
    assert loss.weight.backend == "jax"


# ------------------------------------------------------------------ pdist, channel_shuffle
def _pdist_by_pairs(x, p):
    """torch's pdist composed of vector_norm: torch's pdist has no second derivative."""
    first, second = np.triu_indices(x.shape[0], 1)
    return torch.linalg.vector_norm(x[first] - x[second], p, -1)


@pytest.mark.parametrize("p", [2, 1, 0.5, 3, float("inf")])
def test_pdist_is_torchs(p):
    rows = np.concatenate([X, X[:1]])  # a repeated row: distance 0, gradient 0
    _same_results(lambda L, x: L.F.pdist(x, p), ["rows"], "numpy", {"rows": rows})
    if p != 0.5:  # torch's second derivative of a fractional norm imports sympy: seconds
        check_against_torch(torch, lambda x: F.pdist(x, p), lambda x: _pdist_by_pairs(x, p),
                            [X], "numpy")


def test_pdist_of_zero_order_counts_and_of_one_row_is_empty():
    np.testing.assert_array_equal(np.asarray(F.pdist(js.tensor(X), 0).numpy()),
                                  TF.pdist(torch.tensor(X), 0).numpy())
    assert F.pdist(js.tensor(X[:1])).shape == (0,)


def test_channel_shuffle_moves_channels_as_torch():
    x = np.arange(24.0).reshape(2, 6, 2)
    for groups in (1, 2, 3, 6):
        np.testing.assert_array_equal(np.asarray(F.channel_shuffle(js.tensor(x), groups).numpy()),
                                      TF.channel_shuffle(torch.tensor(x), groups).numpy())
    ints = np.arange(12).reshape(1, 6, 2)
    np.testing.assert_array_equal(np.asarray(F.channel_shuffle(js.tensor(ints), 3).numpy()),
                                  TF.channel_shuffle(torch.tensor(ints), 3).numpy())


# ------------------------------------------------------------------ in-place spellings
INPLACE = {
    "relu_": (), "leaky_relu_": (0.2,), "elu_": (0.5,), "selu_": (), "celu_": (1.5,),
    "hardtanh_": (-0.5, 0.7), "threshold_": (0.1, -2.0),
}


@pytest.mark.parametrize("name", list(INPLACE))
def test_inplace_spellings_rebind_the_input_as_torch(name):
    x, tx = Library(True).c(X, True), Library(False).c(X, True)
    y, ty = x * 1.5, tx * 1.5
    assert getattr(F, name)(y, *INPLACE[name]) is y
    assert getattr(TF, name)(ty, *INPLACE[name]) is ty
    close(y, ty.detach().numpy(), "numpy", "value")
    (y * y).sum().backward()
    (ty * ty).sum().backward()
    close(x.grad, tx.grad.numpy(), "numpy", "gradient")
    assert y.grad_fn is not None and y._version == 1


# ------------------------------------------------------------------ errors
ERRORS = {
    "p": lambda L: L.F.multi_margin_loss(L.c(X), L.i(LABELS), p=3),
    "weight rank": lambda L: L.F.multi_margin_loss(L.c(X), L.i(LABELS), weight=L.c(PROBS)),
    "weight size": lambda L: L.F.multi_margin_loss(L.c(X), L.i(LABELS),
                                                   weight=L.c(CLASS_WEIGHT[:3])),
    "weight grad": lambda L: L.F.multi_margin_loss(L.c(X), L.i(LABELS),
                                                   weight=L.c(CLASS_WEIGHT, True)),
    "weight dtype": lambda L: L.F.multi_margin_loss(L.c(X), L.i(LABELS),
                                                    weight=L.c(CLASS_WEIGHT).float()),
    "target size": lambda L: L.F.multi_margin_loss(L.c(X), L.i(LABELS[:2])),
    "target rank": lambda L: L.F.multi_margin_loss(L.c(X), L.i(LABELS[None])),
    "target dtype": lambda L: L.F.multi_margin_loss(L.c(X), L.c(LABELS)),
    "target range": lambda L: L.F.multi_margin_loss(L.c(X), L.i([1, 0, 4])),
    "input rank": lambda L: L.F.multi_margin_loss(L.c(X[None]), L.i(LABELS)),
    "label lists size": lambda L: L.F.multilabel_margin_loss(L.c(X), L.i(LABEL_LISTS[:2])),
    "label lists range": lambda L: L.F.multilabel_margin_loss(L.c(X), L.i(LABEL_LISTS - 1)),
    "label lists dtype": lambda L: L.F.multilabel_margin_loss(L.c(X), L.c(LABEL_LISTS)),
    "soft reduction": lambda L: L.F.multilabel_soft_margin_loss(L.c(X), L.c(PROBS),
                                                                reduction="bad"),
    "soft margin target grad": lambda L: L.F.soft_margin_loss(L.c(X), L.c(SIGNS, True)),
    "soft margin reduction": lambda L: L.F.soft_margin_loss(L.c(X), L.c(SIGNS), reduction="bad"),
    "hinge broadcast": lambda L: L.F.hinge_embedding_loss(L.c(X), L.c(LABELS)),
    "triplet margin": lambda L: L.F.triplet_margin_with_distance_loss(L.c(X), L.c(Y), L.c(Z),
                                                                      margin=0),
    "triplet ranks": lambda L: L.F.triplet_margin_with_distance_loss(L.c(X), L.c(Y), L.c(Z[0])),
    "triplet reduction": lambda L: L.F.triplet_margin_with_distance_loss(
        L.c(X), L.c(Y), L.c(Z), reduction="bad"),
    "module p": lambda L: L.nn.MultiMarginLoss(p=3),
    "module weight rank": lambda L: L.nn.MultiMarginLoss(weight=L.c(PROBS)),
    "module margin": lambda L: L.nn.TripletMarginWithDistanceLoss(margin=-1.0),
    "pdist rank": lambda L: L.F.pdist(L.c(X[None])),
    "pdist p": lambda L: L.F.pdist(L.c(X), -1),
    "pdist dtype": lambda L: L.F.pdist(L.i(LABEL_LISTS)),
    "shuffle divisible": lambda L: L.F.channel_shuffle(L.c(X[None]), 2),
    "shuffle groups": lambda L: L.F.channel_shuffle(L.c(X[None]), 0),
    "shuffle rank": lambda L: L.F.channel_shuffle(L.c(X), 2),
    "shuffle int": lambda L: L.F.channel_shuffle(L.c(X[None]), 2.0),
    "Softmax2d rank": lambda L: L.nn.Softmax2d()(L.c(X)),
    "in-place leaf": lambda L: L.F.relu_(L.c(X, True)),
}


def _unquoted(error):
    return str(error).replace("'", "").replace('"', "")


@pytest.mark.parametrize("name", list(ERRORS))
def test_errors_are_torchs(name):
    with pytest.raises(Exception) as theirs:
        ERRORS[name](Library(False))
    with pytest.raises(theirs.type) as ours:
        ERRORS[name](Library(True))
    assert _unquoted(theirs.value) in _unquoted(ours.value)


# ------------------------------------------------------------------ JAX
def _everything(L, modules, leaves):
    """Every loss (each with one of the reductions, in turn), every module, pdist and the
    in-place spellings of `leaves` (a dict of tensors by name), as one vector."""
    outs = []
    for i, (call, inputs) in enumerate(LOSSES.values()):
        made = [L.made(spec, leaves) for spec in inputs]
        outs.append(call(L, *made, reduction=REDUCTIONS[i % len(REDUCTIONS)]))
    outs += [module(*(L.made(spec, leaves) for spec in MODULES[name][1]))
             for name, module in modules.items()]
    x = leaves["x"]
    outs += [L.F.pdist(x)] + [getattr(L.F, name)(x * 1.5, *args) for name, args in INPLACE.items()]
    return (js if L.ours else torch).cat([out.reshape(-1) for out in outs])


# One compiled JAX program of the whole family: a minute of XLA compiling on a cold cache,
# so it runs in one of CI's two runs (conftest.py), outside the twin.
@pytest.mark.outside_twin
def test_everything_on_jax_in_one_program():
    """The losses, modules and functionals above on JAX, compiled as one program (each new
    shape would compile every op again): values and the gradients of every leaf."""
    pairs = {name: _module_pair(name, "jax") for name in MODULES}
    ours_lib, theirs_lib = Library(True, "jax"), Library(False)
    t_leaves = {n: theirs_lib.c(v, True) for n, v in LEAVES.items()}
    ty = _everything(theirs_lib, {n: pair[1] for n, pair in pairs.items()}, t_leaves)
    w = RNG.standard_normal(ty.shape)
    tgrads = torch.autograd.grad((ty * torch.tensor(w)).sum(), list(t_leaves.values()))

    def program(*xs):
        out = _everything(ours_lib, {n: pair[0] for n, pair in pairs.items()},
                          dict(zip(LEAVES, xs, strict=True)))
        return out, js.grad((out * ours_lib.c(w)).sum(), list(xs))

    y, grads = js.compile(program)(*(ours_lib.c(v, True) for v in LEAVES.values()))
    close(y, ty.detach().numpy(), "jax", "values")
    for name, g, tg in zip(LEAVES, grads, tgrads, strict=True):
        close(g, tg.numpy(), "jax", f"gradient of {name}")
