"""PyTorch's margin and hinge loss modules: SoftMarginLoss, MultiMarginLoss,
MultiLabelMarginLoss, MultiLabelSoftMarginLoss, HingeEmbeddingLoss and
TripletMarginWithDistanceLoss.

Each holds its configuration (a class `weight` as a buffer, as PyTorch's: it moves with the
module and is in its state_dict when given) and calls the functional of the same name
(ops/margin_losses.py), with PyTorch's constructor arguments, checks and repr.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..ops import margin_losses as M
from ..ops.operands import as_tensor
from ..tensor import Tensor
from .loss import _WeightedLoss
from .more_layers import PairwiseDistance
from .more_losses import _PlainLoss


class _PlainWeightedLoss(_WeightedLoss, _PlainLoss):
    """A loss with an optional `weight` buffer that prints as PyTorch's, bare."""


class SoftMarginLoss(_PlainLoss):
    def forward(self, input: Tensor, target: Any) -> Tensor:  # noqa: A002  (PyTorch's names)
        return M.soft_margin_loss(input, target, reduction=self.reduction)


class MultiLabelMarginLoss(_PlainLoss):
    def forward(self, input: Tensor, target: Any) -> Tensor:  # noqa: A002
        return M.multilabel_margin_loss(input, target, reduction=self.reduction)


class MultiLabelSoftMarginLoss(_PlainWeightedLoss):
    def forward(self, input: Tensor, target: Any) -> Tensor:  # noqa: A002
        return M.multilabel_soft_margin_loss(input, target, self.weight,
                                             reduction=self.reduction)


class MultiMarginLoss(_PlainWeightedLoss):
    def __init__(self, p: int = 1, margin: float = 1.0, weight: Tensor | None = None,
                 size_average: bool | None = None, reduce: bool | None = None,
                 reduction: str = "mean") -> None:
        super().__init__(weight, size_average, reduce, reduction)
        if p not in (1, 2):
            raise ValueError("only p == 1 and p == 2 supported")
        if weight is not None and as_tensor(weight).ndim != 1:
            raise ValueError(f"MultiMarginLoss: expected weight to be None or 1D tensor, got "
                             f"{as_tensor(weight).ndim}D instead")
        self.p, self.margin = p, margin

    def forward(self, input: Tensor, target: Any) -> Tensor:  # noqa: A002
        return M.multi_margin_loss(input, target, self.p, self.margin, self.weight,
                                   reduction=self.reduction)


class HingeEmbeddingLoss(_PlainLoss):
    def __init__(self, margin: float = 1.0, size_average: bool | None = None,
                 reduce: bool | None = None, reduction: str = "mean") -> None:
        super().__init__(size_average, reduce, reduction)
        self.margin = margin

    def forward(self, input: Tensor, target: Any) -> Tensor:  # noqa: A002
        return M.hinge_embedding_loss(input, target, self.margin, reduction=self.reduction)


class TripletMarginWithDistanceLoss(_PlainLoss):
    """The triplet loss of any distance; the default, a PairwiseDistance, is a submodule (it
    prints in the repr, as PyTorch's)."""

    def __init__(self, *, distance_function: Callable[[Tensor, Tensor], Tensor] | None = None,
                 margin: float = 1.0, swap: bool = False, reduction: str = "mean") -> None:
        super().__init__(reduction=reduction)
        if margin <= 0:
            raise ValueError(f"TripletMarginWithDistanceLoss: expected margin to be greater "
                             f"than 0, got {margin} instead")
        self.distance_function = (PairwiseDistance() if distance_function is None
                                  else distance_function)
        self.margin, self.swap = margin, swap

    def forward(self, anchor: Tensor, positive: Tensor, negative: Tensor) -> Tensor:
        return M.triplet_margin_with_distance_loss(
            anchor, positive, negative, distance_function=self.distance_function,
            margin=self.margin, swap=self.swap, reduction=self.reduction)
