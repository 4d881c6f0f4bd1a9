"""`validate_outputs`: the gradients a node returns, checked against the inputs they flow into."""

from __future__ import annotations

from typing import Any

from ..ops.reductions import sum_to
from ..tensor import Tensor, mismatch
from .node import Node


def validate_outputs(edges: tuple | list, grads: list, fn: Node | None) -> list:
    """Check (and fix up, in place) the gradients `fn` returned for its `edges`.

    `fn` is None for the seed gradients of a backward. The engine's loop checks a
    plain node's gradients as it routes them and calls `validated` for those that
    do not fit as they are (Note [A plain node in one frame] in engine.py).
    """
    if len(grads) != len(edges):
        raise RuntimeError(
            f"{_who(fn)} invalid number of gradients - expected {len(edges)}, but got "
            f"{len(grads)}"
        )
    for i, grad in enumerate(grads):
        next_fn, input_nr = edges[i]
        if next_fn is not None and grad is not None:
            checked = validated(grad, next_fn, input_nr, i, fn)
            if checked is not grad:  # written only when fixed up, as the list may be a tuple
                grads[i] = checked
    return grads


def validated(grad: Any, next_fn: Node, input_nr: int, i: int, fn: Node | None) -> Tensor:
    """Gradient `i` of `fn`, fit for input `input_nr` of `next_fn`, or an error naming `fn`.

    A broadcast gradient is summed back to the input's shape and a gradient of
    another floating dtype is cast, as PyTorch does; anything else is an error.
    """
    meta = next_fn.input_metadata[input_nr]
    if type(grad) is not Tensor:
        raise TypeError(
            f"{_who(fn)} invalid gradient at index {i} - expected a Tensor, got "
            f"{type(grad).__name__}"
        )
    array = grad.array
    if array.shape != meta.shape:
        if not meta.is_expandable_to(array.shape):
            raise RuntimeError(
                f"{_who(fn)} invalid gradient at index {i} - got shape {tuple(grad.shape)} "
                f"but expected shape compatible with {meta.shape} (the input of "
                f"{next_fn.name()})"
            )
        grad = sum_to(grad, meta.shape)
        array = grad.array
    if grad.array_backend is not meta.array_backend or (
        grad.device is not meta.device and grad.device != meta.device
    ):
        problem = mismatch(grad, meta, shape=False)
        raise RuntimeError(f"{_who(fn)} invalid gradient at index {i} - {problem}")
    dtype = array.dtype
    if dtype is not meta.dtype and dtype != meta.dtype:
        return grad.astype(meta.dtype)
    return grad


def _who(fn: Node | None) -> str:
    """How an error names the source of bad gradients (built only when one is raised)."""
    return f"Function {fn.name()} returned an" if fn is not None else "got an"
