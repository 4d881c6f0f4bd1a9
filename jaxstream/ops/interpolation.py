"""`interpolate` with PyTorch's arguments, checks and node names: the modes "nearest",
"nearest-exact", "linear" (3-d input), "bilinear" (4-d) and "trilinear" (5-d), each a
resampling along the spatial axes (Note [Resampling as taps along axes] in
resampling_rules.py).

Where each output position reads is PyTorch's to the rounding: the source positions are
computed in float64, nearest's rounded to float32 before their floor (as PyTorch's kernels
round them); a `scale_factor` sets the step itself (1 / scale_factor) unless
`recompute_scale_factor`, else it is the ratio of the sizes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..tensor import Tensor
from . import resampling_rules as R
from .dispatch import apply

_LINEAR = {"linear": 1, "bilinear": 2, "trilinear": 3}
_MODES = ("nearest", "nearest-exact", *_LINEAR)
_NODES = {"nearest": "UpsampleNearest{}DBackward0",
          "nearest-exact": "UpsampleNearestExact{}DBackward0",
          "linear": "UpsampleLinear1DBackward0", "bilinear": "UpsampleBilinear2DBackward0",
          "trilinear": "UpsampleTrilinear3DBackward0"}


def _nearest(mode: str, n: int, m: int, scale: float | None) -> tuple:
    """The input position each of `m` outputs copies: the floor of its source position,
    rounded to float32 first, as PyTorch's kernels round it."""
    step = 1.0 / scale if scale else n / m
    source = (np.arange(m) + (0.5 if mode == "nearest-exact" else 0.0)) * step
    return tuple(np.minimum(np.floor(source.astype(np.float32)).astype(np.int64), n - 1).tolist())


def _linear(n: int, m: int, scale: float | None, align_corners: bool) -> tuple:
    """The two taps (the neighbours below and above, with their weights) of each of `m`
    outputs; an output of the input's size copies it."""
    at = np.arange(m, dtype=np.float64)
    if m == n:
        source = at
    elif align_corners:
        source = at * ((n - 1) / (m - 1) if m > 1 else 0.0)
    else:
        step = 1.0 / scale if scale else n / m
        source = np.maximum((at + 0.5) * step - 0.5, 0.0)
    below = np.minimum(np.floor(source).astype(np.int64), n - 1)
    above = np.where(below < n - 1, below + 1, below)
    share = np.clip(source - below, 0.0, 1.0)
    return ((tuple(below.tolist()), tuple((1.0 - share).tolist())),
            (tuple(above.tolist()), tuple(share.tolist())))


def _check_mode(x: Tensor, mode: str, align_corners: bool | None, antialias: bool) -> int:
    """The number of spatial axes, after PyTorch's checks of the mode."""
    if mode not in _MODES:
        raise NotImplementedError(f"interpolate: mode {mode!r} is not supported (modes: "
                                  f"{' | '.join(_MODES)}); bicubic and area are not there yet")
    if antialias:
        raise NotImplementedError("interpolate: antialias=True is not supported yet; "
                                  "interpolate without it, or smooth the input first")
    if align_corners is not None and mode not in _LINEAR:
        raise ValueError("align_corners option can only be set with the interpolating modes: "
                         "linear | bilinear | trilinear")
    if x.ndim not in (3, 4, 5):
        raise NotImplementedError(f"Input Error: Only 3D, 4D and 5D input Tensors supported "
                                  f"(got {x.ndim}D) for the modes: {' | '.join(_MODES)} (got "
                                  f"{mode})")
    if mode in _LINEAR and x.ndim != _LINEAR[mode] + 2:
        raise NotImplementedError(f"Got {x.ndim}D input, but {mode} mode needs "
                                  f"{_LINEAR[mode] + 2}D input")
    return x.ndim - 2


def _per_axis(what: str, value: Any, sizes: tuple) -> tuple:
    values = tuple(value) if isinstance(value, Sequence) else (value,) * len(sizes)
    if len(values) != len(sizes):
        raise ValueError(
            f"Input and {what} must have the same number of spatial dimensions, but got input "
            f"with spatial dimensions of {list(sizes)} and {what} of "
            f"{'shape ' if what == 'scale_factor' else ''}{value}. Please provide input tensor "
            f"in (N, C, d1, d2, ...,dK) format and {what} in (o1, o2, ...,oK) format."
        )
    return values


def _output(sizes: tuple, size: Any, scale_factor: Any, recompute: bool | None) -> tuple:
    """The output sizes, and the scale each axis's source positions step by (None: the
    ratio of the sizes)."""
    if (size is None) == (scale_factor is None):
        raise ValueError("either size or scale_factor should be defined" if size is None
                         else "only one of size or scale_factor should be defined")
    if size is not None:
        if recompute:
            raise ValueError("recompute_scale_factor is not meaningful with an explicit size.")
        return tuple(int(s) for s in _per_axis("output size", size, sizes)), (None,) * len(sizes)
    scales = tuple(float(s) for s in _per_axis("scale_factor", scale_factor, sizes))
    outs = tuple(math.floor(n * s) for n, s in zip(sizes, scales, strict=True))
    return outs, (None,) * len(sizes) if recompute else scales


def interpolate(input: Tensor, size: Any = None, scale_factor: Any = None,  # noqa: A002
                mode: str = "nearest", align_corners: bool | None = None,
                recompute_scale_factor: bool | None = None, antialias: bool = False) -> Tensor:
    """`input` resampled to `size` (or its sizes times `scale_factor`) along its spatial
    axes (all but the batch and channel axes)."""
    n = _check_mode(input, mode, align_corners, antialias)
    sizes = tuple(input.shape[2:])
    outs, scales = _output(sizes, size, scale_factor, recompute_scale_factor)
    if min(outs) <= 0 or min(sizes) <= 0:
        names = ("D", "H", "W")[3 - n:]
        described = [", ".join(f"{a}: {v}" for a, v in zip(names, s, strict=True))
                     for s in (sizes, outs)]
        raise RuntimeError(f"Input and output sizes should be greater than 0, but got input "
                           f"({described[0]}) output ({described[1]})")
    taps = []
    for axis, (s, m, scale) in enumerate(zip(sizes, outs, scales, strict=True)):
        if mode in _LINEAR:
            taps.append((axis + 2, _linear(s, m, scale, bool(align_corners))))
        else:
            taps.append((axis + 2, ((_nearest(mode, s, m, scale), None),)))
    return apply(R.RESAMPLE, input, taps=tuple(taps), node=_NODES[mode].format(n))
