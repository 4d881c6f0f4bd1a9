"""The transposed convolutions (conv_transpose1d/2d/3d, ConvTranspose1d/2d/3d), conv3d and
the 3-d layers (Conv3d, the 3-d pools, BatchNorm3d, Dropout3d, the 3-d pads) against torch:
values, input, weight and bias gradients on both backends, a second order on NumPy,
`output_size`, unbatched inputs, node names, indices, initialisation, repr, state_dict
keys and PyTorch's errors."""

from __future__ import annotations

import math
import warnings
from types import SimpleNamespace

import numpy as np
import pytest
from helpers import arr, error_text
from ops_oracle import check_against_torch, close, uniform_values

import jaxstream as js
import jaxstream.nn.functional as F

torch = pytest.importorskip("torch")
tnn, TF = torch.nn, torch.nn.functional

pytestmark = pytest.mark.oracle
BACKENDS = ["numpy", "jax"]
RNG = np.random.default_rng(0)
X4 = RNG.standard_normal((2, 4, 5, 5))
X5 = RNG.standard_normal((1, 2, 3, 4, 4))


def _float(backend):
    return np.float64 if backend == "numpy" else np.float32


def _ours(values, backend, requires_grad=True):
    return js.tensor(np.asarray(values, dtype=_float(backend)), backend=backend,
                     requires_grad=requires_grad)


def _same_gradients(ours, theirs, ours_wrt, theirs_wrt, backend):
    """`ours` and `theirs` hold the same values, and so do their gradients under one
    random cotangent."""
    close(ours, theirs.detach().numpy(), backend, "output")
    assert ours.shape == tuple(theirs.shape)
    w = RNG.standard_normal(theirs.shape)
    grads = js.grad((ours * _ours(w, backend, False)).sum(), ours_wrt)
    tgrads = torch.autograd.grad((theirs * torch.tensor(w)).sum(), theirs_wrt)
    for i, (g, tg) in enumerate(zip(grads, tgrads, strict=True)):
        close(g, tg.numpy(), backend, f"gradient {i}")


# ------------------------------------------------------------------ the functionals
# name -> (input, weight shape, keyword arguments)
CASES = {
    "2d_grouped_dilated_output_padding": (X4, (4, 3, 3, 2), {
        "stride": 2, "padding": 1, "output_padding": 1, "groups": 2, "dilation": (1, 2)}),
    "2d_padding_past_the_kernel": (X4, (4, 3, 1, 1), {"stride": 2, "padding": 2}),
    "2d_output_padding_below_dilation": (X4, (4, 3, 3, 2), {
        "stride": (2, 1), "padding": (1, 0), "output_padding": (0, 1), "dilation": 2}),
    "1d_unbatched": (X4[0, :, :, 0], (4, 2, 3), {"stride": 3, "padding": 1,
                                                  "output_padding": 2}),
    "3d": (X5, (2, 3, 2, 3, 2), {"stride": (1, 2, 2), "padding": (0, 1, 1),
                                 "output_padding": (0, 1, 0)}),
}


def _transposed(m, weight_shape):
    return getattr(m, f"conv_transpose{len(weight_shape) - 2}d")


# On NumPy here; on JAX in `test_the_transposed_convolutions_on_jax_in_one_program`.
@pytest.mark.parametrize("backend", ["numpy"])
@pytest.mark.parametrize("name", CASES)
def test_conv_transpose_matches_torch(name, backend):
    x, weight_shape, kwargs = CASES[name]
    groups = kwargs.get("groups", 1)
    w, b = uniform_values(1, weight_shape, (weight_shape[1] * groups,))
    xs = [_ours(v, backend) for v in (x, w, b)]
    txs = [torch.tensor(v, requires_grad=True) for v in (x, w, b)]
    y = _transposed(F, weight_shape)(*xs, **kwargs)
    ty = _transposed(TF, weight_shape)(*txs, **kwargs)
    assert y.grad_fn.name() == ty.grad_fn.name()
    _same_gradients(y, ty, xs, txs, backend)


def test_conv_transpose2d_second_order_on_numpy():
    kwargs = {"stride": 2, "padding": 1, "output_padding": 1, "groups": 2, "dilation": (1, 2)}
    check_against_torch(torch, lambda x, w, b: F.conv_transpose2d(x, w, b, **kwargs) ** 2,
                        lambda x, w, b: TF.conv_transpose2d(x, w, b, **kwargs) ** 2,
                        [X4, *uniform_values(2, (4, 3, 3, 2), (6,))], "numpy")


def _transposed_pieces(m, cat, x4, w2, b2, x5, w3, b3):
    """Transposed convolutions of 1, 2 and 3 axes (grouped, dilated, strided, with output
    padding, a bias or none, an unbatched input), flattened into one vector."""
    outs = [m.conv_transpose2d(x4, w2, b2, **CASES["2d_grouped_dilated_output_padding"][2]),
            m.conv_transpose1d(x4[0, :, :, 0], w2[:, :2, :, 0], None,
                               **CASES["1d_unbatched"][2]),
            m.conv_transpose3d(x5, w3, b3, **CASES["3d"][2])]
    return cat([out.reshape(-1) for out in outs])


def test_the_transposed_convolutions_on_jax_in_one_program():
    """On JAX, to the second order, compiled as one program (each new shape would compile
    every op again)."""
    check_against_torch(
        torch, lambda *xs: _transposed_pieces(F, js.cat, *xs),
        lambda *xs: _transposed_pieces(TF, torch.cat, *xs),
        [X4, *uniform_values(1, (4, 3, 3, 2), (6,)), X5, *uniform_values(2, (2, 3, 2, 3, 2), (3,))],
        "jax", compiled=True)


def _volume_pieces(m, cat, x5, w, b):
    """conv3d, the 3-d pools and pads, flattened into one vector (the 3-d layers wrap
    these)."""
    outs = [m.conv3d(x5, w, b, stride=(1, 2, 1), padding=1, groups=2),
            m.max_pool3d(x5, (2, 3, 2), (1, 2, 2), 1, dilation=(1, 1, 2), ceil_mode=True),
            m.avg_pool3d(x5, (2, 3, 2), (1, 2, 2), 1, ceil_mode=True, count_include_pad=False),
            m.adaptive_avg_pool3d(x5, (2, 3, 3)), m.adaptive_max_pool3d(x5, (2, 3, 3)),
            m.pad(x5, (1, 2, 0, 1, 1, 0), mode="reflect")]
    return cat([out.reshape(-1) for out in outs])


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_3d_functionals_to_the_second_order(backend):
    """On NumPy as they run; on JAX compiled as one program."""
    check_against_torch(torch, lambda *xs: _volume_pieces(F, js.cat, *xs),
                        lambda *xs: _volume_pieces(TF, torch.cat, *xs),
                        [X5, *uniform_values(3, (4, 1, 2, 3, 2), (4,))], backend,
                        compiled=backend == "jax")


def test_node_names_and_indices_are_torchs():
    x, tx = _ours(X5, "numpy"), torch.tensor(X5, requires_grad=True)
    w = uniform_values(3, (2, 2, 2, 2, 2))[0]
    calls = [lambda m, x, w: m.max_pool3d(x, 2, 1, 1), lambda m, x, w: m.avg_pool3d(x, 2, 1, 1),
             lambda m, x, w: m.max_pool3d(x[0], 2), lambda m, x, w: m.conv3d(x, w),
             lambda m, x, w: m.conv_transpose3d(x[0], w, stride=2)]
    for call in calls:
        ours, theirs = call(F, x, _ours(w, "numpy")), call(TF, tx, torch.tensor(w))
        assert ours.grad_fn.name() == theirs.grad_fn.name()
        close(ours, theirs.detach().numpy(), "numpy", "value")
    for call in calls[:2]:  # the node of the gradient, under a cotangent that takes one
        y, ty = call(F, x, None), call(TF, tx, None)
        v, tv = _ours(np.ones(y.shape), "numpy"), torch.ones(ty.shape, requires_grad=True)
        g = js.grad((y * v).sum(), [x], create_graph=True)[0]
        tg = torch.autograd.grad((ty * tv).sum(), [tx], create_graph=True)[0]
        assert g.grad_fn.name() == tg.grad_fn.name()
    for pool, size in [("max_pool3d", (2, 1, 1)), ("adaptive_max_pool3d", (2, 3, 3))]:
        args = (2, 1, 1, 1, False, True) if pool == "max_pool3d" else (size, True)
        ours, theirs = getattr(F, pool)(x, *args), getattr(TF, pool)(tx, *args)
        np.testing.assert_array_equal(arr(ours[1]), theirs[1].numpy())


# ------------------------------------------------------------------ the layers
MODULES = {  # name -> (ours or torch's layer from its module, input)
    "ConvTranspose1d": (lambda m: m.ConvTranspose1d(4, 3, 3, stride=2, padding=1), X4[..., 0]),
    "ConvTranspose2d": (lambda m: m.ConvTranspose2d(4, 6, (3, 2), stride=2, padding=1,
                                                    output_padding=1, groups=2, dilation=2), X4),
    "ConvTranspose3d": (lambda m: m.ConvTranspose3d(2, 3, 2, stride=(1, 2, 2), bias=False), X5),
    "Conv3d": (lambda m: m.Conv3d(2, 4, (2, 3, 2), stride=(1, 2, 1), padding=1, groups=2), X5),
    "Conv3d circular": (lambda m: m.Conv3d(2, 3, 3, padding=1, padding_mode="circular"), X5),
    "MaxPool3d": (lambda m: m.MaxPool3d((2, 3, 2), (1, 2, 2), 1, dilation=(1, 1, 2),
                                        ceil_mode=True), X5),
    "AvgPool3d": (lambda m: m.AvgPool3d(2, 1, 1, count_include_pad=False), X5),
    "AvgPool3d divisor": (lambda m: m.AvgPool3d((2, 3, 2), (1, 2, 2), 1, ceil_mode=True,
                                                divisor_override=3), X5),
    "AdaptiveAvgPool3d": (lambda m: m.AdaptiveAvgPool3d((2, None, 3)), X5),
    "AdaptiveMaxPool3d": (lambda m: m.AdaptiveMaxPool3d((2, 3, 3)), X5),
    "BatchNorm3d": (lambda m: m.BatchNorm3d(2), X5),
    "ZeroPad3d": (lambda m: m.ZeroPad3d(1), X5),
    "ConstantPad3d": (lambda m: m.ConstantPad3d((1, 0, 2, 1, 0, 1), 2.0), X5),
    "ReflectionPad3d": (lambda m: m.ReflectionPad3d((1, 2, 0, 1, 1, 0)), X5),
    "ReplicationPad3d": (lambda m: m.ReplicationPad3d(1), X5),
    "CircularPad3d": (lambda m: m.CircularPad3d((1, 0, 0, 1, 1, 1)), X5),
}


class _Factory:
    """js.nn, with the factory arguments added to each layer."""

    def __init__(self, backend):
        self.kwargs = {"dtype": _float(backend), "backend": backend}

    def __getattr__(self, name):
        return lambda *a, **k: getattr(js.nn, name)(*a, **k, **self.kwargs)


def _takes_factory(name):
    return name.startswith(("Conv", "BatchNorm"))


# On NumPy here: the layers call the functionals tested on JAX above.
@pytest.mark.parametrize("backend", ["numpy"])
@pytest.mark.parametrize("name", MODULES)
def test_modules_match_torch(name, backend):
    make, x = MODULES[name]
    ours = make(_Factory(backend) if _takes_factory(name) else js.nn)
    theirs = make(tnn).double()
    assert repr(ours) == repr(theirs)
    ours.load_state_dict({k: _ours(v.detach().numpy(), backend, False)
                          for k, v in theirs.state_dict().items()})
    assert list(ours.state_dict()) == list(theirs.state_dict())
    xs, txs = _ours(x, backend), torch.tensor(x, requires_grad=True)
    _same_gradients(ours(xs), theirs(txs), [xs, *ours.parameters()],
                    [txs, *theirs.parameters()], backend)


@pytest.mark.parametrize("backend", ["numpy"])
def test_output_size_chooses_the_output_padding_as_torchs(backend):
    """The whole shape or the spatial sizes, batched or not."""
    ours, theirs = MODULES["ConvTranspose2d"][0](_Factory(backend)), MODULES[
        "ConvTranspose2d"][0](tnn).double()
    ours.load_state_dict({k: _ours(v.detach().numpy(), backend, False)
                          for k, v in theirs.state_dict().items()})
    for x, size in [(X4, [2, 6, 12, 9]), (X4[0], (11, 10))]:
        xs, txs = _ours(x, backend), torch.tensor(x, requires_grad=True)
        _same_gradients(ours(xs, output_size=size), theirs(txs, output_size=size),
                        [xs, ours.weight], [txs, theirs.weight], backend)


def test_transposed_layers_take_torchs_init_key_and_factory_arguments():
    conv = js.nn.ConvTranspose2d(4, 6, 3, stride=2, groups=2, key=7, dtype="float32")
    again = js.nn.ConvTranspose2d(4, 6, 3, stride=2, groups=2, key=7, dtype="float32")
    bound = 1 / math.sqrt(3 * 9)  # fan_in: out_channels / groups times the kernel's size
    assert conv.weight.shape == (4, 3, 3, 3) and conv.bias.shape == (6,)
    assert str(conv.weight.dtype) == "float32"
    for ours, twin in [(conv.weight, again.weight), (conv.bias, again.bias)]:
        values = arr(ours)
        assert np.abs(values).max() <= bound and np.abs(values).max() > bound / 2
        np.testing.assert_array_equal(values, arr(twin))
    assert [n for n, _ in conv.named_parameters()] == ["weight", "bias"]
    assert repr(conv) == repr(tnn.ConvTranspose2d(4, 6, 3, stride=2, groups=2))
    conv3 = js.nn.ConvTranspose3d(2, 4, (1, 2, 3), output_padding=(0, 1, 0), stride=2,
                                  bias=False, backend="numpy")
    assert conv3.bias is None and conv3.weight.shape == (2, 4, 1, 2, 3)
    assert repr(conv3) == repr(tnn.ConvTranspose3d(2, 4, (1, 2, 3), output_padding=(0, 1, 0),
                                                   stride=2, bias=False))


def test_dropout3d_zeroes_whole_channels():
    x = _ours(np.abs(X5) + 1, "numpy")
    layer = js.nn.Dropout3d(0.5)
    assert repr(layer) == repr(tnn.Dropout3d(0.5))
    for inputs, channel_axes in [(x, 2), (x[0], 1)]:
        ratio = arr(layer(inputs, key=3) / inputs)
        per_channel = ratio.reshape(ratio.shape[:channel_axes] + (-1,))
        assert np.all(per_channel == per_channel[..., :1])
        assert set(np.unique(per_channel)) <= {0.0, 2.0}
    assert arr(F.dropout3d(x, 1.0)).sum() == 0
    layer.eval()
    assert layer(x) is x


@pytest.mark.parametrize("shape", [(2, 3, 4), (2, 3, 4, 5)])
def test_dropout3d_warns_as_torch(shape):
    with warnings.catch_warnings(record=True) as theirs:
        warnings.simplefilter("always")
        TF.dropout3d(torch.ones(shape))
    with warnings.catch_warnings(record=True) as ours:
        warnings.simplefilter("always")
        F.dropout3d(js.ones(shape))
    assert [str(w.message) for w in ours] == [str(w.message) for w in theirs]


# ------------------------------------------------------------------ the errors
OURS = SimpleNamespace(nn=js.nn, functional=F, ones=js.ones)
THEIRS = SimpleNamespace(nn=tnn, functional=TF, ones=torch.ones)
def _x(*shape):
    return js.ones(*shape, dtype="float64")


@pytest.mark.parametrize("call, phrases", [
    (lambda f, t: f.conv_transpose2d(t(1, 4, 5, 5), t(4, 2, 3, 3), stride=2, output_padding=2),
     ["output padding must be smaller than either stride or dilation, but got "
      "output_padding_height: 2 output_padding_width: 2 stride_height: 2 stride_width: 2 "
      "dilation_height: 1 dilation_width: 1"]),
    (lambda f, t: f.conv_transpose3d(t(1, 4, 2, 2, 2), t(4, 2, 1, 1, 1), output_padding=1),
     ["output padding must be smaller than either stride or dilation", "output_padding_depth"]),
    (lambda f, t: f.conv_transpose2d(t(1, 4, 5, 5), t(4, 2, 2, 2), padding=(3, 0)),
     ["Given input size per channel: (5 x 5). Calculated output size per channel: (0 x 6). "
      "Output size is too small"]),
    (lambda f, t: f.conv_transpose2d(t(1, 4, 5, 5), t(4, 2, 3, 3), padding=-1),
     ["negative padding is not supported"]),
    (lambda f, t: f.conv_transpose2d(t(1, 4, 5, 5), t(4, 2, 3, 3), output_padding=-1),
     ["negative output_padding is not supported"]),
    (lambda f, t: f.conv_transpose2d(t(1, 3, 5, 5), t(4, 2, 3, 3)),
     ["Given transposed=1, weight of size [4, 2, 3, 3], expected input[1, 3, 5, 5] to have 4 "
      "channels, but got 3 channels instead"]),
    (lambda f, t: f.conv_transpose2d(t(1, 4, 5, 5), t(4, 2, 3, 3), t(2), groups=2),
     ["Given transposed=1, weight of size [4, 2, 3, 3], expected bias to be 1-dimensional "
      "with 4 elements, but got bias of size [2] instead"]),
    (lambda f, t: f.conv_transpose2d(t(1, 3, 5, 5), t(3, 2, 3, 3), groups=2),
     ["Given groups=2, expected weight to be divisible by 2 at dimension 0"]),
    (lambda f, t: f.conv_transpose1d(t(1, 4, 5, 5), t(4, 2, 3)),
     ["Expected 2D (unbatched) or 3D (batched) input to conv_transpose1d, but got input of "
      "size: [1, 4, 5, 5]"]),
    (lambda f, t: f.conv_transpose2d(t(1, 4, 5, 5), t(4, 2, 3, 3), stride=(1, 2, 3)),
     ["expected stride to be a single integer value or a list of 2 values"]),
    (lambda f, t: f.conv_transpose2d(t(1, 4, 5, 5), t(4, 2, 3, 3), stride=0),
     ["non-positive stride is not supported"]),
    (lambda f, t: f.conv3d(t(1, 2, 3, 4, 4), t(2, 2, 4, 3, 3)),
     ["Calculated padded input size per channel: (3 x 4 x 4). Kernel size: (4 x 3 x 3)."]),
], ids=["output_padding", "output_padding_3d", "output_too_small", "negative_padding",
        "negative_output_padding", "channels", "bias", "groups", "rank", "stride_length",
        "stride_zero", "conv3d_kernel_too_big"])
def test_functionals_raise_torchs_errors(call, phrases):
    with pytest.raises(RuntimeError):
        call(TF, lambda *s: torch.ones(*s, dtype=torch.float64))
    with pytest.raises(RuntimeError) as excinfo:
        call(F, _x)
    for phrase in phrases:
        assert phrase in error_text(excinfo)


@pytest.mark.parametrize("call, error, phrases", [
    (lambda m: m.nn.ConvTranspose2d(2, 4, 3, padding_mode="reflect"), ValueError,
     ['Only "zeros" padding mode is supported for ConvTranspose2d']),
    (lambda m: m.nn.ConvTranspose2d(3, 4, 3, groups=2), ValueError,
     ["in_channels must be divisible by groups"]),
    (lambda m: m.nn.ConvTranspose2d(4, 6, 3, stride=2)(m.ones(4, 5, 5), output_size=(9,)),
     ValueError, ["ConvTranspose2D: for 3D input, output_size must have 2 or 3 elements (got 1)"]),
    (lambda m: m.nn.ConvTranspose2d(4, 6, 3, stride=2)(m.ones(1, 4, 5, 5), output_size=(9, 13)),
     ValueError, ["requested an output size of (9, 13), but valid sizes range from [11, 11] to "
                  "[12, 12]"]),
    (lambda m: m.functional.conv_transpose2d(m.ones(1, 4, 5, 5), m.ones(4, 2, 3, 3),
                                             padding="same"), TypeError,
     ["conv_transpose2d(): argument 'padding' must be tuple of ints, not str"]),
    (lambda m: m.functional.max_pool3d(m.ones(1, 2, 3, 4, 4), (2, 2)), RuntimeError,
     ["max_pool3d: kernel_size must either be a single int, or a tuple of three ints"]),
    (lambda m: m.functional.avg_pool3d(m.ones(1, 2, 3, 4, 4), 0, 1), RuntimeError,
     ["kernel size should be greater than zero, but got kT: 0 kH: 0 kW: 0"]),
    (lambda m: m.functional.max_pool3d(m.ones(1, 2, 3, 4, 4), 2, 1, 0, 0), RuntimeError,
     ["dilation should be greater than zero, but got dilationT: 0 dilationH: 0 dilationW: 0"]),
    (lambda m: m.functional.max_pool3d(m.ones(1, 2, 3, 4, 4), 4), RuntimeError,
     ["Given input size: (2x3x4x4). Calculated output size: (2x0x1x1). Output size is too "
      "small"]),
    (lambda m: m.functional.max_pool3d(m.ones(3, 4, 4), 2), RuntimeError,
     ["non-empty 4D or 5D (batch mode) tensor expected for input"]),
    (lambda m: m.functional.adaptive_avg_pool3d(m.ones(3, 4, 4), 2), RuntimeError,
     ["adaptive_avg_pool3d: expected a 4D or 5D input"]),
    (lambda m: m.functional.dropout3d(m.ones(()), 0.5), RuntimeError,
     ["Feature dropout requires at least 2 dimensions in the input"]),
    (lambda m: m.nn.BatchNorm3d(2)(m.ones(2, 2, 3, 3)), ValueError, ["expected 5D input"]),
    (lambda m: m.nn.ReflectionPad3d(1)(m.ones(2, 3, 3)), NotImplementedError,
     ["Padding size 6 is not supported for 3D input tensor"]),
], ids=["padding_mode", "groups", "output_size_length", "output_size_range", "padding_string",
        "pool_kernel_tuple", "pool_kernel_zero", "pool_dilation_zero", "pool_too_small",
        "pool_rank", "adaptive_rank", "dropout_rank", "batch_norm_rank", "reflection_rank"])
def test_layers_and_pools_raise_torchs_errors(call, error, phrases):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(error):
            call(THEIRS)
        with pytest.raises(error) as excinfo:
            call(OURS)
    for phrase in phrases:
        assert phrase in error_text(excinfo)
