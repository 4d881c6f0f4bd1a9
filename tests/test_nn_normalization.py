"""layer_norm, batch_norm and normalize against torch (values, first and second gradients,
node names, running statistics, errors) on both backends, and the LayerNorm, BatchNorm1d and
BatchNorm2d modules against torch's in training and eval, running statistics included."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
from helpers import arr, error_text
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from ops_oracle import check_against_torch, close, tensor_of, uniform_values

import jaxstream as js
import jaxstream.nn.functional as F

pytestmark = pytest.mark.oracle


def _dtype(backend):
    return np.float64 if backend == "numpy" else np.float32


def _constant(values, backend):
    return tensor_of(values, backend, requires_grad=False)


# ------------------------------------------------------------------ layer_norm
# On NumPy here; on JAX in `test_the_normalizations_on_jax_in_one_program`.
@pytest.mark.parametrize("affine", ["both", "weight", "none"])
def test_layer_norm_matches_torch(torch, affine):
    params = {"both": (3, 4), "weight": (3,), "none": ()}[affine]
    shapes = [(2, 3, 4)] + [(3, 4)] * len(params)

    def call(functional, x, w=None, b=None):
        return functional.layer_norm(x, (3, 4), w, b) * x

    check_against_torch(torch, lambda *a: call(F, *a),
                        lambda *a: call(torch.nn.functional, *a),
                        uniform_values(0, *shapes), "numpy")


@settings(max_examples=6, deadline=None)
@given(shape=hnp.array_shapes(min_dims=1, max_dims=3, min_side=2, max_side=4), data=st.data())
def test_layer_norm_over_any_trailing_axes_matches_torch(torch, shape, data):
    count = data.draw(st.integers(1, len(shape)))
    normalized, eps = shape[len(shape) - count:], data.draw(st.sampled_from([1e-5, 0.5]))
    check_against_torch(
        torch, lambda x, w: F.layer_norm(x, normalized, w, None, eps),
        lambda x, w: torch.nn.functional.layer_norm(x, normalized, w, None, eps),
        uniform_values(1, shape, normalized), "numpy")


def test_layer_norm_is_one_node_as_torchs_and_the_module_calls_it(torch):
    x = tensor_of(uniform_values(2, (3, 4))[0], "numpy")
    assert F.layer_norm(x, 4).grad_fn.name() == "NativeLayerNormBackward0"
    norm = js.nn.LayerNorm(4, dtype="float64")
    y = norm(x)
    assert y.grad_fn.name() == "NativeLayerNormBackward0"
    assert {fn.name() for fn, _ in y.grad_fn.next_functions} == {"AccumulateGrad"}
    close(y, torch.nn.functional.layer_norm(torch.tensor(arr(x)), (4,)).numpy(), "numpy", "value")


@pytest.mark.parametrize("call, error, phrase", [
    (lambda x: F.layer_norm(x, (3,)), RuntimeError,
     r"Given normalized_shape=\[3\], expected input with shape \[\*, 3\], but got input of "
     r"size \[2, 4\]"),
    (lambda x: F.layer_norm(x, 4, js.ones(3, dtype="float64")), RuntimeError,
     r"Expected weight to be of same shape as normalized_shape, but got weight of shape \[3\]"),
    (lambda x: F.layer_norm(x, 4, None, js.ones(4, dtype="float32")), RuntimeError,
     "mixed dtype: all inputs must share same datatype .* float32 bias"),
    (lambda x: F.layer_norm(js.ones((2, 4), dtype="int64"), 4), NotImplementedError,
     "the input must be floating point, got int64"),
], ids=["input shape", "weight shape", "dtype", "integer input"])
def test_layer_norm_errors_say_what_is_wrong(call, error, phrase):
    with pytest.raises(error, match=phrase):
        call(tensor_of(np.ones((2, 4)), "numpy"))


# ------------------------------------------------------------------ batch_norm
BATCH_SHAPES = [(5, 3), (4, 3, 2), (3, 3, 2, 2)]
MEAN, VAR = uniform_values(3, (3,))[0], uniform_values(4, (3,), low=0.5, high=2.0)[0]


@pytest.mark.parametrize("shape", BATCH_SHAPES, ids=str)
@pytest.mark.parametrize("training", [True, False])
def test_batch_norm_matches_torch(torch, shape, training):
    check_against_torch(
        torch, lambda x, w, b: F.batch_norm(x, _constant(MEAN, "numpy"), _constant(VAR, "numpy"),
                                            w, b, training, 0.1, 1e-3) * x,
        lambda x, w, b: torch.nn.functional.batch_norm(
            x, torch.tensor(MEAN), torch.tensor(VAR), w, b, training, 0.1, 1e-3) * x,
        uniform_values(5, shape, (3,), (3,)), "numpy")


def test_batch_norm_without_running_stats_or_affine_matches_torch(torch):
    check_against_torch(torch, lambda x: F.batch_norm(x, None, None, training=True),
                        lambda x: torch.nn.functional.batch_norm(x, None, None, training=True),
                        uniform_values(6, (4, 3, 2)), "numpy")


@pytest.mark.parametrize("momentum", [0.1, 0.7])
def test_training_moves_the_running_stats_in_place_outside_the_graph(torch, momentum):
    backend = "numpy"
    x = tensor_of(uniform_values(7, (4, 3, 2))[0], backend)
    mean, var = _constant(np.zeros(3), backend), _constant(np.ones(3), backend)
    t_mean, t_var = torch.zeros(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64)
    for _ in range(2):
        y = F.batch_norm(x, mean, var, training=True, momentum=momentum)
        torch.nn.functional.batch_norm(torch.tensor(arr(x), dtype=torch.float64), t_mean, t_var,
                                       training=True,
                                       momentum=momentum)
    close(mean, t_mean.numpy(), backend, "running mean")
    close(var, t_var.numpy(), backend, "running var (unbiased)")
    assert mean._version == var._version == 2
    assert not mean.requires_grad and mean.grad_fn is None and var.grad_fn is None
    assert y.grad_fn.name() == "NativeBatchNormBackward0"
    assert len(js.grad(y.sum(), [x])) == 1


@pytest.mark.parametrize("call, error, phrase", [
    (lambda x: F.batch_norm(x, None, None), RuntimeError,
     "running_mean must be defined in evaluation mode"),
    (lambda x: F.batch_norm(x[:1], None, None, training=True), ValueError,
     r"Expected more than 1 value per channel when training, got input size \[1, 3\]"),
    (lambda x: F.batch_norm(x, js.zeros(4, dtype="float64"), None, training=True),
     RuntimeError, "running_mean should contain 3 elements not 4"),
    (lambda x: F.batch_norm(x, None, None, js.ones(2, dtype="float64"), training=True),
     RuntimeError, "weight should contain 3 elements not 2"),
    (lambda x: F.batch_norm(x[0], None, None, training=True), RuntimeError,
     r"expected an input of shape \(N, C, ...\), got one of shape \(3,\)"),
], ids=["eval without stats", "one per channel", "stat size", "weight size", "1-D"])
def test_batch_norm_errors_say_what_is_wrong(call, error, phrase):
    with pytest.raises(error, match=phrase):
        call(tensor_of(uniform_values(8, (2, 3))[0], "numpy"))


# ------------------------------------------------------------------ BatchNorm modules
def _torchs_batch_norm(torch, cls, **kwargs):
    """torch's module built with `kwargs`. torch 2.11 takes no `bias` (the pinned 2.13 does,
    from pytorch/pytorch#176573): there `bias=False` is built as 2.13 builds it, by
    registering no bias parameter, which its functional batch_norm takes."""
    module_class = getattr(torch.nn, cls)
    if "bias" in inspect.signature(module_class).parameters:
        return module_class(3, **kwargs)
    bias = kwargs.pop("bias", True)
    module = module_class(3, **kwargs)
    if not bias:
        module.register_parameter("bias", None)
    return module


def _torchs_repr(module) -> str:
    """A torch BatchNorm's repr, with the `bias=` field that torch 2.11 lacks put where 2.13
    puts it: after `affine=`, saying whether the module has a bias."""
    text = repr(module)
    if ", bias=" in text:
        return text
    return text.replace(", track_running_stats=",
                        f", bias={module.bias is not None}, track_running_stats=")


def _batch_norm_pair(torch, cls, backend, **kwargs):
    ours = getattr(js.nn, cls)(3, dtype=_dtype(backend), backend=backend, **kwargs)
    theirs = _torchs_batch_norm(torch, cls, **kwargs).double()
    with torch.no_grad():
        if theirs.weight is not None:
            theirs.weight.uniform_(0.5, 1.5)
        if theirs.bias is not None:
            theirs.bias.uniform_(-0.5, 0.5)
    ours.load_state_dict({k: js.tensor(v.numpy().astype(_dtype(backend)) if v.is_floating_point()
                                       else v.numpy()) for k, v in theirs.state_dict().items()})
    return ours, theirs


def _step(torch, ours, theirs, shape, backend, seed):
    x = uniform_values(seed, shape)[0]
    y, ty = ours(tensor_of(x, backend)), theirs(torch.tensor(x, requires_grad=True))
    close(y, ty.detach().numpy(), backend, "output")
    if y.requires_grad:
        (y * y).sum().backward()
        (ty * ty).sum().backward()
        for (name, p), q in zip(ours.named_parameters(), theirs.parameters(), strict=True):
            close(p.grad, q.grad.numpy(), backend, f"gradient of {name}")
    for name, value in theirs.state_dict().items():
        close(ours.state_dict()[name], value.numpy(), backend, name)


@pytest.mark.parametrize("backend, cls, shape, momentum", [
    ("numpy", "BatchNorm1d", (5, 3), 0.1), ("numpy", "BatchNorm1d", (4, 3, 2), None),
    ("numpy", "BatchNorm2d", (2, 3, 2, 2), 0.1), ("numpy", "BatchNorm2d", (2, 3, 2, 2), None),
    ("jax", "BatchNorm1d", (4, 3, 2), None),
])
def test_batch_norm_modules_match_torch_in_train_and_eval(torch, cls, shape, backend, momentum):
    ours, theirs = _batch_norm_pair(torch, cls, backend, momentum=momentum)
    for seed in range(3):
        _step(torch, ours, theirs, shape, backend, seed)
    assert int(ours.num_batches_tracked.item()) == 3
    ours.eval(), theirs.eval()
    _step(torch, ours, theirs, shape, backend, 9)
    assert int(ours.num_batches_tracked.item()) == 3


@pytest.mark.parametrize("affine", [True, False])
def test_batch_norm_without_tracking_always_uses_the_batch(torch, affine):
    ours, theirs = _batch_norm_pair(torch, "BatchNorm1d", "numpy", affine=affine,
                                    track_running_stats=False)
    assert ours.running_mean is ours.running_var is ours.num_batches_tracked is None
    assert list(ours.state_dict()) == list(theirs.state_dict())
    ours.eval(), theirs.eval()
    _step(torch, ours, theirs, (4, 3), "numpy", 10)


def test_batch_norm_buffers_are_torchs(torch):
    ours, theirs = js.nn.BatchNorm2d(3), torch.nn.BatchNorm2d(3)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert [name for name, _ in ours.named_buffers()] == [
        "running_mean", "running_var", "num_batches_tracked"]
    assert [name for name, _ in ours.named_parameters()] == ["weight", "bias"]
    assert repr(ours) == _torchs_repr(theirs)
    ours.to("jax")
    assert {b.backend for b in ours.buffers()} == {"jax"}


@pytest.mark.parametrize("kwargs", [{}, {"affine": False}, {"bias": False},
                                    {"affine": False, "bias": False},
                                    {"eps": 0.5, "momentum": None, "track_running_stats": False}])
def test_batch_norm_reprs_are_torchs(torch, kwargs):
    ours = js.nn.BatchNorm1d(3, **kwargs)
    theirs = _torchs_batch_norm(torch, "BatchNorm1d", **kwargs)
    assert repr(ours) == _torchs_repr(theirs)
    assert [name for name, _ in ours.named_parameters()] == [
        name for name, _ in theirs.named_parameters()]


def test_torchs_repr_adds_only_the_missing_bias_field(torch):
    """The field is added where torch's repr lacks it (2.11's form) and nowhere else, so the
    comparison above still fails on any other field."""
    old_form = "BatchNorm2d(3, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True)"
    module = torch.nn.BatchNorm2d(3)
    module.extra_repr = lambda: old_form.removeprefix("BatchNorm2d(").removesuffix(")")
    assert _torchs_repr(module) == repr(js.nn.BatchNorm2d(3))
    module.register_parameter("bias", None)
    assert _torchs_repr(module).count("bias=False") == 1
    assert _torchs_repr(torch.nn.BatchNorm2d(3, eps=0.5)) != repr(js.nn.BatchNorm2d(3))


def test_batch_norm_without_bias_matches_torch(torch):
    ours, theirs = _batch_norm_pair(torch, "BatchNorm1d", "numpy", bias=False)
    assert ours.bias is None and list(ours.state_dict()) == list(theirs.state_dict())
    for seed in range(2):
        _step(torch, ours, theirs, (4, 3), "numpy", seed)
    ours.eval(), theirs.eval()
    _step(torch, ours, theirs, (4, 3), "numpy", 5)


@pytest.mark.parametrize("cls, rank, expected", [("BatchNorm1d", 4, "2D or 3D"),
                                                 ("BatchNorm2d", 3, "4D")])
def test_batch_norm_modules_refuse_other_ranks(cls, rank, expected):
    with pytest.raises(ValueError, match=f"expected {expected} input \\(got {rank}D input"):
        getattr(js.nn, cls)(3)(js.ones(*(3,) * rank))


# ------------------------------------------------------------------ normalize
# (The second derivative of torch's 1- and inf-norms makes torch import its compiler, which
# takes seconds: p=3 instead.)
@pytest.mark.parametrize("p, dim", [(2.0, 1), (3.0, 0), (2.0, -1)])
def test_normalize_matches_torch(torch, p, dim):
    check_against_torch(torch, lambda x: F.normalize(x, p, dim),
                        lambda x: torch.nn.functional.normalize(x, p, dim),
                        uniform_values(11, (3, 4)), "numpy")


def test_the_normalizations_on_jax_in_one_program(torch):
    """layer_norm, batch_norm in training and eval, and normalize on JAX, to the second
    order, compiled as one program (each new shape would compile every op again)."""

    def pieces(functional, constant, x, w, b, layer_weight, layer_bias):
        return [t.reshape(-1) for t in (
            functional.layer_norm(x, (3, 2), layer_weight, layer_bias) * x,
            functional.batch_norm(x, None, None, w, b, True) * x,
            functional.batch_norm(x, constant(MEAN), constant(VAR), w, b, False) * x,
            functional.normalize(x, 2.0, 1),
        )]

    check_against_torch(torch, lambda *a: js.cat(pieces(F, lambda v: _constant(v, "jax"), *a)),
                        lambda *a: torch.cat(pieces(torch.nn.functional, torch.tensor, *a)),
                        uniform_values(14, (4, 3, 2), (3,), (3,), (3, 2), (3, 2)), "jax",
                        compiled=True)


def test_normalize_keeps_zero_rows_finite_as_torch(torch):
    """At a zero row the norm is clamped to eps: the values and first gradients are torch's
    (whose second gradient there is NaN; ours is finite)."""
    values = np.vstack([np.zeros(3), uniform_values(12, (3,))[0]])
    x, tx = tensor_of(values, "numpy"), torch.tensor(values, requires_grad=True)
    y, ty = F.normalize(x, eps=1e-3), torch.nn.functional.normalize(tx, eps=1e-3)
    close(y, ty.detach().numpy(), "numpy", "value")
    weights = uniform_values(13, (2, 3))[0]
    (g,) = js.grad((y * tensor_of(weights, "numpy", False)).sum(), [x], create_graph=True)
    (tg,) = torch.autograd.grad((ty * torch.tensor(weights)).sum(), [tx])
    close(g, tg.numpy(), "numpy", "gradient")
    assert np.isfinite(arr(js.grad((g * g).sum(), [x])[0])).all()


def test_normalize_refuses_out_and_small_p():
    x = js.ones(2, 3)
    with pytest.raises(NotImplementedError, match="normalize: out= is not supported") as info:
        F.normalize(x, out=js.zeros(2, 3))
    assert "out.copy_(F.normalize(...))" in error_text(info)
    with pytest.raises(NotImplementedError, match="p=0.5 is not supported; p must be >= 1"):
        F.normalize(x, p=0.5)
