"""PyTorch's in-place Tensor methods whose out-of-place op jaxstream has: `abs_`, `exp_`,
`sigmoid_`, `round_(decimals=)`, `clamp_min_`, `cumsum_`, `tril_`, `lerp_`, `addmm_`,
`remainder_`, `atan2_`, `renorm_`, ... (the `_OUT_OF_PLACE` table), `relu_`, `floor_divide_`
and `fill_diagonal_`; with the in-place view ops (`t_`, `transpose_`, ...: restriding.py) and
draws (`random_`, `exponential_`, ...: inplace_draws.py), one table for Tensor.

Each entry of `_OUT_OF_PLACE` is its op run on the tensor's value and rebound in place (Note
[In-place ops rebase history] in inplace.py), as math_functions.py's in-place forms are: the
op's values, errors and node (PyTorch's in-place ops record the out-of-place node here),
PyTorch's leaf error, the version bump, the write through a view to its base, and a result
that must cast back to the tensor's dtype. `floor_divide_` records PyTorch's
`torch::autograd::NotImplemented` node, and `fill_diagonal_` writes through a view of the
diagonal (PyTorch's `CopySlices`). `clamp_min_`/`clamp_max_` of a tensor bound record the
out-of-place op's `WhereBackward0` where torch records `ClampMinBackward1`; `renorm_` records
the `MulBackward0` of its composition (the gradient is torch's).
"""

from __future__ import annotations

import math
from typing import Any

from ..tensor import Tensor
from . import functional as F
from . import linalg as L
from . import pointwise as P
from . import reductions as Q
from . import shape_ops as S
from . import structure
from .dispatch import apply
from .inplace import apply_inplace, in_place_method
from .inplace_activations import relu_
from .inplace_draws import METHODS as DRAWS
from .math_rules import not_implemented_vjp
from .opdef import OpDef
from .restriding import METHODS as IN_PLACE_VIEWS
from .top_level_names import renorm

_OUT_OF_PLACE = {
    "abs": F.abs, "exp": F.exp, "expm1": F.expm1, "log": F.log, "log1p": F.log1p,
    "sqrt": F.sqrt, "rsqrt": P.rsqrt, "square": F.square, "sigmoid": F.sigmoid, "tanh": F.tanh,
    "sin": F.sin, "cos": F.cos, "erf": F.erf, "erfinv": P.erfinv, "floor": P.floor,
    "round": P.round, "sign": P.sign, "clamp_min": P.clamp_min, "clamp_max": P.clamp_max,
    "cumsum": Q.cumsum, "cumprod": Q.cumprod, "tril": structure.tril, "triu": structure.triu,
    "lerp": P.lerp, "addmm": L.addmm, "baddbmm": L.baddbmm, "remainder": F.remainder,
    "atan2": P.atan2, "arctan2": P.atan2, "renorm": renorm,
}
"""The methods whose in-place form is the same op, rebound."""

_not_differentiable = not_implemented_vjp(RuntimeError, "floor_divide_")
FLOOR_DIVIDED = OpDef(
    "floor_divide_", "torch::autograd::NotImplemented",
    lambda xp, old, quotient, other=None: quotient, _not_differentiable, None,
    _not_differentiable,
)
"""floor_divide_'s node: the quotient, recorded where the tensor or the divisor requires grad,
as PyTorch records it; a backward through it raises PyTorch's error."""


def floor_divide_(t: Tensor, other: Any) -> Tensor:
    """`t //= other` (toward minus infinity); not differentiable."""

    def divided(v: Tensor) -> Tensor:
        quotient = F.floor_divide(v, other)
        return apply(FLOOR_DIVIDED, v, quotient, *[other] if isinstance(other, Tensor) else [])

    return apply_inplace(t, divided, "floor_divide_")


def fill_diagonal_(t: Tensor, fill_value: Any, wrap: bool = False) -> Tensor:
    """Fill the main diagonal of `t` (2-d, or of equal dims) with `fill_value`; with `wrap`, a
    tall matrix's diagonal starts again every `cols + 1` rows, as PyTorch's (and NumPy's)."""
    if t.ndim < 2:
        raise RuntimeError(f"dimensions must larger than 1 (fill_diagonal_ of a tensor of shape "
                           f"{t.shape})")
    if t.ndim > 2 and len(set(t.shape)) > 1:
        raise RuntimeError(f"all dimensions of input must be of equal length (fill_diagonal_ "
                           f"of a tensor of shape {t.shape})")
    step = sum(math.prod(t.shape[d + 1:]) for d in range(t.ndim))  # flat steps down the diagonal
    count = min(t.shape[:2])
    if wrap and t.ndim == 2 and t.shape[0] > t.shape[1] + 1:
        count = -(-t.numel() // step)
    if count:
        S.reshape(t, (-1,))[: (count - 1) * step + 1 : step].fill_(fill_value)
    return t


METHODS: dict[str, Any] = {
    **{f"{name}_": in_place_method(fn, f"{name}_") for name, fn in _OUT_OF_PLACE.items()},
    "relu_": relu_,
    "floor_divide_": floor_divide_,
    "fill_diagonal_": fill_diagonal_,
    **IN_PLACE_VIEWS,
    **DRAWS,
}
