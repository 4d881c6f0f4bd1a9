"""js.nn.utils.clip_grad_norm_ and clip_grad_value_, diff-tested against torch.nn.utils."""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import arr
from hypothesis import given, settings
from hypothesis import strategies as st

import jaxstream as js
import jaxstream.nn.utils

SHAPES = [(3, 4), (5,), (2,)]
PLACES = [("numpy", np.float64), ("numpy", np.float32), ("jax", np.float32)]


def _twins(torch, backend, dtype, scale=1.0, seed=0):
    """Parameters with gradients (the last one without), ours and torch's."""
    rng = np.random.default_rng(seed)
    grads = [(scale * rng.standard_normal(shape)).astype(dtype) for shape in SHAPES[:-1]]
    mine = [js.tensor(np.zeros(s, dtype), requires_grad=True, backend=backend) for s in SHAPES]
    theirs = [torch.zeros(s, dtype=torch.from_numpy(np.zeros(0, dtype)).dtype,
                          requires_grad=True) for s in SHAPES]
    for p, tp, g in zip(mine, theirs, grads, strict=False):
        p.grad, tp.grad = js.tensor(g, backend=backend), torch.tensor(g)
    return mine, theirs


def _assert_grads_match(mine, theirs, dtype):
    tol = 1e-12 if dtype == np.float64 else 1e-6
    for p, tp in zip(mine, theirs, strict=True):
        if tp.grad is None:
            assert p.grad is None
            continue
        assert p.grad.dtype == dtype
        np.testing.assert_allclose(arr(p.grad), tp.grad.numpy(), rtol=tol, atol=tol)


@pytest.mark.oracle
@settings(max_examples=8, deadline=None)
@given(
    place=st.sampled_from(PLACES),
    norm_type=st.sampled_from([1.0, 2.0, 3.0, math.inf, "inf"]),
    max_norm=st.floats(0.01, 20.0),
    scale=st.sampled_from([0.1, 1.0, 10.0]),
)
def test_clip_grad_norm_matches_torch(torch, place, norm_type, max_norm, scale):
    backend, dtype = place
    mine, theirs = _twins(torch, backend, dtype, scale)
    total = js.nn.utils.clip_grad_norm_(mine, max_norm, norm_type)
    torch_total = torch.nn.utils.clip_grad_norm_(theirs, max_norm, norm_type)
    assert isinstance(total, js.Tensor) and total.shape == () and total.backend == backend
    assert total.dtype == dtype and not total.requires_grad
    np.testing.assert_allclose(arr(total), torch_total.numpy(), rtol=1e-6)
    _assert_grads_match(mine, theirs, dtype)


@pytest.mark.oracle
@pytest.mark.parametrize(("backend", "dtype"), PLACES)
def test_clip_grad_value_matches_torch_in_place(torch, backend, dtype):
    mine, theirs = _twins(torch, backend, dtype, scale=2.0)
    held, version = mine[0].grad, mine[0].grad._version
    assert js.nn.utils.clip_grad_value_(mine, 1.5) is None
    torch.nn.utils.clip_grad_value_(theirs, 1.5)
    _assert_grads_match(mine, theirs, dtype)
    assert mine[0].grad is held and held._version > version
    assert np.abs(arr(held)).max() == pytest.approx(1.5)


@pytest.mark.oracle
@pytest.mark.filterwarnings("ignore:invalid value encountered in multiply:RuntimeWarning")
def test_a_non_finite_norm_raises_when_asked_else_scales_to_nan_as_torch(torch):
    mine, theirs = _twins(torch, "numpy", np.float64)
    mine[1].grad = js.tensor(np.array([1.0, np.inf, 0.0, 0.0, 0.0]))
    theirs[1].grad = torch.tensor([1.0, np.inf, 0.0, 0.0, 0.0], dtype=torch.float64)
    with pytest.raises(RuntimeError, match="total norm of order 2.0 .* is non-finite"):
        js.nn.utils.clip_grad_norm_(mine, 1.0, error_if_nonfinite=True)
    np.testing.assert_array_equal(arr(mine[1].grad)[:2], [1.0, np.inf])  # left as it was
    total = js.nn.utils.clip_grad_norm_(mine, 1.0)
    torch_total = torch.nn.utils.clip_grad_norm_(theirs, 1.0)
    assert arr(total) == torch_total.item() == np.inf
    for p, tp in zip(mine[:2], theirs[:2], strict=True):
        np.testing.assert_array_equal(arr(p.grad), tp.grad.numpy())


@pytest.mark.oracle
def test_no_gradients_give_a_zero_norm_and_one_tensor_is_taken_alone(torch):
    bare = js.tensor(np.ones(3), requires_grad=True)
    total = js.nn.utils.clip_grad_norm_([bare], 1.0)
    assert arr(total) == torch.nn.utils.clip_grad_norm_([torch.ones(3)], 1.0).item() == 0.0
    bare.grad = js.tensor(np.full(3, 4.0))
    total = jaxstream.nn.utils.clip_grad_norm_(bare, 2.0, foreach=True)
    np.testing.assert_allclose(arr(total), math.sqrt(48.0), rtol=1e-12)
    np.testing.assert_allclose(arr(bare.grad), 4.0 * 2.0 / (math.sqrt(48.0) + 1e-6), rtol=1e-12)


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda ps: js.nn.utils.clip_grad_norm_([ps[0], np.ones(2)], 1.0), TypeError,
         "clip_grad_norm_: .* parameter 1 is a ndarray"),
        (lambda ps: js.nn.utils.clip_grad_value_([np.ones(2)], 1.0), TypeError,
         "clip_grad_value_: .* parameter 0 is a ndarray"),
        (lambda ps: js.nn.utils.clip_grad_norm_(ps, 1.0, norm_type=0.5), ValueError,
         "norm_type must be >= 1 or inf, got 0.5"),
    ],
)
def test_bad_arguments_raise(call, error, match):
    params = [js.tensor(np.ones(2), requires_grad=True)]
    params[0].grad = js.tensor(np.ones(2))
    with pytest.raises(error, match=match):
        call(params)
    np.testing.assert_array_equal(arr(params[0].grad), 1.0)
