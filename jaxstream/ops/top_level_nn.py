"""The ops of `torch.nn.functional` that torch also has at top level (`torch.selu`,
`torch.layer_norm`, `torch.kl_div`, ...), as `js.` functions with torch's top-level
signatures, which are its C++ schemas' and differ from the functional's in places:

* the losses take `reduction` as torch's C++ enum, an int: 1 is "mean", 2 "sum", any other
  "none" (as torch's); no legacy `size_average`/`reduce`. Left out it is 0, the unreduced loss:
  torch's schemas say 1, but its Python functions give the unreduced loss then
  (`torch.kl_div(x, y)` has x's shape), and the values here are those. `kl_div`'s mean is the
  elementwise one, without the functional's warning.
* `layer_norm(..., cudnn_enable)`, `group_norm(..., cudnn_enabled)` and
  `batch_norm(..., cudnn_enabled)` take a flag that picks the kernel torch runs on a GPU; the
  values do not depend on it, so it is accepted and has no effect.
* `batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps,
  cudnn_enabled)`, `poisson_nll_loss(input, target, log_input, full, eps, reduction)` and
  `alpha_dropout(input, p, train)`: every argument required, in torch's order.
* `embedding(weight, indices, padding_idx=-1, ...)`: the weight first; a negative
  `padding_idx` is none.
* `max_pool1d/2d/3d` give the values only (no `return_indices`), and a stride of `()`
  (torch's `[]`) is the kernel size; `adaptive_max_pool1d` always gives `(values, indices)`.
* the draws (`rrelu`, `rrelu_`, `alpha_dropout`, `feature_alpha_dropout`) take the
  keyword-only `key=` as their functional forms do, not torch's `generator`.

The others are the functional's own functions, whose signatures are torch's top-level ones.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..tensor import Tensor
from . import activations as AC
from . import losses as L
from . import margin_losses as ML
from . import more_functional as MF
from . import normalization as N
from . import pooling as P
from . import random_functional as RF
from .activations import hardshrink, prelu
from .channel_shuffle import channel_shuffle
from .condensed_distances import pdist
from .convolution import conv3d
from .distances import cosine_similarity, pairwise_distance
from .embedding import embedding as _embedding
from .inplace_activations import celu_, relu_, selu_, threshold_
from .more_functional import (
    adaptive_avg_pool1d,
    bilinear,
    pixel_shuffle,
    pixel_unshuffle,
    rms_norm,
)
from .random_functional import rrelu_
from .transposed_convolution import conv_transpose1d, conv_transpose2d, conv_transpose3d

__all__ = [  # the re-exported functions, then this module's own
    "adaptive_avg_pool1d", "bilinear", "celu_", "channel_shuffle", "conv3d", "conv_transpose1d",
    "conv_transpose2d", "conv_transpose3d", "cosine_similarity", "hardshrink",
    "pairwise_distance", "pdist", "pixel_shuffle", "pixel_unshuffle", "prelu", "relu_",
    "rms_norm", "rrelu_", "selu_", "threshold_",
    "adaptive_max_pool1d", "alpha_dropout", "avg_pool1d", "batch_norm",
    "binary_cross_entropy_with_logits", "celu", "cosine_embedding_loss", "embedding",
    "feature_alpha_dropout", "group_norm", "hinge_embedding_loss", "kl_div", "layer_norm",
    "margin_ranking_loss", "max_pool1d", "max_pool2d", "max_pool3d", "poisson_nll_loss",
    "rrelu", "selu", "threshold", "triplet_margin_loss",
]


def selu(input: Tensor) -> Tensor:  # noqa: A002  (torch's names)
    return AC.selu(input)


def celu(input: Tensor, alpha: float = 1.0) -> Tensor:  # noqa: A002
    return AC.celu(input, alpha)


def threshold(input: Tensor, threshold: float, value: float) -> Tensor:  # noqa: A002
    return AC.threshold(input, threshold, value)


def rrelu(input: Tensor, lower: float = 1.0 / 8, upper: float = 1.0 / 3,  # noqa: A002
          training: bool = False, *, key: Any = None) -> Tensor:
    return RF.rrelu(input, lower, upper, training, key=key)


def alpha_dropout(input: Tensor, p: float, train: bool, *, key: Any = None) -> Tensor:  # noqa: A002
    return RF.alpha_dropout(input, p, train, key=key)


def feature_alpha_dropout(input: Tensor, p: float, train: bool,  # noqa: A002
                          *, key: Any = None) -> Tensor:
    return RF.feature_alpha_dropout(input, p, train, key=key)


def max_pool1d(input: Tensor, kernel_size: Any, stride: Any = (), padding: Any = 0,  # noqa: A002
               dilation: Any = 1, ceil_mode: bool = False) -> Tensor:
    return P.max_pool1d(input, kernel_size, stride or None, padding, dilation, ceil_mode)


def max_pool2d(input: Tensor, kernel_size: Any, stride: Any = (), padding: Any = 0,  # noqa: A002
               dilation: Any = 1, ceil_mode: bool = False) -> Tensor:
    return P.max_pool2d(input, kernel_size, stride or None, padding, dilation, ceil_mode)


def max_pool3d(input: Tensor, kernel_size: Any, stride: Any = (), padding: Any = 0,  # noqa: A002
               dilation: Any = 1, ceil_mode: bool = False) -> Tensor:
    return P.max_pool3d(input, kernel_size, stride or None, padding, dilation, ceil_mode)


def avg_pool1d(input: Tensor, kernel_size: Any, stride: Any = (), padding: Any = 0,  # noqa: A002
               ceil_mode: bool = False, count_include_pad: bool = True) -> Tensor:
    return P.avg_pool1d(input, kernel_size, stride or None, padding, ceil_mode,
                        count_include_pad)


def adaptive_max_pool1d(input: Tensor, output_size: Any) -> tuple:  # noqa: A002
    return MF.adaptive_max_pool1d(input, output_size, return_indices=True)


def layer_norm(input: Tensor, normalized_shape: int | Sequence[int],  # noqa: A002
               weight: Tensor | None = None, bias: Tensor | None = None, eps: float = 1e-5,
               cudnn_enable: bool = True) -> Tensor:
    """`F.layer_norm`; `cudnn_enable` picks torch's GPU kernel, not the values: no effect."""
    return N.layer_norm(input, normalized_shape, weight, bias, eps)


def group_norm(input: Tensor, num_groups: int, weight: Tensor | None = None,  # noqa: A002
               bias: Tensor | None = None, eps: float = 1e-5,
               cudnn_enabled: bool = True) -> Tensor:
    """`F.group_norm`; `cudnn_enabled` picks torch's GPU kernel, not the values: no effect."""
    return MF.group_norm(input, num_groups, weight, bias, eps)


def batch_norm(input: Tensor, weight: Tensor | None, bias: Tensor | None,  # noqa: A002
               running_mean: Tensor | None, running_var: Tensor | None, training: bool,
               momentum: float, eps: float, cudnn_enabled: bool) -> Tensor:
    """`F.batch_norm` with torch's top-level order (the affine parameters first);
    `cudnn_enabled` picks torch's GPU kernel, not the values: no effect."""
    return N.batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)


def embedding(weight: Tensor, indices: Any, padding_idx: int = -1,
              scale_grad_by_freq: bool = False, sparse: bool = False) -> Tensor:
    """The rows of `weight` that `indices` name; a negative `padding_idx` is none."""
    return _embedding(indices, weight, padding_idx if padding_idx >= 0 else None, None, 2.0,
                      scale_grad_by_freq, sparse)


def _reduction(op: str, reduction: Any) -> str:
    """torch's C++ `Reduction` enum as the functional's name."""
    if isinstance(reduction, bool) or not isinstance(reduction, int):
        raise TypeError(
            f"{op}(): argument 'reduction' must be int, not {type(reduction).__name__}: at top "
            f"level it is 0 (none), 1 (mean) or 2 (sum); js.nn.functional.{op} takes the names"
        )
    return {1: "mean", 2: "sum"}.get(reduction, "none")


def kl_div(input: Tensor, target: Any, reduction: int = 0, *,  # noqa: A002
           log_target: bool = False) -> Tensor:
    """The pointwise KL divergence; reduction 1 is the mean over every element (not
    `F.kl_div`'s "batchmean")."""
    name = _reduction("kl_div", reduction)
    loss = MF.kl_div(input, target, reduction="none" if name == "mean" else name,
                     log_target=log_target)
    return loss.mean() if name == "mean" else loss


def margin_ranking_loss(input1: Tensor, input2: Tensor, target: Any, margin: float = 0.0,
                        reduction: int = 0) -> Tensor:
    return MF.margin_ranking_loss(input1, input2, target, margin,
                                  reduction=_reduction("margin_ranking_loss", reduction))


def cosine_embedding_loss(input1: Tensor, input2: Tensor, target: Any, margin: float = 0.0,
                          reduction: int = 0) -> Tensor:
    return MF.cosine_embedding_loss(input1, input2, target, margin,
                                    reduction=_reduction("cosine_embedding_loss", reduction))


def hinge_embedding_loss(input: Tensor, target: Any, margin: float = 1.0,  # noqa: A002
                         reduction: int = 0) -> Tensor:
    return ML.hinge_embedding_loss(input, target, margin,
                                   reduction=_reduction("hinge_embedding_loss", reduction))


def triplet_margin_loss(anchor: Tensor, positive: Tensor, negative: Tensor, margin: float = 1.0,
                        p: float = 2.0, eps: float = 1e-6, swap: bool = False,
                        reduction: int = 0) -> Tensor:
    return MF.triplet_margin_loss(anchor, positive, negative, margin, p, eps, swap,
                                  reduction=_reduction("triplet_margin_loss", reduction))


def poisson_nll_loss(input: Tensor, target: Any, log_input: bool, full: bool,  # noqa: A002
                     eps: float, reduction: int) -> Tensor:
    return MF.poisson_nll_loss(input, target, log_input, full, eps=eps,
                               reduction=_reduction("poisson_nll_loss", reduction))


def binary_cross_entropy_with_logits(input: Tensor, target: Any,  # noqa: A002
                                     weight: Any = None, pos_weight: Any = None,
                                     reduction: int = 0) -> Tensor:
    return L.binary_cross_entropy_with_logits(
        input, target, weight, _reduction("binary_cross_entropy_with_logits", reduction),
        pos_weight)


METHODS = {
    "hardshrink": hardshrink,
    "prelu": prelu,
}
