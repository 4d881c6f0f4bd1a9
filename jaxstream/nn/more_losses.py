"""More of PyTorch's loss modules: KL divergence, the cosine-embedding, margin-ranking and
triplet margin losses, and the Gaussian and Poisson negative log-likelihoods.

Each holds its configuration and calls the functional of the same name, with PyTorch's
constructor arguments (legacy `size_average=`/`reduce=` included) and PyTorch's repr.
"""

from __future__ import annotations

from typing import Any

from ..ops import more_functional as M
from ..tensor import Tensor
from .loss import _Loss


class _PlainLoss(_Loss):
    """A loss that prints as PyTorch's, without its configuration."""

    def extra_repr(self) -> str:
        return ""


class KLDivLoss(_PlainLoss):
    def __init__(self, size_average: bool | None = None, reduce: bool | None = None,
                 reduction: str = "mean", log_target: bool = False) -> None:
        super().__init__(size_average, reduce, reduction)
        self.log_target = log_target

    def forward(self, input: Tensor, target: Any) -> Tensor:  # noqa: A002  (PyTorch's names)
        return M.kl_div(input, target, reduction=self.reduction, log_target=self.log_target)


class _MarginLoss(_PlainLoss):
    def __init__(self, margin: float = 0.0, size_average: bool | None = None,
                 reduce: bool | None = None, reduction: str = "mean") -> None:
        super().__init__(size_average, reduce, reduction)
        self.margin = margin


class CosineEmbeddingLoss(_MarginLoss):
    def forward(self, input1: Tensor, input2: Tensor, target: Any) -> Tensor:
        return M.cosine_embedding_loss(input1, input2, target, self.margin,
                                       reduction=self.reduction)


class MarginRankingLoss(_MarginLoss):
    def forward(self, input1: Tensor, input2: Tensor, target: Any) -> Tensor:
        return M.margin_ranking_loss(input1, input2, target, self.margin,
                                     reduction=self.reduction)


class TripletMarginLoss(_PlainLoss):
    def __init__(self, margin: float = 1.0, p: float = 2.0, eps: float = 1e-6,
                 swap: bool = False, size_average: bool | None = None,
                 reduce: bool | None = None, reduction: str = "mean") -> None:
        super().__init__(size_average, reduce, reduction)
        if margin <= 0:
            raise ValueError(f"TripletMarginLoss: expected margin to be greater than 0, got "
                             f"{margin} instead")
        self.margin, self.p, self.eps, self.swap = margin, p, eps, swap

    def forward(self, anchor: Tensor, positive: Tensor, negative: Tensor) -> Tensor:
        return M.triplet_margin_loss(anchor, positive, negative, self.margin, self.p, self.eps,
                                     self.swap, reduction=self.reduction)


class GaussianNLLLoss(_PlainLoss):
    def __init__(self, *, full: bool = False, eps: float = 1e-6,
                 reduction: str = "mean") -> None:
        super().__init__(reduction=reduction)
        self.full, self.eps = full, eps

    def forward(self, input: Tensor, target: Any, var: Any) -> Tensor:  # noqa: A002
        return M.gaussian_nll_loss(input, target, var, self.full, self.eps, self.reduction)


class PoissonNLLLoss(_PlainLoss):
    def __init__(self, log_input: bool = True, full: bool = False,
                 size_average: bool | None = None, eps: float = 1e-8,
                 reduce: bool | None = None, reduction: str = "mean") -> None:
        super().__init__(size_average, reduce, reduction)
        self.log_input, self.full, self.eps = log_input, full, eps

    def forward(self, log_input: Tensor, target: Any) -> Tensor:
        return M.poisson_nll_loss(log_input, target, self.log_input, self.full, eps=self.eps,
                                  reduction=self.reduction)
