"""scaled_dot_product_attention and MultiheadAttention against torch: values, first and
second gradients, masks (bool, float, causal, rows that attend to nothing), grouped
heads, dropout from jaxstream's generator, torch's parameter names and state_dicts, and
the errors, on both backends."""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers import arr
from ops_oracle import check_against_torch, close, tensor_of, uniform_values

import jaxstream as js
import jaxstream.nn.functional as F

pytestmark = pytest.mark.oracle

QKV = [(2, 2, 3, 4), (2, 2, 5, 4), (2, 2, 5, 6)]
RNG = np.random.default_rng(0)
BOOL_MASK = RNG.uniform(size=(3, 5)) > 0.4
BOOL_MASK[1] = False  # a query that attends to nothing
FLOAT_MASK = RNG.standard_normal((3, 5))
FLOAT_MASK[2] = -np.inf


def _mask(values, backend, torch=None):
    if torch is not None:
        return torch.tensor(values)
    return values.astype(np.float32) if backend == "jax" and values.dtype != bool else values


# name: (shapes of q, k, v; keyword arguments, with masks as NumPy arrays)
SDPA_CASES = {
    "plain": (QKV, {}),
    "bool mask": (QKV, {"attn_mask": BOOL_MASK}),
    "float mask and scale": (QKV, {"attn_mask": FLOAT_MASK, "scale": 0.3}),
    "causal, L < S": (QKV, {"is_causal": True}),
    "grouped heads": ([(2, 4, 3, 4), (2, 2, 5, 4), (2, 1, 5, 6)], {"enable_gqa": True}),
    "broadcast heads": ([(2, 2, 3, 4), (2, 1, 5, 4), (1, 5, 6)], {}),
    "no batch": ([(3, 4), (5, 4), (5, 6)], {"attn_mask": BOOL_MASK[0]}),
}


@pytest.mark.parametrize("backend, name", [("numpy", n) for n in SDPA_CASES]
                         + [("jax", "bool mask")])
def test_sdpa_matches_torch(torch, backend, name):
    shapes, kwargs = SDPA_CASES[name]

    def call(functional, masks_of, q, k, v):
        given = {k: masks_of(a) if isinstance(a, np.ndarray) else a for k, a in kwargs.items()}
        return functional.scaled_dot_product_attention(q, k, v, **given)

    check_against_torch(
        torch, lambda *a: call(F, lambda m: _mask(m, backend), *a),
        lambda *a: call(torch.nn.functional, lambda m: _mask(m, backend, torch), *a),
        uniform_values(1, *shapes), backend, compiled=backend == "jax")


def test_a_query_that_attends_to_nothing_gets_zeros_and_no_nan(torch):
    q, k, v = (tensor_of(a, "numpy") for a in uniform_values(2, *QKV))
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=BOOL_MASK)
    assert not arr(out)[:, :, 1].any()
    grads = js.grad((out * out).sum(), [q, k, v])
    assert all(np.isfinite(arr(g)).all() for g in grads)
    assert not arr(grads[0])[:, :, 1].any()


def test_sdpa_dropout_draws_from_jaxstreams_generator():
    q, k, v = (tensor_of(a, "numpy", requires_grad=False) for a in uniform_values(3, *QKV))
    js.manual_seed(5)
    out = F.scaled_dot_product_attention(q, k, v, dropout_p=0.4)
    again = F.scaled_dot_product_attention(q, k, v, dropout_p=0.4)
    js.manual_seed(5)
    weights = js.dropout(js.softmax(q @ k.transpose(-2, -1) / math.sqrt(4), -1), 0.4)
    np.testing.assert_allclose(arr(out), arr(weights @ v), rtol=1e-12)
    assert not np.allclose(arr(out), arr(again))


@pytest.mark.parametrize("call, error, phrase", [
    (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, BOOL_MASK, is_causal=True),
     RuntimeError, "Explicit attn_mask should not be set when is_causal=True"),
    (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, BOOL_MASK.astype(np.int64)),
     RuntimeError, "Expected attn_mask dtype to be bool or float .* int64"),
    (lambda q, k, v: F.scaled_dot_product_attention(q, k[:, :1].expand(2, 3, 5, 4), v,
                                                    enable_gqa=True),
     RuntimeError, "Number of heads in key and value must divide the number of heads"),
    (lambda q, k, v: F.scaled_dot_product_attention(q, v, v), RuntimeError,
     r"expected query \(..., L, E\), key \(..., S, E\)"),
    (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, dropout_p=1.5), ValueError,
     "dropout probability has to be between 0 and 1, but got 1.5"),
], ids=["mask and causal", "integer mask", "heads", "shapes", "dropout_p"])
def test_sdpa_errors_say_what_is_wrong(call, error, phrase):
    with pytest.raises(error, match=phrase):
        call(*(tensor_of(a, "numpy") for a in uniform_values(4, *QKV)))


# ------------------------------------------------------------------ MultiheadAttention
def _attention_pair(torch, backend, **kwargs):
    """Our module with the weights of torch's (copied through the state_dict)."""
    theirs = torch.nn.MultiheadAttention(8, 2, **kwargs).double().eval()
    dtype = np.float64 if backend == "numpy" else np.float32
    ours = js.nn.MultiheadAttention(8, 2, dtype=dtype, **kwargs).eval()
    ours.load_state_dict({name: js.tensor(value.numpy().astype(dtype))
                          for name, value in theirs.state_dict().items()})
    return ours.to(backend), theirs


def _inputs(shapes, seed=5):
    return uniform_values(seed, *shapes)


PADDING = np.array([[False, True, False, False, False], [False] * 5])
# MultiheadAttention's masks leave every query some key: where none is left, torch's module
# gives NaN (its softmax of -inf everywhere) and ours zeros, as torch's sdpa.
MHA_FLOAT_MASK = np.where(np.isfinite(FLOAT_MASK), FLOAT_MASK, -1.0)
MHA_BOOL_MASK = np.triu(np.ones((3, 5), bool), 2)
# name: (module arguments, shapes of query, key, value, forward arguments)
MHA_CASES = {
    "plain": ({}, [(3, 2, 8), (5, 2, 8), (5, 2, 8)], {}),
    "masks": ({}, [(3, 2, 8), (5, 2, 8), (5, 2, 8)],
              {"key_padding_mask": PADDING, "attn_mask": MHA_FLOAT_MASK}),
    "bool masks per head": ({"batch_first": True}, [(2, 3, 8), (2, 5, 8), (2, 5, 8)],
                            {"key_padding_mask": PADDING, "average_attn_weights": False,
                             "attn_mask": np.broadcast_to(MHA_BOOL_MASK, (4, 3, 5)).copy()}),
    "kdim vdim, no bias": ({"kdim": 6, "vdim": 4, "bias": False},
                           [(3, 2, 8), (5, 2, 6), (5, 2, 4)], {"need_weights": False}),
    "unbatched, causal hint": ({}, [(3, 8), (3, 8), (3, 8)],
                               {"attn_mask": np.triu(np.ones((3, 3), bool), 1),
                                "is_causal": True}),
}


@pytest.mark.filterwarnings("ignore:Support for mismatched key_padding_mask")  # torch's
@pytest.mark.parametrize("backend, name", [("numpy", n) for n in MHA_CASES]
                         + [("jax", "masks")])
def test_multihead_attention_matches_torch(torch, backend, name):
    module_args, shapes, forward_args = MHA_CASES[name]
    ours, theirs = _attention_pair(torch, backend, **module_args)
    values = _inputs(shapes)
    inputs = [tensor_of(a, backend) for a in values]
    t_inputs = [torch.tensor(a, requires_grad=True) for a in values]
    masks = {k: _mask(v, backend) for k, v in forward_args.items() if k != "is_causal"}

    def step(*inputs):
        out, weights = ours(*inputs, **masks, is_causal="is_causal" in forward_args)
        (out * out).sum().backward()
        return out, weights

    # On JAX one program (`js.compile`): the ops it is made of run eagerly in their own tests.
    out, weights = (js.compile(step) if backend == "jax" else step)(*inputs)
    t_out, t_weights = theirs(*t_inputs, **{k: torch.tensor(v) if isinstance(v, np.ndarray)
                                            else v for k, v in forward_args.items()})
    close(out, t_out.detach().numpy(), backend, "output")
    if t_weights is None:
        assert weights is None
    else:
        close(weights, t_weights.detach().numpy(), backend, "weights")
    (t_out * t_out).sum().backward()
    for (param, p), q in zip(ours.named_parameters(), theirs.parameters(), strict=True):
        close(p.grad, q.grad.numpy(), backend, f"gradient of {param}")
    for x, tx in zip(inputs, t_inputs, strict=True):
        close(x.grad, tx.grad.numpy(), backend, "input gradient")


def test_multihead_attention_has_torchs_parameters_and_init(torch):
    for kwargs in ({}, {"kdim": 6, "vdim": 4}, {"bias": False}):
        ours, theirs = js.nn.MultiheadAttention(8, 2, **kwargs), torch.nn.MultiheadAttention(
            8, 2, **kwargs)
        assert list(ours.state_dict()) == list(theirs.state_dict()), kwargs
        assert [tuple(p.shape) for p in ours.parameters()] == [
            tuple(p.shape) for p in theirs.parameters()]
    js.manual_seed(0)
    ours = js.nn.MultiheadAttention(64, 4)
    bound = math.sqrt(6 / (64 + 3 * 64))
    weight = arr(ours.in_proj_weight)
    assert np.abs(weight).max() <= bound and weight.std() > bound / 2
    assert not arr(ours.in_proj_bias).any() and not arr(ours.out_proj.bias).any()
    keyed = [arr(p) for p in js.nn.MultiheadAttention(8, 2, key=3).parameters()]
    for a, b in zip(keyed, js.nn.MultiheadAttention(8, 2, key=3).parameters(), strict=True):
        np.testing.assert_array_equal(a, arr(b))


def test_multihead_attention_dropout_only_in_training():
    module = js.nn.MultiheadAttention(8, 2, dropout=0.5, dtype="float64")
    x = tensor_of(_inputs([(3, 2, 8)])[0], "numpy", requires_grad=False)
    js.manual_seed(1)
    first = arr(module(x, x, x)[1])
    js.manual_seed(1)
    np.testing.assert_array_equal(arr(module(x, x, x)[1]), first)
    module.eval()
    evaluated = arr(module(x, x, x)[1])
    np.testing.assert_allclose(evaluated.sum(-1), 1.0)
    assert not np.allclose(first, evaluated)


@pytest.mark.parametrize("call, error, phrase", [
    (lambda: js.nn.MultiheadAttention(6, 4), AssertionError,
     "embed_dim must be divisible by num_heads"),
    (lambda: js.nn.MultiheadAttention(8, 2, add_bias_kv=True), NotImplementedError,
     "add_bias_kv and add_zero_attn are not supported"),
    (lambda: js.nn.MultiheadAttention(8, 2)(js.ones(3, 2, 8), js.ones(3, 2, 8),
                                            js.ones(3, 2, 8), is_causal=True),
     RuntimeError, "Need attn_mask if specifying the is_causal hint"),
    (lambda: js.nn.MultiheadAttention(8, 2)(js.ones(3, 2, 6), js.ones(3, 2, 6),
                                            js.ones(3, 2, 6)),
     AssertionError, "was expecting embedding dimension of 8, but got 6"),
], ids=["heads", "bias_kv", "causal hint", "embed dim"])
def test_multihead_attention_errors_say_what_is_wrong(call, error, phrase):
    with pytest.raises(error, match=phrase):
        call()
