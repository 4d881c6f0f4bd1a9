"""`pad` with PyTorch's arguments, modes, checks and node names (resampling_rules.py).

The pad tuple is PyTorch's: (lo, hi) pairs from the last axis backwards, a negative width
crops. "constant" pads any trailing axes with `value` (`ConstantPadNdBackward0`); the
other modes pad the last 1 to 3 axes of an input with at most one leading axis besides
the batch, each output element a copy of an input element (Note [Resampling as taps
along axes]): "reflect" mirrors about the edge element, "replicate" repeats it,
"circular" wraps around. PyTorch builds the circular pad from slice copies, so its node
is `CopySlices` there and here.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..tensor import Tensor
from . import resampling_rules as R
from .dispatch import apply

_MODES = ("constant", "reflect", "replicate", "circular")
_NODES = {"reflect": "ReflectionPad{}DBackward0", "replicate": "ReplicationPad{}DBackward0",
          "circular": "CopySlices"}


def _sources(mode: str, n: int, lo: int, hi: int) -> tuple:
    """The input position each output position of a padded axis of length `n` copies."""
    if mode == "circular":  # wraps around what the negative widths leave, as PyTorch's
        start, stop = max(-lo, 0), n - max(-hi, 0)
        at = start + np.mod(np.arange(-max(lo, 0), stop - start + max(hi, 0)), stop - start)
    elif mode == "reflect":
        at = np.abs(np.arange(-lo, n + hi))
        at = np.where(at >= n, 2 * (n - 1) - at, at)
    else:
        at = np.clip(np.arange(-lo, n + hi), 0, n - 1)
    return tuple(at.tolist())


def _check_copy_mode(mode: str, x: Tensor, widths: list) -> None:
    """PyTorch's checks of a reflect, replicate or circular pad, with its messages."""
    axes = len(widths)
    if not 1 <= axes <= 3 or x.ndim not in (axes + 1, axes + 2):
        raise NotImplementedError(
            f"Padding size {2 * axes} is not supported for {x.ndim}D input tensor (pad mode "
            f"{mode!r}, input of size {list(x.shape)}). Supported combinations for non-constant "
            f"padding: 2D or 3D input: padding size = 2 (pads last dimension); 3D or 4D input: "
            f"padding size = 4 (pads last 2 dimensions); 4D or 5D input: padding size = 6 (pads "
            f"last 3 dimensions)"
        )
    for axis, (lo, hi) in zip(range(x.ndim - 1, -1, -1), widths, strict=False):
        n = x.shape[axis]
        if n == 0 or (mode == "reflect" and max(lo, hi) >= n):
            raise RuntimeError(
                f"Argument #4: Padding size should be less than the corresponding input "
                f"dimension, but got: padding ({lo}, {hi}) at dimension {axis} of input "
                f"{list(x.shape)} (pad mode {mode!r})"
            )
        if mode == "circular" and max(lo, hi) > n:
            raise RuntimeError(
                f"Padding value causes wrapping around more than once (padding ({lo}, {hi}) at "
                f"dimension {axis} of input {list(x.shape)}, circular pad)"
            )


def _widths(x: Tensor, pad: Sequence[int]) -> list:
    """(lo, hi) per padded axis, the last axis first, as given."""
    if any(not isinstance(p, int | np.integer) or isinstance(p, bool) for p in pad):
        raise TypeError(f"pad(): argument 'pad' must be tuple of ints, but got {tuple(pad)!r}")
    if len(pad) % 2:
        raise RuntimeError(f"Padding length must be divisible by 2 (got pad={tuple(pad)})")
    if len(pad) // 2 > x.ndim:
        raise RuntimeError(
            f"Padding length should be less than or equal to two times the input dimension but "
            f"got padding length {len(pad)} and input of dimension {x.ndim}"
        )
    return [(int(pad[i]), int(pad[i + 1])) for i in range(0, len(pad), 2)]


def pad(input: Tensor, pad: Sequence[int], mode: str = "constant",  # noqa: A002
        value: float | None = None) -> Tensor:
    """`input` padded at both ends of its last `len(pad) // 2` axes, PyTorch's `F.pad`."""
    if mode not in _MODES:
        raise NotImplementedError(f"Unrecognised padding mode {mode} (use one of {_MODES})")
    widths = _widths(input, pad)
    if mode == "constant":
        full = [(0, 0)] * (input.ndim - len(widths)) + widths[::-1]
        for axis, ((lo, hi), n) in enumerate(zip(full, input.shape, strict=True)):
            if n + min(lo, 0) + min(hi, 0) < 0:  # crops more than there is
                raise RuntimeError(
                    f"The input size {n}, plus negative padding {lo} and {hi} resulted in a "
                    f"negative output size, which is invalid. Check dimension {axis} of your "
                    f"input (of size {list(input.shape)})."
                )
        return apply(R.CONSTANT_PAD, input, widths=tuple(full),
                     value=0.0 if value is None else value)
    if value is not None and value != 0:
        raise RuntimeError(f'Padding mode "{mode}" doesn\'t take in value argument')
    _check_copy_mode(mode, input, widths)
    taps = tuple((input.ndim - 1 - i, ((_sources(mode, input.shape[-1 - i], lo, hi), None),))
                 for i, (lo, hi) in enumerate(widths))
    return apply(R.RESAMPLE, input, taps=taps, node=_NODES[mode].format(len(widths)))
