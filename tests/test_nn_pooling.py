"""max_pool1d/2d and avg_pool1d/2d (`js.nn.functional`) and the MaxPool2d/AvgPool2d layers
against torch: values, first and second gradients on both backends (padding, dilation,
ceil_mode, count_include_pad, divisor_override), the indices and the gradient of ties and
NaNs, node names, and PyTorch's errors."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import arr, error_text
from hypothesis import given, settings
from hypothesis import strategies as st
from ops_oracle import check_against_torch, pair, uniform_values

import jaxstream as js
import jaxstream.nn.functional as F

pytestmark = pytest.mark.oracle

# name -> (function, input shape, keyword arguments)
CASES = {
    "max": ("max_pool2d", (2, 3, 7, 6), {"kernel_size": 3, "stride": 2, "padding": 1}),
    "max_dilated_ceil": ("max_pool2d", (2, 3, 7, 6),
                         {"kernel_size": (3, 2), "stride": 2, "padding": 1, "dilation": (1, 2),
                          "ceil_mode": True}),
    "max_unbatched": ("max_pool2d", (3, 5, 5), {"kernel_size": 2, "ceil_mode": True}),
    "max_1d": ("max_pool1d", (2, 3, 9), {"kernel_size": 3, "stride": 2, "padding": 1,
                                         "ceil_mode": True}),
    "avg": ("avg_pool2d", (2, 3, 7, 6), {"kernel_size": 3, "stride": 2, "padding": 1}),
    "avg_ceil_without_pad": ("avg_pool2d", (2, 3, 7, 6),
                             {"kernel_size": 3, "stride": 2, "padding": 1, "ceil_mode": True,
                              "count_include_pad": False}),
    "avg_uneven_ceil": ("avg_pool2d", (2, 3, 7, 6), {"kernel_size": (3, 2), "stride": (2, 3),
                                                     "padding": 1, "ceil_mode": True}),
    "avg_divisor": ("avg_pool2d", (3, 7, 6), {"kernel_size": 2, "divisor_override": 3}),
    "avg_1d": ("avg_pool1d", (2, 3, 9), {"kernel_size": 4, "stride": 3, "padding": 2,
                                         "ceil_mode": True, "count_include_pad": False}),
}


@pytest.mark.parametrize("name", CASES)
def test_pooling_matches_torch_to_the_second_order(torch, name):
    fn, shape, kwargs = CASES[name]
    check_against_torch(torch, lambda x: getattr(F, fn)(x, **kwargs) ** 2,
                        lambda x: getattr(torch.nn.functional, fn)(x, **kwargs) ** 2,
                        uniform_values(1, shape), "numpy")


def test_pooling_on_jax_matches_torch_to_the_second_order(torch):
    """Max and average pooling in one case on JAX (each case compiles its kernels)."""

    def pools(m, x):
        return m.max_pool2d(x, 3, 2, 1, ceil_mode=True) * m.avg_pool2d(
            x, 3, 2, 1, ceil_mode=True, count_include_pad=False)

    check_against_torch(torch, lambda x: pools(F, x), lambda x: pools(torch.nn.functional, x),
                        uniform_values(1, (2, 2, 5, 4)), "jax")


@settings(max_examples=8, deadline=None)
@given(data=st.data())
def test_ties_send_the_gradient_to_the_first_maximum_as_torch(torch, data):
    """Integer values tie often, and some are NaN: the indices and the gradient go where
    torch's go (the first maximum of a window, its last NaN where it has one)."""
    kernel, stride = data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3))
    padding = data.draw(st.integers(0, kernel // 2))
    dilation, ceil_mode = data.draw(st.integers(1, 2)), data.draw(st.booleans())
    shape = (2, 2) + tuple(data.draw(st.integers(dilation * (kernel - 1) + 1, 6))
                           for _ in range(2))
    rng = np.random.default_rng(data.draw(st.integers(0, 99)))
    values = np.where(rng.random(shape) < 0.1, np.nan, rng.integers(-2, 3, shape))
    x, tx = pair(torch, values, "numpy")
    args = (kernel, stride, padding, dilation, ceil_mode, True)
    (y, indices), (ty, tindices) = F.max_pool2d(x, *args), torch.nn.functional.max_pool2d(tx,
                                                                                          *args)
    np.testing.assert_array_equal(arr(indices), tindices.numpy())
    assert str(indices.dtype) == "int64"
    weights = np.arange(np.prod(ty.shape)).reshape(ty.shape)
    (y * js.tensor(weights.astype(float))).sum().backward()
    (ty * torch.tensor(weights.astype(float))).sum().backward()
    np.testing.assert_array_equal(arr(x.grad), tx.grad.numpy())


def test_node_names_and_layers_are_torchs(torch):
    x, tx = pair(torch, uniform_values(2, (2, 3, 6, 6))[0], "numpy")
    calls = [lambda m, x: m.max_pool2d(x, 2), lambda m, x: m.avg_pool2d(x, 2),
             lambda m, x: m.max_pool1d(x[0], 2), lambda m, x: m.avg_pool1d(x[0], 3)]
    for call in calls:
        assert call(F, x).grad_fn.name() == call(torch.nn.functional, tx).grad_fn.name()
    layers = [(js.nn.MaxPool2d(3, 2, 1, ceil_mode=True), torch.nn.MaxPool2d(3, 2, 1,
                                                                             ceil_mode=True)),
              (js.nn.AvgPool2d(3, padding=1, count_include_pad=False),
               torch.nn.AvgPool2d(3, padding=1, count_include_pad=False))]
    for ours, theirs in layers:
        assert repr(ours) == repr(theirs)
        np.testing.assert_allclose(arr(ours(x)), theirs(tx).detach().numpy(), rtol=1e-12)
    values, indices = js.nn.MaxPool2d(2, return_indices=True)(x)
    np.testing.assert_array_equal(arr(indices), torch.nn.MaxPool2d(2, return_indices=True)(
        tx)[1].numpy())


@pytest.mark.parametrize("call, error, phrases", [
    (lambda x: F.max_pool2d(x, 2, padding=2), RuntimeError,
     ["pad should be at most half of effective kernel size, but got pad=2, kernel_size=2 and "
      "dilation=1"]),
    (lambda x: F.avg_pool2d(x, 3, padding=2), RuntimeError,
     ["pad should be at most half of effective kernel size"]),
    (lambda x: F.max_pool2d(x, (2, 2, 2)), RuntimeError,
     ["max_pool2d: kernel_size must either be a single int, or a tuple of two ints"]),
    (lambda x: F.max_pool2d(x, 2, stride=(1, 2, 3)), RuntimeError,
     ["max_pool2d: stride must either be omitted, a single int, or a tuple of two ints"]),
    (lambda x: F.max_pool2d(x, 6), RuntimeError,
     ["Given input size: (3x5x5). Calculated output size: (3x0x0). Output size is too small"]),
    (lambda x: F.max_pool2d(x[0, 0], 2), RuntimeError,
     ["non-empty 3D or 4D (batch mode) tensor expected for input"]),
    (lambda x: F.max_pool2d(x, 0, stride=1), RuntimeError,
     ["kernel size should be greater than zero, but got kH: 0 kW: 0"]),
    (lambda x: F.max_pool2d(x, 2, stride=0), RuntimeError,
     ["stride should be greater than zero"]),
    (lambda x: F.max_pool2d(x, 2, dilation=0), RuntimeError,
     ["dilation should be greater than zero, but got dilationH: 0 dilationW: 0"]),
    (lambda x: F.max_pool2d(x, 2, padding=-1), RuntimeError,
     ["pad must be non-negative, but got pad: -1"]),
    (lambda x: F.avg_pool2d(x, 2, divisor_override=0), RuntimeError,
     ["divisor must be not zero"]),
    (lambda x: F.avg_pool2d(x.long(), 2), NotImplementedError,
     ["avg_pool2d of int64 input is not supported", "x.float()"]),
    (lambda x: F.max_pool2d(x > 0, 2), NotImplementedError,
     ["\"max_pool2d\" not implemented for 'Bool'"]),
    (lambda x: F.max_pool1d(x, 2), RuntimeError,
     ["max_pool1d: Expected 2D or 3D (batch mode) tensor with optional 0 dim batch size for "
      "input, but got:[1, 3, 5, 5]"]),
    (lambda x: F.avg_pool1d(x, 2), RuntimeError,
     ["Expected 2 to 3 dimensions, but got 4-dimensional tensor for argument #1 'self'"]),
], ids=["max_pad", "avg_pad", "kernel_tuple", "stride_tuple", "too_small", "rank",
        "kernel_zero", "stride_zero", "dilation_zero", "negative_pad", "divisor_zero",
        "integer_average", "bool_max", "max_1d_rank", "avg_1d_rank"])
def test_bad_arguments_raise_torchs_errors(call, error, phrases):
    with pytest.raises(error) as excinfo:
        call(js.ones(1, 3, 5, 5))
    for phrase in phrases:
        assert phrase in error_text(excinfo)
