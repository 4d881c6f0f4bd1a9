"""pad (constant, reflect, replicate, circular) and interpolate (nearest, nearest-exact,
linear, bilinear, trilinear) of `js.nn.functional` against torch: values, first and second
gradients on both backends, negative pads, where each output reads for any sizes and scale
factors, node names, and PyTorch's errors."""

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
    "constant_crop": ("pad", (2, 3, 4, 5), {"pad": (1, 2, -1, 2)}),
    "constant_value": ("pad", (2, 3, 4, 5), {"pad": (1, 2, 0, 1, 1, 0), "value": 2.5}),
    "reflect": ("pad", (2, 3, 4, 5), {"pad": (2, 3, -1, 3), "mode": "reflect"}),
    "reflect_1d": ("pad", (3, 5), {"pad": (2, 3), "mode": "reflect"}),
    "replicate": ("pad", (3, 4, 5), {"pad": (2, 3, -1, 3), "mode": "replicate"}),
    "replicate_3d": ("pad", (1, 2, 3, 4, 5), {"pad": (1, 1, 2, 2, 1, 0), "mode": "replicate"}),
    "circular": ("pad", (2, 3, 4, 5), {"pad": (2, 5, -1, 3), "mode": "circular"}),
    "nearest": ("interpolate", (2, 3, 4, 5), {"scale_factor": 2}),
    "nearest_size": ("interpolate", (2, 3, 4, 5), {"size": (7, 3)}),
    "nearest_exact": ("interpolate", (2, 3, 5), {"scale_factor": 1.7, "mode": "nearest-exact"}),
    "bilinear": ("interpolate", (2, 3, 4, 5), {"scale_factor": (1.5, 0.7), "mode": "bilinear"}),
    "bilinear_corners": ("interpolate", (2, 3, 4, 5), {"size": (7, 3), "mode": "bilinear",
                                                       "align_corners": True}),
    "linear_recomputed": ("interpolate", (2, 3, 5), {"scale_factor": 2.3, "mode": "linear",
                                                     "recompute_scale_factor": True}),
    "trilinear": ("interpolate", (1, 2, 3, 4, 3), {"scale_factor": 2, "mode": "trilinear"}),
}


@pytest.mark.parametrize("name", CASES)
def test_pads_and_interpolations_match_torch_to_the_second_order(torch, name):
    fn, shape, kwargs = CASES[name]
    check_against_torch(torch, lambda x: getattr(F, fn)(x, **kwargs) ** 2,
                        lambda x: getattr(torch.nn.functional, fn)(x, **kwargs) ** 2,
                        uniform_values(1, shape), "numpy")


@pytest.mark.parametrize("family", ["pads", "interpolations"])
def test_on_jax_they_match_torch_to_the_second_order(torch, family):
    """The modes of each family in one case on JAX (each case compiles its kernels)."""

    def pads(m, x):
        return m.pad(x, (1, 2, -1, 1), mode="reflect") * m.pad(x, (2, 1, 0, 0), mode="circular") + (
            m.pad(x, (1, 2, 1, -1), mode="replicate") * m.pad(x, (1, 2, 1, -1), value=0.5))

    def interpolations(m, x):
        return m.interpolate(x, scale_factor=(1.5, 0.7), mode="bilinear") * m.interpolate(
            x, size=(7, 2))

    call = pads if family == "pads" else interpolations
    check_against_torch(torch, lambda x: call(F, x), lambda x: call(torch.nn.functional, x),
                        uniform_values(1, (2, 2, 5, 4)), "jax")


@settings(max_examples=30, deadline=None)
@given(size=st.integers(1, 40), out=st.integers(1, 90), scale=st.floats(0.05, 4.0),
       by_size=st.booleans(), mode=st.sampled_from(["nearest", "nearest-exact", "linear"]),
       align_corners=st.booleans(), recompute=st.booleans())
def test_where_each_output_reads_is_torchs(torch, size, out, scale, by_size, mode,
                                           align_corners, recompute):
    """Any sizes and scale factors: the same values as torch, to the last bit of the
    source positions (nearest rounds them as torch does)."""
    scale = round(scale, 3)
    if not by_size and size * scale < 1:
        scale = 1.0 / size
    kwargs = {"size": out} if by_size else {"scale_factor": scale,
                                            "recompute_scale_factor": recompute}
    if mode == "linear":
        kwargs["align_corners"] = align_corners
    values = np.random.default_rng(size).standard_normal((1, 1, size))
    ours = F.interpolate(js.tensor(values), mode=mode, **kwargs)
    theirs = torch.nn.functional.interpolate(torch.tensor(values), mode=mode, **kwargs)
    np.testing.assert_allclose(arr(ours), theirs.numpy(), rtol=1e-12, atol=1e-12)


def test_node_names_are_torchs(torch):
    x, tx = pair(torch, uniform_values(2, (2, 3, 5, 6))[0], "numpy")
    calls = [lambda m, x: m.pad(x, (1, 2)), lambda m, x: m.pad(x[0], (1, 2), mode="reflect"),
             lambda m, x: m.pad(x, (1, 2, 1, 1), mode="reflect"),
             lambda m, x: m.pad(x, (1, 2, 1, 1), mode="replicate"),
             lambda m, x: m.pad(x[None], (1, 1, 1, 1, 1, 1), mode="reflect"),
             lambda m, x: m.pad(x, (1, 2, 1, 1), mode="circular"),
             lambda m, x: m.interpolate(x, scale_factor=2),
             lambda m, x: m.interpolate(x[0], scale_factor=2, mode="nearest-exact"),
             lambda m, x: m.interpolate(x, scale_factor=2, mode="bilinear"),
             lambda m, x: m.interpolate(x[0], scale_factor=2, mode="linear")]
    for call in calls:
        ours, theirs = call(F, x), call(torch.nn.functional, tx)
        assert ours.grad_fn.name() == theirs.grad_fn.name().removeprefix("torch::autograd::")
        assert ours.shape == tuple(theirs.shape)


def test_an_integer_tensor_pads_with_its_dtype(torch):
    values = np.arange(6).reshape(2, 3)
    ours = F.pad(js.tensor(values), (1, 1), value=2.5)
    theirs = torch.nn.functional.pad(torch.tensor(values), (1, 1), value=2.5)
    assert str(ours.dtype) == "int64"
    np.testing.assert_array_equal(arr(ours), theirs.numpy())


def _x(*shape):
    return js.ones(*shape)


@pytest.mark.parametrize("call, error, phrases", [
    (lambda: F.pad(_x(1, 3, 5, 5), (1,)), RuntimeError, ["Padding length must be divisible by 2"]),
    (lambda: F.pad(_x(2, 2), (1,) * 6), RuntimeError,
     ["Padding length should be less than or equal to two times the input dimension but got "
      "padding length 6 and input of dimension 2"]),
    (lambda: F.pad(_x(1, 3, 5, 5), (-6, 1)), RuntimeError,
     ["The input size 5, plus negative padding -6 and 1 resulted in a negative output size"]),
    (lambda: F.pad(_x(1, 3, 5, 5), (5, 1), mode="reflect"), NotImplementedError,
     ["Padding size 2 is not supported for 4D input tensor"]),
    (lambda: F.pad(_x(1, 3, 5, 5), (5, 1, 0, 0), mode="reflect"), RuntimeError,
     ["Argument #4: Padding size should be less than the corresponding input dimension, but "
      "got: padding (5, 1) at dimension 3 of input [1, 3, 5, 5]"]),
    (lambda: F.pad(_x(1, 3, 5, 5), (6, 1, 0, 0), mode="circular"), RuntimeError,
     ["Padding value causes wrapping around more than once"]),
    (lambda: F.pad(_x(1, 3, 5, 5), (1, 1), mode="mirror"), NotImplementedError,
     ["Unrecognised padding mode mirror"]),
    (lambda: F.pad(_x(1, 3, 5, 5), (1, 1, 0, 0), mode="reflect", value=1.0), RuntimeError,
     ['Padding mode "reflect" doesn\'t take in value argument']),
    (lambda: F.pad(_x(1, 3, 5, 5), (1.5, 1)), TypeError, ["argument 'pad' must be tuple of ints"]),
    (lambda: F.interpolate(_x(1, 3, 5, 5)), ValueError,
     ["either size or scale_factor should be defined"]),
    (lambda: F.interpolate(_x(1, 3, 5, 5), size=3, scale_factor=2), ValueError,
     ["only one of size or scale_factor should be defined"]),
    (lambda: F.interpolate(_x(1, 3, 5, 5), size=(3, 4, 5)), ValueError,
     ["Input and output size must have the same number of spatial dimensions, but got input "
      "with spatial dimensions of [5, 5] and output size of (3, 4, 5)"]),
    (lambda: F.interpolate(_x(1, 3, 5, 5), scale_factor=2, mode="linear"), NotImplementedError,
     ["Got 4D input, but linear mode needs 3D input"]),
    (lambda: F.interpolate(_x(1, 3, 5, 5), scale_factor=2, mode="bicubic"), NotImplementedError,
     ["interpolate: mode 'bicubic' is not supported"]),
    (lambda: F.interpolate(_x(1, 3, 5, 5), scale_factor=2, align_corners=True), ValueError,
     ["align_corners option can only be set with the interpolating modes"]),
    (lambda: F.interpolate(_x(3, 5), scale_factor=2), NotImplementedError,
     ["Input Error: Only 3D, 4D and 5D input Tensors supported (got 2D)"]),
    (lambda: F.interpolate(_x(1, 3, 5, 5), scale_factor=0.1), RuntimeError,
     ["Input and output sizes should be greater than 0, but got input (H: 5, W: 5) output "
      "(H: 0, W: 0)"]),
    (lambda: F.interpolate(_x(1, 3, 5, 5), size=(3, 4), recompute_scale_factor=True),
     ValueError, ["recompute_scale_factor is not meaningful with an explicit size."]),
    (lambda: F.interpolate(_x(1, 3, 5, 5), scale_factor=2, mode="bilinear", antialias=True),
     NotImplementedError, ["antialias=True is not supported yet"]),
], ids=["odd_pad", "pad_too_long", "negative_size", "copy_mode_rank", "reflect_too_wide",
        "circular_wraps_twice", "mode", "value_with_reflect", "float_pad", "no_size",
        "size_and_scale", "size_rank", "linear_rank", "bicubic", "align_corners_nearest",
        "interpolate_rank", "empty_output", "recompute_with_size", "antialias"])
def test_bad_arguments_raise_torchs_errors(call, error, phrases):
    with pytest.raises(error) as excinfo:
        call()
    for phrase in phrases:
        assert phrase in error_text(excinfo)
