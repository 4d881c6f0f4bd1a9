"""conv1d and conv2d (`js.` and `js.nn.functional`) and the Conv1d/Conv2d layers against
torch: values, first and second gradients of the input, weight and bias on both backends
(any stride, padding, dilation and groups), node names, unbatched inputs, PyTorch's
errors, the layers' initialisation, padding modes and repr, and under to_jax."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import arr, error_text
from hypothesis import given, settings
from hypothesis import strategies as st
from ops_oracle import check_against_torch, pair, uniform_values

import jaxstream as js
import jaxstream.nn.functional as F
from jaxstream.jax_interop import to_jax

pytestmark = [pytest.mark.oracle,  # torch's own note on its "same" padding of even kernels
              pytest.mark.filterwarnings("ignore:Using padding='same' with even kernel")]

# name -> (input shape, weight shape, keyword arguments)
CASES = {
    "plain": ((1, 3, 5, 5), (4, 3, 3, 3), {}),
    "strided_padded_dilated_grouped": ((2, 4, 7, 6), (6, 2, 3, 2),
                                       {"stride": 2, "padding": 1, "dilation": (1, 2),
                                        "groups": 2}),
    "uneven_stride_and_padding": ((2, 3, 8, 7), (2, 3, 2, 3),
                                  {"stride": (3, 2), "padding": (2, 0), "dilation": 2}),
    "same_even_kernel": ((1, 2, 6, 6), (3, 2, 2, 2), {"padding": "same"}),
    "padding_past_the_kernel": ((1, 2, 3, 3), (2, 2, 1, 1), {"padding": 2, "stride": 2}),
    "valid": ((1, 2, 4, 5), (1, 2, 2, 2), {"padding": "valid"}),
    "1d_depthwise": ((2, 4, 9), (4, 1, 3), {"stride": 2, "padding": 3, "groups": 4}),
    "1d_same_dilated": ((1, 2, 7), (3, 2, 3), {"padding": "same", "dilation": 2}),
}


def _conv(m, shape):
    return getattr(m, "conv1d" if len(shape) == 3 else "conv2d")


@pytest.mark.parametrize("name", CASES)
def test_convolutions_match_torch_to_the_second_order(torch, name):
    xs, ws, kwargs = CASES[name]
    conv, tconv = _conv(F, xs), _conv(torch.nn.functional, xs)
    check_against_torch(torch, lambda x, w, b: conv(x, w, b, **kwargs) ** 2,
                        lambda x, w, b: tconv(x, w, b, **kwargs) ** 2,
                        uniform_values(1, xs, ws, (ws[0],)), "numpy")


def test_a_convolution_on_jax_matches_torch_to_the_second_order(torch):
    """One case on JAX, where each case compiles some forty kernels (its input and output
    have the shapes of test_nn_pooling.py's case on JAX, which shares those of the same
    shapes); the traced test below runs a grouped convolution with a bias on JAX too."""
    kwargs = {"stride": 2, "padding": 1}
    check_against_torch(torch, lambda x, w: F.conv2d(x, w, None, **kwargs) ** 2,
                        lambda x, w: torch.nn.functional.conv2d(x, w, None, **kwargs) ** 2,
                        uniform_values(1, (2, 2, 5, 4), (2, 2, 3, 2)), "jax")


@pytest.mark.parametrize(("x_shape", "w_shape"), [((1, 2, 2, 4), (2, 2, 3, 2)),
                                                   ((1, 2, 4, 5), (2, 2, 2, 4))])
def test_strided_gradients_that_aborted_xla_match_torch(torch, x_shape, w_shape):
    """Note [XLA's operand swap of a spread convolution]: these input gradients, a plain
    `jax.grad` of them included, ended the process in XLA's simplifier."""
    kwargs = {"stride": 2, "padding": 1}
    check_against_torch(torch, lambda x, w: F.conv2d(x, w, None, **kwargs) ** 2,
                        lambda x, w: torch.nn.functional.conv2d(x, w, None, **kwargs) ** 2,
                        uniform_values(5, x_shape, w_shape), "jax")


@settings(max_examples=6, deadline=None)
@given(data=st.data())
def test_any_geometry_matches_torch(torch, data):
    groups = data.draw(st.sampled_from([1, 2]))
    kernel = tuple(data.draw(st.integers(1, 3)) for _ in range(2))
    dilation = tuple(data.draw(st.integers(1, 2)) for _ in range(2))
    stride = tuple(data.draw(st.integers(1, 3)) for _ in range(2))
    padding = tuple(data.draw(st.integers(0, 2)) for _ in range(2))
    sizes = tuple(max(d * (k - 1) + 1 - 2 * p, 1) + data.draw(st.integers(0, 3))
                  for k, d, p in zip(kernel, dilation, padding, strict=True))
    kwargs = {"stride": stride, "padding": padding, "dilation": dilation, "groups": groups}
    xs, ws = (data.draw(st.integers(1, 2)), 2 * groups) + sizes, (2 * groups, 2) + kernel
    check_against_torch(torch, lambda x, w: F.conv2d(x, w, None, **kwargs) ** 2,
                        lambda x, w: torch.nn.functional.conv2d(x, w, None, **kwargs) ** 2,
                        uniform_values(2, xs, ws), "numpy")


def test_node_names_unbatched_inputs_and_the_top_level_names_are_torchs(torch):
    x, tx = pair(torch, uniform_values(3, (3, 5, 5))[0], "numpy")
    w, tw = pair(torch, uniform_values(4, (2, 3, 3, 3))[0], "numpy")
    for ours, theirs in [(js.conv2d(x[None], w), torch.conv2d(tx[None], tw)),
                         (F.conv2d(x, w, padding=1), torch.nn.functional.conv2d(tx, tw, padding=1)),
                         (js.conv1d(x[:, 0], w[:, :, 0]), torch.conv1d(tx[:, 0], tw[:, :, 0]))]:
        assert ours.grad_fn.name() == theirs.grad_fn.name()
        assert ours.shape == tuple(theirs.shape)
        np.testing.assert_allclose(arr(ours), theirs.detach().numpy(), rtol=1e-10)


def _network(m, x, w, b):
    """A grouped convolution with a bias and a max pooling: jaxstream's inside a JAX
    program."""
    y = m.max_pool2d(m.conv2d(x, w, b, stride=2, padding=1, groups=2), 2, 1, 1, ceil_mode=True)
    return (y * y).sum()


def test_a_network_traces_under_jit_and_grad(torch):
    """jax.jit(jax.grad(to_jax(loss))) matches torch."""
    values = uniform_values(5, (2, 4, 6, 5), (4, 2, 3, 3), (4,))
    got = jax.jit(jax.grad(to_jax(lambda *a: _network(F, *a)), argnums=(0, 1, 2)))(
        *map(jnp.asarray, values))
    txs = [torch.tensor(v, requires_grad=True) for v in values]
    want = torch.autograd.grad(_network(torch.nn.functional, *txs), txs)
    for g, tg in zip(got, want, strict=True):
        np.testing.assert_allclose(np.asarray(g), tg.numpy(), rtol=2e-3, atol=2e-3)


def _x(*shape):
    return js.ones(*shape)


@pytest.mark.parametrize("call, phrases", [
    (lambda: F.conv2d(_x(5, 5), _x(4, 3, 3, 3)),
     ["Expected 3D (unbatched) or 4D (batched) input to conv2d, but got input of size: [5, 5]"]),
    (lambda: F.conv1d(_x(1, 1, 3, 5), _x(4, 3, 3)),
     ["Expected 2D (unbatched) or 3D (batched) input to conv1d"]),
    (lambda: F.conv2d(_x(1, 4, 5, 5), _x(4, 3, 3, 3)),
     ["Given groups=1, weight of size [4, 3, 3, 3], expected input[1, 4, 5, 5] to have 3 "
      "channels, but got 4 channels instead"]),
    (lambda: F.conv2d(_x(1, 3, 5, 5), _x(4, 3, 3)),
     ["conv2d: expected a weight of 4 dimensions", "[4, 3, 3]"]),
    (lambda: F.conv2d(_x(1, 3, 2, 2), _x(4, 3, 3, 3)),
     ["Calculated padded input size per channel: (2 x 2). Kernel size: (3 x 3). Kernel size "
      "can't be greater than actual input size"]),
    (lambda: F.conv2d(_x(1, 3, 5, 5), _x(4, 3, 3, 3), dilation=3),
     ["Calculated padded input size per channel: (5 x 5). Kernel size: (7 x 7)."]),
    (lambda: F.conv2d(_x(1, 3, 5, 5), _x(4, 1, 3, 3), groups=3),
     ["Given groups=3, expected weight to be divisible by 3 at dimension 0, but got weight of "
      "size [4, 1, 3, 3] instead"]),
    (lambda: F.conv2d(_x(1, 3, 5, 5), _x(4, 3, 3, 3), _x(3)),
     ["Given weight of size [4, 3, 3, 3], expected bias to be 1-dimensional with 4 elements, "
      "but got bias of size [3] instead"]),
    (lambda: F.conv2d(_x(1, 3, 5, 5), _x(4, 3, 3, 3), stride=2, padding="same"),
     ["padding='same' is not supported for strided convolutions"]),
    (lambda: F.conv2d(_x(1, 3, 5, 5), _x(4, 3, 3, 3), padding="full"),
     ["Invalid padding string: 'full'"]),
    (lambda: F.conv2d(_x(1, 3, 5, 5), _x(4, 3, 3, 3), stride=(1, 2, 3)),
     ["expected stride to be a single integer value or a list of 2 values to match the "
      "convolution dimensions, but got stride=[1, 2, 3]"]),
    (lambda: F.conv2d(_x(1, 3, 5, 5), _x(4, 3, 3, 3), stride=0),
     ["non-positive stride is not supported"]),
    (lambda: F.conv2d(_x(1, 3, 5, 5), _x(4, 3, 3, 3), padding=-1),
     ["negative padding is not supported"]),
    (lambda: F.conv2d(_x(1, 3, 5, 5), _x(4, 3, 3, 3), dilation=0),
     ["dilation should be greater than zero, but got [0, 0]"]),
    (lambda: F.conv2d(_x(1, 3, 5, 5), _x(4, 3, 3, 3), groups=0),
     ["non-positive groups is not supported"]),
    (lambda: F.conv2d(_x(1, 3, 5, 5), _x(4, 3, 3, 3).double()),
     ["expected scalar type Float but found Double", "cast one first"]),
], ids=["input_rank", "input_rank_1d", "channels", "weight_rank", "kernel_too_big",
        "dilated_kernel_too_big", "groups_divide_out_channels", "bias_size", "same_strided",
        "padding_string", "stride_length", "stride_zero", "negative_padding", "dilation_zero",
        "groups_zero", "dtypes"])
def test_bad_arguments_raise_torchs_errors(call, phrases):
    with pytest.raises(RuntimeError) as excinfo:
        call()
    for phrase in phrases:
        assert phrase in error_text(excinfo)


# ------------------------------------------------------------------ the layers
@pytest.mark.parametrize("mode", ["zeros", "reflect", "replicate", "circular"])
@pytest.mark.parametrize("padding", [1, "same", (0, 2)], ids=str)
def test_conv2d_layer_pads_and_convolves_as_torchs(torch, mode, padding):
    theirs = torch.nn.Conv2d(2, 3, (3, 2), padding=padding, padding_mode=mode,
                             dtype=torch.float64)
    ours = js.nn.Conv2d(2, 3, (3, 2), padding=padding, padding_mode=mode, key=0)
    ours.weight = js.nn.Parameter(js.tensor(theirs.weight.detach().numpy()))
    ours.bias = js.nn.Parameter(js.tensor(theirs.bias.detach().numpy()))
    x, tx = pair(torch, uniform_values(6, (2, 2, 5, 6))[0], "numpy")
    y, ty = ours(x), theirs(tx)
    np.testing.assert_allclose(arr(y), ty.detach().numpy(), rtol=1e-10, atol=1e-12)
    (y ** 2).sum().backward()
    (ty ** 2).sum().backward()
    np.testing.assert_allclose(arr(ours.weight.grad), theirs.weight.grad.numpy(), rtol=1e-9)
    np.testing.assert_allclose(arr(x.grad), tx.grad.numpy(), rtol=1e-9, atol=1e-12)
    assert repr(ours) == repr(theirs)


def test_layers_take_torchs_init_key_and_factory_arguments(torch):
    conv = js.nn.Conv2d(4, 6, 3, stride=2, groups=2, key=7, dtype="float32")
    again = js.nn.Conv2d(4, 6, 3, stride=2, groups=2, key=7, dtype="float32")
    bound = 1 / math.sqrt(2 * 9)  # fan_in: in_channels / groups times the kernel's size
    assert conv.weight.shape == (6, 2, 3, 3) and conv.bias.shape == (6,)
    assert str(conv.weight.dtype) == "float32"
    for ours, twin in [(conv.weight, again.weight), (conv.bias, again.bias)]:
        values = arr(ours)
        assert np.abs(values).max() <= bound and np.abs(values).max() > bound / 2
        np.testing.assert_array_equal(values, arr(twin))
    assert {n for n, _ in conv.named_parameters()} == {"weight", "bias"}
    assert repr(conv) == repr(torch.nn.Conv2d(4, 6, 3, stride=2, groups=2))
    conv1 = js.nn.Conv1d(3, 4, 5, padding="same", padding_mode="reflect", bias=False,
                         backend="numpy", dtype="float64")
    assert conv1.bias is None and conv1.weight.backend == "numpy"
    assert repr(conv1) == repr(torch.nn.Conv1d(3, 4, 5, padding="same", padding_mode="reflect",
                                               bias=False))
    assert conv1(js.ones(2, 3, 7, dtype="float64")).shape == (2, 4, 7)


@pytest.mark.parametrize("kwargs, phrase", [
    ({"groups": 2, "in_channels": 3}, "in_channels must be divisible by groups"),
    ({"groups": 2, "out_channels": 3}, "out_channels must be divisible by groups"),
    ({"groups": 0}, "groups must be a positive integer"),
    ({"padding": "full"}, "Invalid padding string 'full', should be one of {'valid', 'same'}"),
    ({"padding": "same", "stride": 2}, "padding='same' is not supported for strided"),
    ({"padding_mode": "mirror"}, "padding_mode must be one of ['zeros', 'reflect', "
                                 "'replicate', 'circular'], but got padding_mode='mirror'"),
], ids=["in_channels", "out_channels", "groups", "padding", "same_strided", "padding_mode"])
def test_layer_arguments_are_checked_as_torchs(kwargs, phrase):
    arguments = {"in_channels": 4, "out_channels": 4, "kernel_size": 3, **kwargs}
    with pytest.raises(ValueError) as excinfo:
        js.nn.Conv2d(**arguments)
    assert phrase in error_text(excinfo)
