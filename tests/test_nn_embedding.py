"""embedding and embedding_bag against torch: values, first and second gradients (where
torch has them), padding, bags of every form, node names and errors, on both backends."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import arr
from ops_oracle import check_against_torch, close, tensor_of, uniform_values

import jaxstream as js
import jaxstream.nn.functional as F

pytestmark = pytest.mark.oracle

BATCH = np.array([[0, 1, 2], [2, 2, 2], [4, 1, 1]])  # 2-D: a bag per row
FLAT, OFFSETS = np.array([1, 2, 4, 0, 3, 3]), np.array([0, 2, 2, 5])  # an empty bag
TABLE = uniform_values(0, (5, 3))


def _indices(values, backend):
    return js.tensor(values.astype(np.int64 if backend == "numpy" else np.int32),
                     backend=backend)


# On NumPy here; on JAX in `test_embeddings_on_jax_in_one_program`.
@pytest.mark.parametrize("padding_idx", [None, 2, -1])
def test_embedding_matches_torch(torch, padding_idx):
    check_against_torch(
        torch, lambda w: F.embedding(_indices(BATCH, "numpy"), w, padding_idx) ** 2,
        lambda w: torch.nn.functional.embedding(torch.tensor(BATCH), w, padding_idx) ** 2,
        TABLE, "numpy")


def test_embedding_nodes_are_torchs(torch):
    weight, t_weight = tensor_of(TABLE[0], "numpy"), torch.tensor(TABLE[0], requires_grad=True)
    y, ty = F.embedding(js.tensor(BATCH), weight), torch.nn.functional.embedding(
        torch.tensor(BATCH), t_weight)
    assert y.grad_fn.name() == ty.grad_fn.name() == "EmbeddingBackward0"
    (g,) = js.grad((y * y).sum(), [weight], create_graph=True)
    (tg,) = torch.autograd.grad((ty * ty).sum(), [t_weight], create_graph=True)
    assert g.grad_fn.name() == tg.grad_fn.name() == "EmbeddingDenseBackwardBackward0"


# name: (the arguments after the weight, as NumPy arrays where they are tensors)
BAGS = {
    "2-D": (BATCH, {}),
    "offsets": (FLAT, {"offsets": OFFSETS}),
    "last offset": (FLAT, {"offsets": OFFSETS, "include_last_offset": True}),
}


def _bag(functional, as_tensor, w, form, mode, padding_idx):
    """embedding_bag of the bags `form` names; our offsets are a NumPy array (host values,
    constants under `js.compile` too)."""
    indices, kwargs = BAGS[form]
    given = {k: as_tensor(v) if functional is not F and isinstance(v, np.ndarray) else v
             for k, v in kwargs.items()}
    return functional.embedding_bag(as_tensor(indices), w, mode=mode, padding_idx=padding_idx,
                                    **given)


@pytest.mark.parametrize("form", list(BAGS))
@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("padding_idx", [None, 2])
def test_embedding_bag_matches_torch(torch, form, mode, padding_idx):
    check_against_torch(
        torch, lambda w: _bag(F, lambda a: _indices(a, "numpy"), w, form, mode, padding_idx),
        lambda w: _bag(torch.nn.functional, torch.tensor, w, form, mode, padding_idx), TABLE,
        "numpy")


def test_embeddings_on_jax_in_one_program(torch):
    """embedding and embedding_bag (each form) on JAX, to the second order, compiled as one
    program (each new shape would compile every op again)."""

    def pieces(functional, as_tensor, w):
        bags = [_bag(functional, as_tensor, w, form, mode, 2)
                for form, mode in (("2-D", "sum"), ("offsets", "mean"), ("last offset", "max"))]
        return [t.reshape(-1) for t in [functional.embedding(as_tensor(BATCH), w, 2) ** 2, *bags]]

    check_against_torch(
        torch, lambda w: js.cat(pieces(F, lambda a: _indices(a, "jax"), w)),
        lambda w: torch.cat(pieces(torch.nn.functional, torch.tensor, w)), TABLE, "jax",
        compiled=True)


@pytest.mark.parametrize("backend", ["numpy", "jax"])
def test_embedding_bag_per_sample_weights_match_torch(torch, backend):
    """To the first order: torch has no second derivative in the per-sample weights. Offsets
    as a tensor on NumPy; on JAX, as host values inside one compiled step."""
    weights = uniform_values(1, (6,))[0]
    w, p = tensor_of(TABLE[0], backend), tensor_of(weights, backend)
    tw, tp = (torch.tensor(v, requires_grad=True) for v in (TABLE[0], weights))
    offsets = OFFSETS if backend == "jax" else _indices(OFFSETS, backend)

    def step(w, p):
        y = F.embedding_bag(_indices(FLAT, backend), w, offsets, mode="sum",
                            per_sample_weights=p, padding_idx=3)
        return y, js.grad((y * y).sum(), [w, p])

    y, grads = (js.compile(step) if backend == "jax" else step)(w, p)
    ty = torch.nn.functional.embedding_bag(torch.tensor(FLAT), tw, torch.tensor(OFFSETS),
                                           mode="sum", per_sample_weights=tp, padding_idx=3)
    close(y, ty.detach().numpy(), backend, "value")
    for g, tg in zip(grads, torch.autograd.grad((ty * ty).sum(), [tw, tp]), strict=True):
        close(g, tg.numpy(), backend, "gradient")


def test_embedding_runs_eagerly_on_jax(torch):
    """The lookup and its backward (a scatter-add, not compiled) outside `js.compile`."""
    w, tw = tensor_of(TABLE[0], "jax"), torch.tensor(TABLE[0], requires_grad=True)
    y = F.embedding(_indices(BATCH, "jax"), w, padding_idx=2)
    ty = torch.nn.functional.embedding(torch.tensor(BATCH), tw, padding_idx=2)
    (y * y).sum().backward()
    (ty * ty).sum().backward()
    close(y, ty.detach().numpy(), "jax", "value")
    close(w.grad, tw.grad.numpy(), "jax", "gradient")


def test_the_embedding_module_is_torchs_with_its_padding_row(torch):
    ours, theirs = js.nn.Embedding(5, 3, padding_idx=-2), torch.nn.Embedding(5, 3, padding_idx=-2)
    assert repr(ours) == repr(theirs) and ours.padding_idx == theirs.padding_idx == 3
    assert not arr(ours.weight)[3].any()
    theirs.weight.data = torch.tensor(arr(ours.weight))
    indices = np.array([[0, 3, 2], [3, 3, 1]])
    y, ty = ours(indices), theirs(torch.tensor(indices))
    assert y.grad_fn.name() == ty.grad_fn.name() == "EmbeddingBackward0"
    (y * y).sum().backward()
    (ty * ty).sum().backward()
    np.testing.assert_allclose(arr(ours.weight.grad), theirs.weight.grad.numpy(), rtol=1e-6)
    assert not arr(ours.weight.grad)[3].any()


@pytest.mark.parametrize("call, error, phrase", [
    (lambda w: F.embedding(js.tensor([5]), w), IndexError, "index out of range in self"),
    (lambda w: F.embedding(js.tensor([1.0]), w), RuntimeError,
     "Expected dtype Long, Int for index"),
    (lambda w: F.embedding(js.tensor([1]), w, padding_idx=5), AssertionError,
     "Padding_idx must be within num_embeddings"),
    (lambda w: F.embedding(js.tensor([1]), w[0]), RuntimeError, "'weight' must be 2-D"),
    (lambda w: F.embedding(js.tensor([1]), w, max_norm=1.0), NotImplementedError,
     "max_norm= and scale_grad_by_freq= are not supported"),
    (lambda w: F.embedding_bag(js.tensor(BATCH), w, js.tensor([0])), ValueError,
     "if input is 2D, then offsets has to be None"),
    (lambda w: F.embedding_bag(js.tensor(FLAT), w), ValueError,
     "offsets has to be a 1D Tensor but got None"),
    (lambda w: F.embedding_bag(js.tensor(FLAT), w, js.tensor([1, 2])), RuntimeError,
     "offsets\\[0\\] has to be 0"),
    (lambda w: F.embedding_bag(js.tensor(FLAT), w, js.tensor([0, 7])), RuntimeError,
     "offsets\\[-1\\] can not be greater than input's length 6 but got offsets\\[-1\\] of 7"),
    (lambda w: F.embedding_bag(js.tensor(FLAT), w, js.tensor([0, 4, 2])), RuntimeError,
     "offsets must not decrease"),
    (lambda w: F.embedding_bag(js.tensor(FLAT), w, [0.0, 2.0]), RuntimeError,
     "expected integer offsets, got float64"),
    (lambda w: F.embedding_bag(js.tensor(BATCH), w, mode="min"), ValueError,
     "mode has to be one of sum, mean or max"),
    (lambda w: F.embedding_bag(js.tensor(BATCH), w, per_sample_weights=js.ones(3, 3)),
     NotImplementedError, "per_sample_weights is only supported for mode='sum'"),
    (lambda w: F.embedding_bag(js.tensor(BATCH), w, mode="sum", per_sample_weights=js.ones(3)),
     ValueError, r"must have the same shape as the input \(\(3, 3\)\)"),
], ids=["bounds", "float indices", "padding", "1-D weight", "max_norm", "2-D offsets",
        "no offsets", "first offset", "last offset", "decreasing", "float offsets", "mode",
        "weights mode",
        "weights shape"])
def test_embedding_errors_say_what_is_wrong(call, error, phrase):
    with pytest.raises(error, match=phrase):
        call(js.tensor(TABLE[0], dtype="float32"))
