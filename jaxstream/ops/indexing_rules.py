"""The op table of the indexing ops with PyTorch's names: index_select, scatter_add, the
values of sort and topk, and the (not differentiable) orders argsort and topk's indices.
gather is `rules.TAKE_ALONG`.

Same conventions as `rules.py`. Each selection reads `a[index]` with an index built on the
host around the indices (`index` is a per-call param), so its vjp is `rules.INDEX_ADD` of
the gradient at that index, whose own vjp reads the gradient there again: gradients to
any order, repeated indices adding up.
"""

from __future__ import annotations

from typing import Any

from ..tensor import Tensor
from .dispatch import apply
from .opdef import OpContext, OpDef
from .rules import INDEX, INDEX_ADD, TAKE_ALONG, WHERE, XP, same


# ------------------------------------------------------------------ kernels
def _scatter_add(backend: Any, a: Any, src: Any, index: Any, extent: tuple) -> Any:
    """`a` plus, at each of `index`, the element of `src` in that place (`src` cut to the
    index's `extent` first: what lies outside it is not added)."""
    return a + backend.scatter_add(a.shape, a.dtype, index, src[extent])


def _top_indices(xp: Any, a: Any, k: int, axis: int, largest: bool) -> Any:
    """Where the `k` largest (or smallest) values along `axis` are, in order; ties in their
    order along `axis` and NaN largest, as PyTorch's sort puts them."""
    order = xp.argsort(a, axis=axis, descending=largest, stable=True)
    return order[(slice(None),) * axis + (slice(0, k),)]


# ------------------------------------------------------------------ vjps
def _dscatter_add_src(g: Tensor, ctx: OpContext) -> Tensor:
    """The gradient at each index, placed where `src`'s element came from (zero where `src`
    reaches past the index)."""
    picked = apply(INDEX, g, index=ctx.params["index"])
    if picked.shape == ctx.shapes[1]:
        return picked
    return apply(INDEX_ADD, picked, index=ctx.params["extent"], shape=ctx.shapes[1])


# ------------------------------------------------------------------ the table
# fmt: off
# The selections: TAKE_ALONG's kernel (`a[index]`) and vjp under PyTorch's node names.
INDEX_SELECT = OpDef("index_select", "IndexSelectBackward0", TAKE_ALONG.kernel, *TAKE_ALONG.grads,
                     per_call_params=True)
SORT = OpDef("sort", "SortBackward0", TAKE_ALONG.kernel, *TAKE_ALONG.grads, per_call_params=True)
TOPK = OpDef("topk", "TopkBackward0", TAKE_ALONG.kernel, *TAKE_ALONG.grads, per_call_params=True)
SCATTER_ADD = OpDef("scatter_add", "ScatterAddBackward0", _scatter_add, same, _dscatter_add_src,
                    backend_kernel=True, per_call_params=True)
# fmt: on

# Not differentiable: no vjp, no node.
ARGSORT = OpDef("argsort", None, XP.argsort)
TOP_INDICES = OpDef("topk", None, _top_indices)


# ------------------------------------------------------------------ embedding
# An embedding reads rows of its weight at the indices, its second input (an integer tensor,
# so that JAX compiles the lookup once per shape). Its vjp adds the gradient's rows up at
# the indices (`EMBEDDING_BACKWARD`), none at the padding row; that op's own vjp reads rows.
def _embedding(xp: Any, weight: Any, indices: Any, padding_idx: int | None) -> Any:
    return weight[indices]


def _embedding_backward(backend: Any, g: Any, indices: Any, num_weights: int) -> Any:
    return backend.scatter_add((num_weights, g.shape[-1]), g.dtype, indices, g)


def _dembedding(g: Tensor, ctx: OpContext) -> Tensor:
    indices, padding_idx = ctx.inputs[1], ctx.params["padding_idx"]
    if padding_idx is not None:
        g = apply(WHERE, (indices != padding_idx).unsqueeze(-1), g, 0.0)
    return apply(EMBEDDING_BACKWARD, g, indices, num_weights=ctx.shapes[0][0])


# fmt: off
EMBEDDING = OpDef("embedding", "EmbeddingBackward0", _embedding, _dembedding, None,
                  save_inputs=(1,))
EMBEDDING_BACKWARD = OpDef(
    "embedding_backward", "EmbeddingDenseBackwardBackward0", _embedding_backward,
    lambda g, ctx: apply(EMBEDDING, g, ctx.inputs[1], padding_idx=None), None, save_inputs=(1,),
    backend_kernel=True,
)
# fmt: on
