"""`js.nn.functional` (`import jaxstream.nn.functional as F`): the functions of PyTorch's
`torch.nn.functional` that jaxstream has, under their names and with their signatures.

Each is the op of the same name in `js` with PyTorch's functional arguments: `inplace=`
(the result rebinds the input, as `t.add_` does), `dim=None` for softmax (PyTorch's
deprecated implicit dim, with its warning), `dtype=`, and the losses' legacy
`size_average=`/`reduce=`. Class weights (`weight=`) are not supported yet and say so.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

from ..ops import functional as _ops
from ..ops import neural as _neural
from ..ops.inplace import apply_inplace
from ..ops.operands import astype
from ..tensor import Tensor


def _in_place_or_not(op: Callable[[Tensor], Tensor], x: Tensor, inplace: bool, name: str
                     ) -> Tensor:
    return apply_inplace(x, op, f"{name}_") if inplace else op(x)


def relu(input: Tensor, inplace: bool = False) -> Tensor:  # noqa: A002  (PyTorch's names)
    return _in_place_or_not(_ops.relu, input, inplace, "relu")


def leaky_relu(input: Tensor, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:  # noqa: A002
    return _in_place_or_not(lambda t: _ops.leaky_relu(t, negative_slope), input, inplace,
                            "leaky_relu")


def silu(input: Tensor, inplace: bool = False) -> Tensor:  # noqa: A002
    return _in_place_or_not(_ops.silu, input, inplace, "silu")


def gelu(input: Tensor, approximate: str = "none") -> Tensor:  # noqa: A002
    return _ops.gelu(input, approximate)


def sigmoid(input: Tensor) -> Tensor:  # noqa: A002
    return _ops.sigmoid(input)


def tanh(input: Tensor) -> Tensor:  # noqa: A002
    return _ops.tanh(input)


def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:  # noqa: A002
    return _ops.linear(input, weight, bias)


def one_hot(tensor: Any, num_classes: int = -1) -> Tensor:
    return _neural.one_hot(tensor, num_classes)


def softplus(input: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:  # noqa: A002
    """`log(1 + exp(beta * x)) / beta`, and `x` itself where `beta * x > threshold`."""
    scaled = input if beta == 1 else input * beta
    smooth = _ops.softplus(scaled)
    return _ops.where(scaled > threshold, input, smooth if beta == 1 else smooth / beta)


def _softmax_dim(name: str, x: Tensor, dim: int | None, stacklevel: int) -> int:
    """`dim`, or PyTorch's deprecated choice without one (0 for 0-, 1- and 3-d inputs, else
    1), with its warning."""
    if dim is not None:
        return dim
    warnings.warn(f"Implicit dimension choice for {name} has been deprecated. Change the call "
                  "to include dim=X as an argument.", UserWarning, stacklevel=stacklevel)
    return 0 if x.ndim in (0, 1, 3) else 1


def softmax(input: Tensor, dim: int | None = None, _stacklevel: int = 3,  # noqa: A002
            dtype: Any = None) -> Tensor:
    x = input if dtype is None else astype(input, dtype)
    return _neural.softmax(x, _softmax_dim("softmax", x, dim, _stacklevel))


def log_softmax(input: Tensor, dim: int | None = None, _stacklevel: int = 3,  # noqa: A002
                dtype: Any = None) -> Tensor:
    x = input if dtype is None else astype(input, dtype)
    return _neural.log_softmax(x, _softmax_dim("log_softmax", x, dim, _stacklevel))


def dropout(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False,  # noqa: A002
            *, key: Any = None) -> Tensor:
    """PyTorch's dropout; `key=` draws the mask purely, as `js.dropout`'s does."""
    return _in_place_or_not(lambda t: _neural.dropout(t, p, training, key), input, inplace,
                            "dropout")


def _reduction(size_average: bool | None, reduce: bool | None, reduction: str) -> str:
    """The reduction PyTorch's legacy `size_average`/`reduce` ask for (with its warning)."""
    if size_average is None and reduce is None:
        return reduction
    legacy = "none" if reduce is False else "sum" if size_average is False else "mean"
    warnings.warn(f"size_average and reduce args will be deprecated, please use "
                  f"reduction='{legacy}' instead.", UserWarning, stacklevel=3)
    return legacy


def _no_weight(op: str, weight: Any) -> None:
    if weight is not None:
        raise NotImplementedError(f"{op}: weight= (per-class or per-element weights) is not "
                                  "supported yet; multiply the unreduced loss "
                                  "(reduction='none') by the weights instead")


def cross_entropy(input: Tensor, target: Any, weight: Any = None,  # noqa: A002
                  size_average: bool | None = None, ignore_index: int = -100,
                  reduce: bool | None = None, reduction: str = "mean",
                  label_smoothing: float = 0.0) -> Tensor:
    _no_weight("cross_entropy", weight)
    return _neural.cross_entropy(input, target, _reduction(size_average, reduce, reduction),
                                 label_smoothing, ignore_index)


def nll_loss(input: Tensor, target: Any, weight: Any = None,  # noqa: A002
             size_average: bool | None = None, ignore_index: int = -100,
             reduce: bool | None = None, reduction: str = "mean") -> Tensor:
    _no_weight("nll_loss", weight)
    return _neural.nll_loss(input, target, _reduction(size_average, reduce, reduction),
                            ignore_index)


def mse_loss(input: Tensor, target: Any, size_average: bool | None = None,  # noqa: A002
             reduce: bool | None = None, reduction: str = "mean", weight: Any = None) -> Tensor:
    _no_weight("mse_loss", weight)
    return _neural.mse_loss(input, target, _reduction(size_average, reduce, reduction))


__all__ = ["cross_entropy", "dropout", "gelu", "leaky_relu", "linear", "log_softmax",
           "mse_loss", "nll_loss", "one_hot", "relu", "sigmoid", "silu", "softmax", "softplus",
           "tanh"]
