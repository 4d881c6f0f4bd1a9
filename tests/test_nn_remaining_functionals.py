"""The functionals of ops/folding.py, ops/unpooling.py, ops/pool_compositions.py,
ops/instance_norm.py and ops/upsampling.py, `Tensor.unfold` and the MaxUnpool modules
against torch's: values and first and second gradients on NumPy (float64), the new
kernels on JAX (float32) as one compiled program; running statistics, indices, the view,
the deprecation warnings and the errors, in torch's words."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from helpers import arr
from ops_oracle import check_against_torch, close, tensor_of, uniform_values

import jaxstream as js
import jaxstream.nn.functional as F

torch = pytest.importorskip("torch")
TF = torch.nn.functional

pytestmark = pytest.mark.oracle
RNG = np.random.default_rng(1)
X3, X4, X5 = (RNG.standard_normal(s) for s in ((2, 3, 6), (2, 3, 4, 6), (1, 2, 4, 4, 4)))
COLUMNS = RNG.standard_normal((2, 12, 6))
WEIGHT, BIAS = uniform_values(2, 3, 3)
MEAN, VAR = RNG.standard_normal(3), RNG.uniform(0.5, 2.0, 3)


def _pooled(pool, x, *args):
    """torch's max pool of `x`: the values and the indices (a NumPy array)."""
    values, indices = pool(torch.tensor(x), *args, return_indices=True)
    return values.numpy(), indices.numpy()


POOLED1, WHERE1 = _pooled(TF.max_pool1d, X3, 2)
POOLED2, WHERE2 = _pooled(TF.max_pool2d, X4, 3, 1)  # windows overlap: indices repeat
POOLED3, WHERE3 = _pooled(TF.max_pool3d, X5, 2)


def _constant(f, values, like):
    """`values` as a constant of `f`'s library beside `like`."""
    return torch.tensor(values) if f is TF else js.tensor(values, backend=like.backend)


def _unpool(f, n, v, indices, kernel, sizes, stride=None):
    """Ours, or torch's unpooling kernel itself to `sizes` (torch's Python wrapper loads
    its compiler on first use: seconds of this file's time)."""
    if f is not TF:
        return getattr(f, f"max_unpool{n}d")(v, indices, kernel, stride, 0, sizes)
    if n == 1:
        return torch.ops.aten.max_unpool2d(v.unsqueeze(-1), indices.unsqueeze(-1),
                                           [*sizes, 1]).squeeze(-1)
    if n == 2:
        return torch.ops.aten.max_unpool2d(v, indices, list(sizes))
    return torch.ops.aten.max_unpool3d(v, indices, list(sizes), [kernel] * 3, [0] * 3)


# name: (call(functional module, *inputs), inputs): values and two orders of gradients
FUNCTIONALS = {
    "unfold": (lambda f, x: f.unfold(x, (2, 3), dilation=(2, 1), padding=1, stride=(1, 2)),
               [X4]),
    "unfold unbatched": (lambda f, x: f.unfold(x, 2), [X4[0]]),
    "fold": (lambda f, x: f.fold(x, (3, 4), 2), [COLUMNS]),
    "fold strided, padded, unbatched": (
        lambda f, x: f.fold(x, (5, 4), (2, 3), dilation=(1, 2), padding=(1, 2), stride=2),
        [COLUMNS[0, :, :6]]),
    "Tensor.unfold overlapping": (lambda f, x: x.unfold(-1, 3, 2), [X4]),
    "Tensor.unfold of dim 0": (lambda f, x: x.unfold(0, 1, 1), [X3]),
    "instance_norm": (lambda f, x, w, b: f.instance_norm(x, weight=w, bias=b, eps=1e-3),
                      [X4, WEIGHT, BIAS]),
    "instance_norm by running statistics": (
        lambda f, x, w: f.instance_norm(x, _constant(f, MEAN, x), _constant(f, VAR, x), w,
                                        use_input_stats=False), [X3, WEIGHT]),
    "max_unpool1d": (lambda f, v: _unpool(f, 1, v, _constant(f, WHERE1, v), 2, (7,)),
                     [POOLED1]),
    "max_unpool2d overlapping": (
        lambda f, v: _unpool(f, 2, v, _constant(f, WHERE2, v), 3, (4, 6), stride=1), [POOLED2]),
    "max_unpool3d": (lambda f, v: _unpool(f, 3, v, _constant(f, WHERE3, v), 2, (4, 4, 4)),
                     [POOLED3]),
    "upsample": (lambda f, x: f.upsample(x, scale_factor=2, mode="bilinear"), [X4]),
    "upsample_nearest": (lambda f, x: f.upsample_nearest(x, size=(5, 7)), [X4]),
    "upsample_bilinear": (lambda f, x: f.upsample_bilinear(x, scale_factor=(2, 1)), [X4]),
}


@pytest.mark.filterwarnings("ignore:`nn.functional.upsample")
@pytest.mark.parametrize("name", list(FUNCTIONALS))
def test_functionals_match_torch(name):
    call, values = FUNCTIONALS[name]
    check_against_torch(torch, lambda *xs: call(F, *xs), lambda *xs: call(TF, *xs), values,
                        "numpy")


# name: (call(functional module, input), input): values and gradients (compositions of the
# average pools, whose second gradients are tested with them: torch's load its compiler)
POOL_COMPOSITIONS = {
    "lp_pool1d": (lambda f, x: f.lp_pool1d(x, 2, 3, 2), X3),
    "lp_pool2d ceil_mode": (lambda f, x: f.lp_pool2d(x, 1.5, (2, 3), ceil_mode=True),
                            np.abs(X4)),
    "lp_pool3d": (lambda f, x: f.lp_pool3d(x, 3, 2), np.abs(X5)),
    "lp_pool1d inf": (lambda f, x: f.lp_pool1d(x, float("inf"), 2), X3),
    "lp_pool2d -inf": (lambda f, x: f.lp_pool2d(x, float("-inf"), 2), X4),
    "local_response_norm": (lambda f, x: f.local_response_norm(x, 3), X3),
    "local_response_norm 5-d": (lambda f, x: f.local_response_norm(x, 2, 0.1, 0.5, 2.0), X5),
}


@pytest.mark.parametrize("name", list(POOL_COMPOSITIONS))
def test_pool_compositions_match_torch(name):
    call, x = POOL_COMPOSITIONS[name]
    ours, theirs = tensor_of(x, "numpy"), torch.tensor(x, requires_grad=True)
    y, ty = call(F, ours), call(TF, theirs)
    close(y, ty.detach().numpy(), "numpy", "value")
    w = RNG.standard_normal(tuple(ty.shape))
    close(js.grad((y * js.tensor(w)).sum(), [ours])[0],
          torch.autograd.grad((ty * torch.tensor(w)).sum(), theirs)[0].numpy(), "numpy",
          "gradient")


def _pieces(f, cat, x, columns, pooled, w, b):
    """The new kernels (im2col, col2im, Tensor.unfold, the unpool) and instance_norm, their
    results flattened into one vector."""
    outs = [f.unfold(x, 2, padding=1, stride=(2, 1)), f.fold(columns, (3, 4), 2),
            x.unfold(3, 3, 2), _unpool(f, 2, pooled, _constant(f, WHERE2, pooled), 3, (4, 6), 1),
            f.instance_norm(x, weight=w, bias=b)]
    return cat([out.reshape(-1) for out in outs])


def test_the_new_kernels_on_jax_in_one_program():
    """On JAX to the second order, compiled as one program (the indices are a constant of
    it; each new shape would compile every op again)."""
    def ours(*xs):
        return _pieces(F, js.cat, *xs)

    check_against_torch(torch, ours, lambda *xs: _pieces(TF, torch.cat, *xs),
                        [X4, COLUMNS, POOLED2, WEIGHT, BIAS], "jax", compiled=True)


def test_max_unpool_modules_match_torch():
    """Torch's reprs, and its kernel's values to the sizes its wrapper computes: the pooled
    input's (or within a stride of them, given with or without the batch and channels)."""
    for n, pooled, where, args, size, sizes in [
            (1, POOLED1, WHERE1, (2,), (2, 3, 7), (7,)),
            (2, POOLED2, WHERE2, (3, 1), None, (4, 6)),
            (3, POOLED3, WHERE3, (2, 2, 0), None, (4, 4, 4))]:
        ours = getattr(js.nn, f"MaxUnpool{n}d")(*args)
        assert repr(ours) == repr(getattr(torch.nn, f"MaxUnpool{n}d")(*args))
        assert list(ours.state_dict()) == []
        v, tv = tensor_of(pooled, "numpy"), torch.tensor(pooled, requires_grad=True)
        y = ours(v, js.tensor(where), output_size=size)
        ty = _unpool(TF, n, tv, torch.tensor(where), args[0], sizes)
        close(y, ty.detach().numpy(), "numpy", f"{n}-d")
        w = RNG.standard_normal(tuple(ty.shape))
        close(js.grad((y * js.tensor(w)).sum(), [v])[0],
              torch.autograd.grad((ty * torch.tensor(w)).sum(), tv)[0].numpy(), "numpy",
              f"{n}-d")


def test_instance_norm_moves_given_running_statistics_as_torch():
    ours = [js.tensor(MEAN.copy()), js.tensor(VAR.copy())]
    theirs = [torch.tensor(MEAN.copy()), torch.tensor(VAR.copy())]
    y = F.instance_norm(js.tensor(X4), *ours, momentum=0.25)
    ty = TF.instance_norm(torch.tensor(X4), *theirs, momentum=0.25)
    close(y, ty.numpy(), "numpy", "output")
    for stat, tstat in zip(ours, theirs, strict=True):
        close(stat, tstat.numpy(), "numpy", "running statistic")


@pytest.mark.parametrize("name", ["max_pool1d", "max_pool2d", "max_pool3d",
                                  "adaptive_max_pool1d", "adaptive_max_pool2d",
                                  "adaptive_max_pool3d"])
def test_with_indices_spellings_return_values_and_indices(name):
    x = {"1": X3, "2": X4, "3": X5}[name[-2]]
    args = (3,) if name.startswith("adaptive") else (2, 1, 1)
    ours = getattr(F, f"{name}_with_indices")(js.tensor(x), *args)
    theirs = getattr(TF, f"{name}_with_indices")(torch.tensor(x), *args)
    assert isinstance(ours, tuple) and len(ours) == 2
    close(ours[0], theirs[0].numpy(), "numpy", "values")
    np.testing.assert_array_equal(arr(ours[1]), theirs[1].numpy())


@pytest.mark.parametrize("name", ["upsample", "upsample_nearest", "upsample_bilinear"])
def test_upsample_spellings_warn_as_torch(name):
    def caught(functional, x):
        with warnings.catch_warnings(record=True) as found:
            warnings.simplefilter("always")
            getattr(functional, name)(x, scale_factor=2)
        return [(str(w.message), w.category, w.filename) for w in found]
    ours, theirs = caught(F, js.tensor(X4)), caught(TF, torch.tensor(X4))
    assert ours == theirs and len(ours) == 1 and ours[0][2] == __file__


def test_tensor_unfold_is_a_view_as_torch():
    x, tx = js.tensor(np.arange(7.0)), torch.arange(7.0, dtype=torch.float64)
    for t, lib in ((x, js), (tx, torch)):
        with lib.no_grad():
            t.unfold(0, 2, 3).mul_(10)
    np.testing.assert_array_equal(arr(x), tx.numpy())
    with pytest.raises(RuntimeError, match="single memory location"):
        x.unfold(0, 3, 2).mul_(2)  # torch writes the shared elements once per window
    for size in (0, 1):
        assert js.tensor(3.0).unfold(0, size, 1).shape == tuple(torch.tensor(3.0).unfold(
            0, size, 1).shape)
        assert x.unfold(0, size, 2).shape == tuple(tx.unfold(0, size, 2).shape)


def _raises_like_torch(ours, theirs, same_words=True):
    """Both raise the same type of error; ours in torch's words, where `same_words`."""
    with pytest.raises(Exception) as expected:
        theirs()
    with pytest.raises(expected.type) as got:
        ours()
    if same_words:
        told = str(expected.value).replace("torch.Size", "jaxstream.Size")
        assert told in str(got.value)


# (call(functional module, library), words): the calls that raise in torch
ERRORS = [
    (lambda f, m: f.unfold(m.ones(2, 3, 4, 5, 6), 2), True),
    (lambda f, m: f.unfold(m.ones(2, 3, 5, 6), 7), True),
    (lambda f, m: f.unfold(m.ones(2, 3, 5, 6), 0), True),
    (lambda f, m: f.unfold(m.ones(2, 3, 5, 6), 2, stride=0), True),
    (lambda f, m: f.unfold(m.ones(2, 3, 5, 6), 2, padding=-1), True),
    (lambda f, m: f.unfold(m.ones(2, 3, 5, 6), 2, dilation=0), True),
    (lambda f, m: f.unfold(m.ones(2, 3, 5, 6), (2, 2, 2)), True),
    (lambda f, m: f.unfold(m.ones(2, 3, 5, 6).long(), 2), False),
    (lambda f, m: f.fold(m.ones(2, 11, 20), (5, 6), 2), True),
    (lambda f, m: f.fold(m.ones(2, 12, 20), (5, 7), 2), True),
    (lambda f, m: f.fold(m.ones(2, 12, 20), (1, 1), 2), True),
    (lambda f, m: f.fold(m.ones(2, 12, 4, 5), (5, 6), 2), True),
    (lambda f, m: f.fold(m.ones(2, 12, 20), (5, 6, 1), 2), True),
    (lambda f, m: m.ones(4, 7).unfold(0, 5, 1), True),
    (lambda f, m: m.ones(4, 7).unfold(0, 2, 0), True),
    (lambda f, m: m.ones(4, 7).unfold(0, -1, 1), True),
    (lambda f, m: m.ones(4, 7).unfold(2, 2, 1), False),
    (lambda f, m: _unpool(f, 2, m.ones(2, 3), m.ones(2, 3).long(), 2, (4, 6)), True),
    (lambda f, m: _unpool(f, 2, m.ones(1, 2, 3), m.ones(1, 2, 3), 2, (4, 6)), False),
    (lambda f, m: _unpool(f, 2, m.ones(1, 2, 3), m.ones(1, 2, 2).long(), 2, (4, 6)), True),
    (lambda f, m: _unpool(f, 2, m.ones(1, 2, 3), m.ones(1, 2, 3).long() * 24, 2, (4, 6)), True),
    (lambda f, m: _unpool(f, 3, m.ones(1, 2, 2, 2), -m.ones(1, 2, 2, 2).long(), 2, (4, 4, 4)),
     True),
    (lambda f, m: f.max_unpool2d(m.ones(1, 2, 3), m.ones(1, 2, 3).long(), 2,
                                 output_size=(7, 6)), True),
    (lambda f, m: f.max_unpool2d(m.ones(1, 2, 3), m.ones(1, 2, 3).long(), 2,
                                 output_size=(5,)), True),
    (lambda f, m: f.local_response_norm(m.ones(2, 3), 2), True),
    (lambda f, m: f.instance_norm(m.ones(2, 3, 1, 1)), True),
    (lambda f, m: f.instance_norm(m.ones(2, 3, 4), running_mean=m.zeros(3)), True),
    (lambda f, m: f.instance_norm(m.ones(2, 3, 4), use_input_stats=False), True),
    (lambda f, m: f.instance_norm(m.ones(2, 3, 4), m.zeros(4), m.ones(4)), True),
    (lambda f, m: f.instance_norm(m.ones(2, 3, 4), weight=m.ones(4)), True),
]


@pytest.mark.parametrize("index", range(len(ERRORS)))
def test_errors_as_torch(index):
    call, same_words = ERRORS[index]
    _raises_like_torch(lambda: call(F, js), lambda: call(TF, torch), same_words)
