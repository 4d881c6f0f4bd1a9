"""The transformer modules against torch's with the same parameters (torch's state_dict
loaded): outputs, gradients of the inputs and of every parameter, state_dict keys and
reprs, in eval mode (dropout off), on both backends; then dropout in training, the deep
copies of the stacks, Transformer's initialisation and mask, and the errors."""

from __future__ import annotations

import copy
import math
import warnings

import numpy as np
import pytest
from helpers import arr
from ops_oracle import close, tensor_of

import jaxstream as js

torch = pytest.importorskip("torch")

pytestmark = [
    pytest.mark.oracle,
    # torch's: its encoder's nested-tensor notice, and a float mask beside a bool one.
    pytest.mark.filterwarnings("ignore:enable_nested_tensor is True"),
    pytest.mark.filterwarnings("ignore:Support for mismatched"),
]
BACKENDS = ["numpy", "jax"]
RNG = np.random.default_rng(0)
D, HEADS, FF, BATCH, S, T = 8, 2, 16, 2, 4, 3
SRC, TGT = RNG.standard_normal((S, BATCH, D)), RNG.standard_normal((T, BATCH, D))
SRC_PADDING = np.array([[False, False, False, True], [False] * S])
TGT_PADDING = np.array([[False, False, True], [False] * T])
CAUSAL = "causal"  # a forward argument: generate_square_subsequent_mask of the input length


def _layer(lib, kind, factory, **kwargs):
    return getattr(lib.nn, kind)(D, HEADS, FF, **kwargs, **factory)


def _stack(lib, kind, factory, **kwargs):
    """Two copies of a layer and a final norm."""
    layer = _layer(lib, f"Transformer{kind}Layer", factory, **kwargs)
    return getattr(lib.nn, f"Transformer{kind}")(layer, 2, lib.nn.LayerNorm(D, **factory))


# name: (module of a library given its factory arguments, inputs, forward arguments)
CASES = {
    "encoder layer, masks": (lambda lib, f: _layer(lib, "TransformerEncoderLayer", f), [SRC],
                             {"src_mask": CAUSAL, "src_key_padding_mask": SRC_PADDING}),
    "encoder layer, norm_first gelu batch_first": (
        lambda lib, f: _layer(lib, "TransformerEncoderLayer", f, norm_first=True,
                              activation="gelu", batch_first=True),
        [SRC.transpose(1, 0, 2)], {"src_key_padding_mask": SRC_PADDING}),
    "encoder layer, callable activation, unbatched": (
        lambda lib, f: _layer(lib, "TransformerEncoderLayer", f,
                              activation=lib.nn.GELU("tanh")),
        [SRC[:, 0]], {"src_key_padding_mask": SRC_PADDING[0]}),
    "decoder layer, masks": (lambda lib, f: _layer(lib, "TransformerDecoderLayer", f),
                             [TGT, SRC], {"tgt_mask": CAUSAL, "tgt_is_causal": True,
                                          "memory_key_padding_mask": SRC_PADDING}),
    "decoder layer, norm_first function activation": (
        lambda lib, f: _layer(lib, "TransformerDecoderLayer", f, norm_first=True,
                              activation=lib.nn.functional.silu),
        [TGT, SRC], {"tgt_key_padding_mask": TGT_PADDING}),
    "encoder of 2 with norm": (lambda lib, f: _stack(lib, "Encoder", f), [SRC],
                               {"mask": CAUSAL, "src_key_padding_mask": SRC_PADDING}),
    "decoder of 2 with norm": (lambda lib, f: _stack(lib, "Decoder", f, norm_first=True),
                               [TGT, SRC], {"tgt_mask": CAUSAL,
                                            "memory_key_padding_mask": SRC_PADDING}),
    "transformer": (lambda lib, f: lib.nn.Transformer(D, HEADS, 1, 1, FF, **f), [SRC, TGT],
                    {"tgt_mask": CAUSAL, "src_key_padding_mask": SRC_PADDING,
                     "tgt_key_padding_mask": TGT_PADDING,
                     "memory_key_padding_mask": SRC_PADDING}),
    "transformer, batch_first norm_first gelu": (
        lambda lib, f: lib.nn.Transformer(D, HEADS, 2, 1, FF, activation="gelu",
                                          batch_first=True, norm_first=True, **f),
        [SRC.transpose(1, 0, 2), TGT.transpose(1, 0, 2)], {"src_mask": CAUSAL}),
    "transformer, unbatched": (lambda lib, f: lib.nn.Transformer(D, HEADS, 1, 1, FF, **f),
                               [SRC[:, 0], TGT[:, 0]], {"tgt_mask": CAUSAL}),
}


def _mask(lib, value, length, backend):
    """A forward argument of `lib`: the causal mask of `length`, a bool array, or a flag."""
    if value is CAUSAL:
        if lib is torch:
            return torch.nn.Transformer.generate_square_subsequent_mask(length,
                                                                       dtype=torch.float64)
        return js.nn.Transformer.generate_square_subsequent_mask(
            length, dtype=np.float64 if backend == "numpy" else np.float32, backend=backend)
    if not isinstance(value, np.ndarray):
        return value
    return torch.tensor(value) if lib is torch else js.tensor(value, backend=backend)


def _forward_args(lib, forward_args, backend):
    """A causal mask is as long as the sequence it masks: the source for `src_mask` and
    `mask`, else the target."""
    return {k: _mask(lib, v, S if k in ("src_mask", "mask") else T, backend)
            for k, v in forward_args.items()}


def _pair(make, backend):
    """Torch's module in float64 and ours holding its parameters, both in eval mode (ours
    built on NumPy and moved: on JAX each eager draw would compile a kernel)."""
    theirs = make(torch, {"dtype": torch.float64}).eval()
    ours = make(js, {"dtype": np.float64 if backend == "numpy" else np.float32}).eval()
    ours.load_state_dict({k: v.numpy() for k, v in theirs.state_dict().items()})
    return ours.to(backend), theirs


def _our_results(ours, xs, forward_args, w):
    """The output and the gradients of its sum weighted by `w`, wrt the inputs and every
    parameter; on JAX as one program (`js.compile`), as the ops run eagerly elsewhere."""
    def step(*xs):
        y = ours(*xs, **forward_args)
        return y, js.grad((y * w).sum(), [*xs, *ours.parameters()])

    return (js.compile(step) if w.backend == "jax" else step)(*xs)


@pytest.mark.parametrize(("backend", "name"), [("numpy", name) for name in CASES]
                         + [pytest.param("jax", "transformer", marks=pytest.mark.outside_twin)])
def test_modules_match_torch(name, backend):
    make, inputs, forward_args = CASES[name]
    ours, theirs = _pair(make, backend)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert repr(ours) == repr(theirs)
    txs = [torch.tensor(x, requires_grad=True) for x in inputs]
    ty = theirs(*txs, **_forward_args(torch, forward_args, backend))
    w = RNG.standard_normal(tuple(ty.shape))
    y, grads = _our_results(ours, [tensor_of(x, backend) for x in inputs],
                            _forward_args(js, forward_args, backend), tensor_of(w, backend, False))
    close(y, ty.detach().numpy(), backend, "output")
    tgrads = torch.autograd.grad((ty * torch.tensor(w)).sum(), txs + list(theirs.parameters()))
    names = [f"input {i}" for i in range(len(inputs))] + [n for n, _ in ours.named_parameters()]
    for what, g, tg in zip(names, grads, tgrads, strict=True):
        close(g, tg.numpy(), backend, f"gradient of {what}")


def test_the_defaults_and_reprs_are_torchs():
    for make in (lambda lib: lib.nn.Transformer(D, HEADS),
                 lambda lib: lib.nn.TransformerDecoderLayer(D, HEADS, bias=False,
                                                            layer_norm_eps=1e-3)):
        ours, theirs = make(js), make(torch)
        assert repr(ours) == repr(theirs)
        assert [(n, tuple(p.shape)) for n, p in ours.named_parameters()] == [
            (n, tuple(p.shape)) for n, p in theirs.named_parameters()]
    layer = js.nn.TransformerEncoderLayer(D, HEADS)
    assert (layer.linear1.out_features, layer.dropout.p, layer.norm1.eps) == (2048, 0.1, 1e-5)
    assert layer.activation is js.nn.functional.relu and not layer.norm_first
    assert {p.dtype for p in js.nn.TransformerEncoderLayer(D, HEADS, dtype=np.float64)
            .parameters()} == {np.dtype(np.float64)}


def test_generate_square_subsequent_mask_is_torchs():
    expected = torch.nn.Transformer.generate_square_subsequent_mask(4).numpy()
    for backend in BACKENDS:
        mask = js.nn.Transformer.generate_square_subsequent_mask(4, backend=backend)
        assert mask.dtype == np.float32 and mask.backend == backend
        np.testing.assert_array_equal(arr(mask), expected)


def test_the_stacks_hold_independent_deep_copies():
    layer = js.nn.TransformerEncoderLayer(D, HEADS, FF, key=1)
    encoder = js.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
    assert (encoder.num_layers, encoder.enable_nested_tensor, encoder.norm) == (2, False, None)
    first, second = (dict(m.named_parameters()) for m in encoder.layers)
    for name, original in layer.named_parameters():
        assert first[name] is not original and second[name] is not first[name]
        np.testing.assert_array_equal(arr(first[name]), arr(original))
    with js.no_grad():
        first["linear1.weight"].fill_(0.0)
    assert arr(second["linear1.weight"]).any() and arr(layer.linear1.weight).any()
    clone = copy.deepcopy(layer)
    clone(js.tensor(SRC.astype(np.float32))).sum().backward()
    assert clone.linear2.weight.grad is not None and layer.linear2.weight.grad is None


def test_transformer_draws_its_matrices_by_xavier_uniform():
    js.manual_seed(0)
    model = js.nn.Transformer(D, HEADS, 1, 1, FF)
    for name, p in model.named_parameters():
        values = arr(p)
        if p.ndim > 1:  # fan_in + fan_out is the sum of a matrix's sizes
            bound = math.sqrt(6.0 / sum(p.shape))
            assert np.abs(values).max() <= bound and values.std() > bound / 3, name
        elif "linear" in name:  # a Linear's bias: PyTorch's U(-1/sqrt(fan_in), ..)
            fan_in = FF if "linear2" in name else D
            assert np.abs(values).max() <= 1 / math.sqrt(fan_in) and values.any(), name
        else:  # the attention's biases start at zeros, the norms' weights at ones
            assert (values == float(name.endswith(".weight"))).all(), name
    keyed = [arr(p) for p in js.nn.Transformer(D, HEADS, 1, 1, FF, key=3).parameters()]
    again = js.nn.Transformer(D, HEADS, 1, 1, FF, key=3).parameters()
    for a, b in zip(keyed, again, strict=True):
        np.testing.assert_array_equal(a, arr(b))


def test_dropout_acts_only_in_training():
    model = js.nn.Transformer(D, HEADS, 1, 1, FF, dropout=0.5, dtype=np.float64)
    src, tgt = tensor_of(SRC, "numpy", False), tensor_of(TGT, "numpy", False)
    js.manual_seed(1)
    trained = arr(model(src, tgt))
    js.manual_seed(1)
    np.testing.assert_array_equal(arr(model(src, tgt)), trained)
    evaluated = arr(model.eval()(src, tgt))
    assert not np.allclose(trained, evaluated)
    np.testing.assert_array_equal(arr(model(src, tgt)), evaluated)


def _refusals(lib):
    src, tgt = lib.zeros(S, BATCH, D), lib.zeros(T, BATCH, D)
    model = lib.nn.Transformer(D, HEADS, 1, 1, FF)
    return [
        (lambda: lib.nn.TransformerEncoderLayer(6, 4), AssertionError,
         "embed_dim must be divisible by num_heads"),
        (lambda: lib.nn.TransformerDecoderLayer(D, HEADS, activation="tanh"), RuntimeError,
         "activation should be relu/gelu, not tanh"),
        (lambda: model(src, tgt[:, :1]), RuntimeError,
         "the batch number of src and tgt must be equal"),
        (lambda: model(src, lib.zeros(T, BATCH, 6)), RuntimeError,
         "the feature number of src and tgt must be equal to d_model"),
        (lambda: model.encoder.layers[0](src, is_causal=True), RuntimeError,
         "Need attn_mask if specifying the is_causal hint"),
    ]


def test_errors_are_torchs():
    for lib in (torch, js):
        for call, error, phrase in _refusals(lib):
            with pytest.raises(error, match=phrase):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    call()
    with pytest.raises(RuntimeError, match=r"src of shape \(4, 2, 8\), tgt of shape \(3, 1, 8\)"):
        js.nn.Transformer(D, HEADS, 1, 1, FF)(js.zeros(S, BATCH, D), js.zeros(T, 1, D))
    with pytest.raises(TypeError, match="activation should be 'relu', 'gelu' or a callable"):
        js.nn.TransformerEncoderLayer(D, HEADS, activation=3)
