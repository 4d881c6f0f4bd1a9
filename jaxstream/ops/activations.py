"""PyTorch's activation functions beyond relu, gelu, silu, sigmoid, tanh and softplus, with
its signatures, defaults, result dtypes and errors (`js.nn.functional` exports them).

Those with a backward node of their own in PyTorch are ops of `activation_rules.py`; those
PyTorch composes are composed here of the same ops, so that their graphs are PyTorch's:
softsign is `x / (|x| + 1)` (DivBackward0), tanhshrink `x - tanh(x)` (SubBackward0),
softmin `softmax(-x)` (SoftmaxBackward0 of NegBackward0). `inplace=True` rebinds the input
to the result, as `F.relu(x, inplace=True)` does (Note [In-place ops rebase history] in
inplace.py). As in PyTorch, hardtanh, relu6 and threshold take integer tensors and keep
their dtype, softsign and tanhshrink make them floating, and the others refuse them.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from ..tensor import Tensor, is_floating
from . import activation_rules as A
from . import functional as F
from .dispatch import apply
from .dtype_names import scalar_type
from .inplace import apply_inplace
from .neural import softmax
from .opdef import OpDef
from .operands import as_tensor, astype
from .pointwise import floating_only
from .shapes import normalize_axis

# PyTorch's selu constants (Klambauer et al., "Self-Normalizing Neural Networks").
SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946


def _run(op: OpDef, x: Tensor, inplace: bool, in_place_op: OpDef | None = None,
         **params: Any) -> Tensor:
    """`op` on `x`, or its in-place form (`in_place_op`, else `op` itself) rebinding `x`."""
    if not inplace:
        return apply(op, x, **params)
    in_place = in_place_op or op
    return apply_inplace(x, lambda t: apply(in_place, t, **params), f"{op.name}_")


def _elu(op: str, x: Any, alpha: float, scale: float, input_scale: float, inplace: bool,
         forms: tuple[OpDef, OpDef]) -> Tensor:
    x = as_tensor(x)
    floating_only(op, "elu_cpu", x)
    return _run(forms[0], x, inplace, forms[1], alpha=float(alpha), scale=float(scale),
                input_scale=float(input_scale))


def elu(input: Any, alpha: float = 1.0, inplace: bool = False) -> Tensor:  # noqa: A002
    """`x` above 0, `alpha * (exp(x) - 1)` at or below it."""
    return _elu("elu", input, alpha, 1.0, 1.0, inplace, (A.ELU, A.ELU_IN_PLACE))


def selu(input: Any, inplace: bool = False) -> Tensor:  # noqa: A002
    """`scale * elu(x, alpha)` with the self-normalizing constants (EluBackward0, as PyTorch)."""
    return _elu("selu", input, SELU_ALPHA, SELU_SCALE, 1.0, inplace, (A.ELU, A.ELU_IN_PLACE))


def celu(input: Any, alpha: float = 1.0, inplace: bool = False) -> Tensor:  # noqa: A002
    """`max(0, x) + min(0, alpha * (exp(x / alpha) - 1))`: elu with its input scaled."""
    if alpha == 0:
        raise RuntimeError(f"ZeroDivisionError: alpha cannot be 0 for CELU (celu of a tensor "
                           f"of shape {as_tensor(input).shape}); give a nonzero alpha")
    return _elu("celu", input, alpha, 1.0, 1.0 / alpha, inplace, (A.CELU, A.CELU_IN_PLACE))


def hardtanh(input: Any, min_val: float = -1.0, max_val: float = 1.0,  # noqa: A002
             inplace: bool = False) -> Tensor:
    """`x` clamped to [min_val, max_val]; the gradient passes strictly inside. An integer
    tensor stays integer, its bounds truncated toward zero (PyTorch's cast)."""
    x = as_tensor(input)
    if min_val > max_val:
        raise ValueError(f"min_val cannot be greater than max_val (hardtanh with min_val="
                         f"{min_val}, max_val={max_val}); swap them")
    if x.dtype == np.bool_:
        raise RuntimeError(f"Bool inputs not supported for hardtanh (a tensor of shape "
                           f"{x.shape}); cast it first, e.g. t.float()")
    if not is_floating(x.dtype):
        min_val, max_val = int(min_val), int(max_val)
    return _run(A.HARDTANH, x, inplace, min_val=min_val, max_val=max_val)


def relu6(input: Any, inplace: bool = False) -> Tensor:  # noqa: A002
    """`hardtanh(x, 0, 6)`, PyTorch's node and kinks included."""
    return hardtanh(input, 0.0, 6.0, inplace)


def hardsigmoid(input: Any, inplace: bool = False) -> Tensor:  # noqa: A002
    """`relu6(x + 3) / 6`; its gradient has no derivative, as in PyTorch (Note [Hardsigmoid
    has no second derivative] in activation_rules.py)."""
    x = as_tensor(input)
    floating_only("hardsigmoid", "hardsigmoid_cpu", x)
    return _run(A.HARDSIGMOID, x, inplace)


def hardswish(input: Any, inplace: bool = False) -> Tensor:  # noqa: A002
    """`x * relu6(x + 3) / 6`."""
    x = as_tensor(input)
    floating_only("hardswish", "hardswish_cpu", x)
    return _run(A.HARDSWISH, x, inplace)


def mish(input: Any, inplace: bool = False) -> Tensor:  # noqa: A002
    """`x * tanh(softplus(x))`."""
    x = as_tensor(input)
    floating_only("mish", "mish_cpu", x)
    return _run(A.MISH, x, inplace)


def softsign(input: Any) -> Tensor:  # noqa: A002
    """`x / (|x| + 1)`, composed as PyTorch composes it (whose abs refuses bools)."""
    x = as_tensor(input)
    if x.dtype == np.bool_:
        floating_only("softsign", "abs_cpu", x)
    return F.div(x, F.add(F.abs(x), 1))


def logsigmoid(input: Any) -> Tensor:  # noqa: A002
    """`log(sigmoid(x))`, finite for any finite `x`."""
    x = as_tensor(input)
    floating_only("logsigmoid", "log_sigmoid_cpu", x)
    return apply(A.LOGSIGMOID, x)


def tanhshrink(input: Any) -> Tensor:  # noqa: A002
    """`x - tanh(x)`, composed as PyTorch composes it."""
    x = as_tensor(input)
    return F.sub(x, F.tanh(x))


def softshrink(input: Any, lambd: float = 0.5) -> Tensor:  # noqa: A002
    """`x` moved `lambd` toward 0, and 0 within [-lambd, lambd]."""
    x = as_tensor(input)
    floating_only("softshrink", "softshrink_check", x)
    top = float(np.finfo(x.dtype).max)
    if not 0 <= lambd <= top:
        raise RuntimeError(f"lambda must be in range [0, {top:g}] for input dtype "
                           f"{scalar_type(x.dtype)}, but found {lambd} (softshrink of a tensor "
                           f"of shape {x.shape})")
    return apply(A.SOFTSHRINK, x, lambd=float(lambd))


def hardshrink(input: Any, lambd: float = 0.5) -> Tensor:  # noqa: A002
    """`x` outside [-lambd, lambd], 0 within."""
    x = as_tensor(input)
    floating_only("hardshrink", "hardshrink_cpu", x)
    return apply(A.HARDSHRINK, x, lambd=float(lambd))


def threshold(input: Any, threshold: float, value: float,  # noqa: A002
              inplace: bool = False) -> Tensor:
    """`x` where `x > threshold`, else `value`. An integer tensor stays integer, both
    numbers truncated toward zero (PyTorch's cast)."""
    x = as_tensor(input)
    if x.dtype == np.bool_:
        raise NotImplementedError(f"\"threshold_cpu\" not implemented for 'Bool' (threshold "
                                  f"of a tensor of shape {x.shape}); cast it first, e.g. t.int()")
    cast = float if is_floating(x.dtype) else int
    return _run(A.THRESHOLD, x, inplace, A.THRESHOLD_IN_PLACE, threshold=cast(threshold),
                value=cast(value))


def glu(input: Any, dim: int = -1) -> Tensor:  # noqa: A002
    """The first half of `x` along `dim` times the sigmoid of the second."""
    x = as_tensor(input)
    if x.ndim == 0:
        raise RuntimeError("glu does not support scalars because halving size must be even "
                           "(a 0-d tensor); give a tensor with an even-sized dim")
    axis = normalize_axis("glu", dim, x.shape)
    if x.shape[axis] % 2:
        raise RuntimeError(f"Halving dimension must be even, but dimension {axis} is size "
                           f"{x.shape[axis]} (glu of a tensor of shape {x.shape})")
    floating_only("glu", "glu_cpu", x)
    return apply(A.GLU, x, dim=axis)


def implicit_dim(op: str, ndim: int, dim: int | None, stacklevel: int) -> int:
    """`dim`, or PyTorch's deprecated choice without one (0 for 0-, 1- and 3-d inputs, else
    1), with its warning."""
    if dim is not None:
        return dim
    warnings.warn(f"Implicit dimension choice for {op} has been deprecated. Change the call "
                  "to include dim=X as an argument.", UserWarning, stacklevel=stacklevel)
    return 0 if ndim in (0, 1, 3) else 1


def softmin(input: Any, dim: int | None = None, _stacklevel: int = 3,  # noqa: A002
            dtype: Any = None) -> Tensor:
    """`softmax(-x, dim)`, cast to `dtype` before the softmax as PyTorch's is."""
    x = as_tensor(input)
    dim = implicit_dim("softmin", x.ndim, dim, _stacklevel)
    axis = normalize_axis("softmin", dim, x.shape)
    negated = F.neg(x)
    if dtype is not None:
        negated = astype(negated, dtype)
    last = "lastdim_" if axis == max(x.ndim - 1, 0) else ""
    floating_only("softmin", f"softmax_{last}kernel_impl", negated)
    return softmax(negated, axis)


def _channels(x: Tensor) -> int:
    """The channels prelu's weight may have one slope each of: dim 1, or 1 below 2-d."""
    return x.shape[1] if x.ndim >= 2 else 1


def prelu(input: Any, weight: Tensor) -> Tensor:  # noqa: A002
    """`x` where positive, else `weight * x`, one slope per channel (dim 1) or one for all."""
    x = as_tensor(input)
    w = as_tensor(weight, x)
    if x.dtype != w.dtype:
        if not (is_floating(x.dtype) or is_floating(w.dtype)):
            floating_only("prelu", "prelu_cpu", x)
        raise RuntimeError(f"prelu: Type promoting not supported. Got {scalar_type(x.dtype)} "
                           f"and {scalar_type(w.dtype)} (input of shape {x.shape}, weight of "
                           f"shape {w.shape}); cast the weight to the input's dtype")
    floating_only("prelu", "prelu_cpu", x)
    if w.ndim > 1:
        raise RuntimeError(f"prelu: Expected `weight` to be a scalar or 1D tensor, but got: "
                           f"ndim = {w.ndim} (weight of shape {w.shape})")
    if w.numel() not in (1, _channels(x)):
        raise RuntimeError(f"Mismatch of parameter numbers and input channel size. Found "
                           f"parameter numbers = {w.numel()} and channel size = {_channels(x)} "
                           f"(input of shape {x.shape}); give one slope or one per channel")
    return apply(A.PRELU, x, _broadcast_slopes(w, x.ndim))


def _broadcast_slopes(w: Tensor, ndim: int) -> Tensor:
    """The weight viewed as PyTorch views it against an input of `ndim` dims: the channels on
    dim 1 of as many dims (its gradient is summed back, then viewed back)."""
    shape = (() if ndim == 0 else (w.numel(),) if ndim == 1
             else (1, w.numel()) + (1,) * (ndim - 2))
    return w if w.shape == shape else w.reshape(shape)


__all__ = ["celu", "elu", "glu", "hardshrink", "hardsigmoid", "hardswish", "hardtanh",
           "logsigmoid", "mish", "prelu", "relu6", "selu", "softmin", "softshrink", "softsign",
           "tanhshrink", "threshold"]
