"""PyTorch's activation modules beyond ReLU, GELU, SiLU, Sigmoid and Tanh (layers.py), with
its constructor arguments, defaults and reprs; each forward is the function of the same name
in `js.nn.functional`. PReLU holds its slopes as a parameter.
"""

from __future__ import annotations

import warnings
from typing import Any

from ..autograd.grad_mode import no_grad
from ..devices import Device
from ..ops.creation import full
from ..tensor import Tensor
from . import functional as F
from .module import Module
from .parameter import Parameter


def inplace_flag(inplace: bool, sep: str = ", ") -> str:
    """The repr's in-place flag, as PyTorch writes it: only where it is set."""
    return f"{sep}inplace=True" if inplace else ""


class LeakyReLU(Module):
    def __init__(self, negative_slope: float = 0.01, inplace: bool = False) -> None:
        super().__init__()
        self.negative_slope = negative_slope
        self.inplace = inplace

    def forward(self, x: Tensor) -> Tensor:
        return F.leaky_relu(x, self.negative_slope, self.inplace)

    def extra_repr(self) -> str:
        return f"negative_slope={self.negative_slope}{inplace_flag(self.inplace)}"


class _Along(Module):
    """A softmax-like module over `dim`; None is PyTorch's deprecated implicit choice, which
    warns at the call (stack level 5: the caller of the module)."""

    function: Any = None

    def __init__(self, dim: int | None = None) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: Tensor) -> Tensor:
        return type(self).function(x, self.dim, _stacklevel=5)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class Softmax(_Along):
    function = F.softmax


class LogSoftmax(_Along):
    function = F.log_softmax


class Softmin(_Along):
    function = F.softmin


class Softplus(Module):
    def __init__(self, beta: float = 1.0, threshold: float = 20.0) -> None:
        super().__init__()
        self.beta = beta
        self.threshold = threshold

    def forward(self, x: Tensor) -> Tensor:
        return F.softplus(x, self.beta, self.threshold)

    def extra_repr(self) -> str:
        return f"beta={self.beta}, threshold={self.threshold}"


class ELU(Module):
    def __init__(self, alpha: float = 1.0, inplace: bool = False) -> None:
        super().__init__()
        self.alpha = alpha
        self.inplace = inplace

    def forward(self, x: Tensor) -> Tensor:
        return F.elu(x, self.alpha, self.inplace)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}{inplace_flag(self.inplace)}"


class CELU(ELU):
    def forward(self, x: Tensor) -> Tensor:
        return F.celu(x, self.alpha, self.inplace)


class _InPlaceOnly(Module):
    """A module whose only argument is `inplace`."""

    function: Any = None
    shows_inplace = True  # PyTorch's Hardsigmoid and Hardswish leave it out of their repr

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def forward(self, x: Tensor) -> Tensor:
        return type(self).function(x, self.inplace)

    def extra_repr(self) -> str:
        return inplace_flag(self.inplace and self.shows_inplace, sep="")


class SELU(_InPlaceOnly):
    function = F.selu


class Mish(_InPlaceOnly):
    function = F.mish


class Hardsigmoid(_InPlaceOnly):
    function = F.hardsigmoid
    shows_inplace = False


class Hardswish(_InPlaceOnly):
    function = F.hardswish
    shows_inplace = False


class Hardtanh(Module):
    """`min_value`/`max_value` are PyTorch's deprecated spellings, with its warning."""

    def __init__(self, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False,
                 min_value: float | None = None, max_value: float | None = None) -> None:
        super().__init__()
        for old, new in (("min_value", min_value), ("max_value", max_value)):
            if new is not None:
                warnings.warn(f"keyword argument `{old}` is deprecated and renamed to "
                              f"`{old.replace('value', 'val')}`", FutureWarning, stacklevel=2)
        min_val = min_val if min_value is None else min_value
        max_val = max_val if max_value is None else max_value
        if not max_val > min_val:
            raise AssertionError(f"max_val ({max_val}) must be greater than min_val ({min_val})")
        self.min_val = min_val
        self.max_val = max_val
        self.inplace = inplace

    def forward(self, x: Tensor) -> Tensor:
        return F.hardtanh(x, self.min_val, self.max_val, self.inplace)

    def extra_repr(self) -> str:
        return f"min_val={self.min_val}, max_val={self.max_val}{inplace_flag(self.inplace)}"


class ReLU6(Hardtanh):
    """`Hardtanh(0.0, 6.0)`, as PyTorch's (a subclass of it)."""

    def __init__(self, inplace: bool = False) -> None:
        super().__init__(0.0, 6.0, inplace)

    def extra_repr(self) -> str:
        return inplace_flag(self.inplace, sep="")


class Softsign(Module):
    def forward(self, x: Tensor) -> Tensor:
        return F.softsign(x)


class LogSigmoid(Module):
    def forward(self, x: Tensor) -> Tensor:
        return F.logsigmoid(x)


class Tanhshrink(Module):
    def forward(self, x: Tensor) -> Tensor:
        return F.tanhshrink(x)


class Softshrink(Module):
    def __init__(self, lambd: float = 0.5) -> None:
        super().__init__()
        self.lambd = lambd

    def forward(self, x: Tensor) -> Tensor:
        return F.softshrink(x, self.lambd)

    def extra_repr(self) -> str:
        return str(self.lambd)


class Hardshrink(Softshrink):
    def forward(self, x: Tensor) -> Tensor:
        return F.hardshrink(x, self.lambd)


class Threshold(Module):
    def __init__(self, threshold: float, value: float, inplace: bool = False) -> None:
        super().__init__()
        self.threshold = threshold
        self.value = value
        self.inplace = inplace

    def forward(self, x: Tensor) -> Tensor:
        return F.threshold(x, self.threshold, self.value, self.inplace)

    def extra_repr(self) -> str:
        return f"threshold={self.threshold}, value={self.value}{inplace_flag(self.inplace)}"


class GLU(Module):
    def __init__(self, dim: int = -1) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x: Tensor) -> Tensor:
        return F.glu(x, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class PReLU(Module):
    """`x` where positive, else `weight * x`: `num_parameters` learned slopes (one, or one per
    channel, dim 1 of the input), each starting at `init`."""

    def __init__(self, num_parameters: int = 1, init: float = 0.25,
                 device: str | Device | None = None, dtype: Any = None, *,
                 backend: str | None = None) -> None:
        super().__init__()
        self.num_parameters = num_parameters
        self.init = init
        self.weight = Parameter(full((num_parameters,), float(init), dtype=dtype,
                                     backend=backend, device=device))

    def reset_parameters(self) -> None:
        with no_grad():
            self.weight.fill_(float(self.init))

    def forward(self, x: Tensor) -> Tensor:
        return F.prelu(x, self.weight)

    def extra_repr(self) -> str:
        return f"num_parameters={self.num_parameters}"
