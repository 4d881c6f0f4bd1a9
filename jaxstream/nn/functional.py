"""`js.nn.functional` (`import jaxstream.nn.functional as F`): the functions of PyTorch's
`torch.nn.functional` that jaxstream has, under their names and with their signatures.

Each is the op of the same name in `js` with PyTorch's functional arguments: `inplace=`
(the result rebinds the input, as `t.add_` does), `dim=None` for softmax (PyTorch's
deprecated implicit dim, with its warning), `dtype=`, and the losses' legacy
`size_average=`/`reduce=`. The losses take PyTorch's `weight=`: per class for the softmax
losses, per element for the binary cross entropies and the regression losses.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..ops import attention as _attention
from ..ops import convolution as _convolution
from ..ops import distances as _distances
from ..ops import embedding as _embedding
from ..ops import functional as _ops
from ..ops import interpolation as _interpolation
from ..ops import losses as _losses
from ..ops import neural as _neural
from ..ops import normalization as _normalization
from ..ops import padding as _padding
from ..ops import pooling as _pooling
from ..ops.activations import (  # PyTorch's other activations
    celu,
    elu,
    glu,
    hardshrink,
    hardsigmoid,
    hardswish,
    hardtanh,
    implicit_dim,
    logsigmoid,
    mish,
    prelu,
    relu6,
    selu,
    softmin,
    softshrink,
    softsign,
    tanhshrink,
    threshold,
)
from ..ops.channel_shuffle import channel_shuffle
from ..ops.condensed_distances import pdist
from ..ops.convolution import conv3d
from ..ops.folding import fold, unfold
from ..ops.functional_3d import adaptive_avg_pool3d, adaptive_max_pool3d, dropout3d
from ..ops.inplace import apply_inplace
from ..ops.inplace_activations import (  # PyTorch's in-place spellings
    celu_,
    elu_,
    hardtanh_,
    leaky_relu_,
    relu_,
    selu_,
    threshold_,
)
from ..ops.instance_norm import instance_norm
from ..ops.margin_losses import (
    hinge_embedding_loss,
    multi_margin_loss,
    multilabel_margin_loss,
    multilabel_soft_margin_loss,
    soft_margin_loss,
    triplet_margin_with_distance_loss,
)
from ..ops.more_functional import (  # compositions of the ops
    adaptive_avg_pool1d,
    adaptive_avg_pool2d,
    adaptive_max_pool1d,
    adaptive_max_pool2d,
    bilinear,
    cosine_embedding_loss,
    dropout1d,
    dropout2d,
    gaussian_nll_loss,
    group_norm,
    kl_div,
    legacy_reduction,
    margin_ranking_loss,
    pixel_shuffle,
    pixel_unshuffle,
    poisson_nll_loss,
    rms_norm,
    triplet_margin_loss,
)
from ..ops.operands import as_tensor, astype
from ..ops.pool_compositions import (  # compositions of the pools
    adaptive_max_pool1d_with_indices,
    adaptive_max_pool2d_with_indices,
    adaptive_max_pool3d_with_indices,
    local_response_norm,
    lp_pool1d,
    lp_pool2d,
    lp_pool3d,
    max_pool1d_with_indices,
    max_pool2d_with_indices,
    max_pool3d_with_indices,
)
from ..ops.pooling import avg_pool3d, max_pool3d
from ..ops.random_functional import (  # the functionals that draw: keyword-only key=
    alpha_dropout,
    feature_alpha_dropout,
    gumbel_softmax,
    rrelu,
    rrelu_,
)
from ..ops.transposed_convolution import conv_transpose1d, conv_transpose2d, conv_transpose3d
from ..ops.unpooling import max_unpool1d, max_unpool2d, max_unpool3d
from ..ops.upsampling import upsample, upsample_bilinear, upsample_nearest
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


def softmax(input: Tensor, dim: int | None = None, _stacklevel: int = 3,  # noqa: A002
            dtype: Any = None) -> Tensor:
    x = input if dtype is None else astype(input, dtype)
    return _neural.softmax(x, implicit_dim("softmax", x.ndim, dim, _stacklevel))


def log_softmax(input: Tensor, dim: int | None = None, _stacklevel: int = 3,  # noqa: A002
                dtype: Any = None) -> Tensor:
    x = input if dtype is None else astype(input, dtype)
    return _neural.log_softmax(x, implicit_dim("log_softmax", x.ndim, dim, _stacklevel))


def dropout(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False,  # noqa: A002
            *, key: Any = None) -> Tensor:
    """PyTorch's dropout; `key=` draws the mask purely, as `js.dropout`'s does."""
    return _in_place_or_not(lambda t: _neural.dropout(t, p, training, key), input, inplace,
                            "dropout")


def cross_entropy(input: Tensor, target: Any, weight: Any = None,  # noqa: A002
                  size_average: bool | None = None, ignore_index: int = -100,
                  reduce: bool | None = None, reduction: str = "mean",
                  label_smoothing: float = 0.0) -> Tensor:
    return _neural.cross_entropy(input, target, legacy_reduction(size_average, reduce, reduction),
                                 label_smoothing, ignore_index, weight)


def nll_loss(input: Tensor, target: Any, weight: Any = None,  # noqa: A002
             size_average: bool | None = None, ignore_index: int = -100,
             reduce: bool | None = None, reduction: str = "mean") -> Tensor:
    return _neural.nll_loss(input, target, legacy_reduction(size_average, reduce, reduction),
                            ignore_index, weight)


def _weighted_elements(loss: Any, input: Tensor, weight: Any,  # noqa: A002
                       reduction: str, mean_over_weights: bool = True) -> Tensor:
    """PyTorch's element-weighted regression losses: the unreduced `loss(reduction)` times
    `weight` (of the input's size), then summed, or under "mean" divided by the weights'
    sum (mse, l1) or by their count (huber, `mean_over_weights=False`)."""
    weight = as_tensor(weight, input)
    if tuple(weight.shape) != tuple(input.shape):
        raise ValueError(f"Weights and input must have the same size. (weight of shape "
                         f"{tuple(weight.shape)}, input of shape {tuple(input.shape)})")
    _neural.check_reduction(reduction)
    weighted = loss("none") * weight
    if reduction == "none":
        return weighted
    if reduction == "sum" or not mean_over_weights:
        return getattr(weighted, reduction)()
    return weighted.sum() / weight.sum()


def mse_loss(input: Tensor, target: Any, size_average: bool | None = None,  # noqa: A002
             reduce: bool | None = None, reduction: str = "mean", weight: Any = None) -> Tensor:
    reduction = legacy_reduction(size_average, reduce, reduction)
    if weight is None:
        return _neural.mse_loss(input, target, reduction)
    return _weighted_elements(lambda r: _neural.mse_loss(input, target, r), input, weight,
                              reduction)


# ------------------------------------------------------------------ normalization, attention,
# distances, more losses and embeddings: thin wrappers of jaxstream/ops (normalization.py,
# attention.py, distances.py, losses.py, embedding.py)
def layer_norm(input: Tensor, normalized_shape: int | Sequence[int],  # noqa: A002
               weight: Tensor | None = None, bias: Tensor | None = None,
               eps: float = 1e-5) -> Tensor:
    return _normalization.layer_norm(input, normalized_shape, weight, bias, eps)


def batch_norm(input: Tensor, running_mean: Tensor | None,  # noqa: A002
               running_var: Tensor | None, weight: Tensor | None = None,
               bias: Tensor | None = None, training: bool = False, momentum: float = 0.1,
               eps: float = 1e-5) -> Tensor:
    return _normalization.batch_norm(input, running_mean, running_var, weight, bias, training,
                                     momentum, eps)


def scaled_dot_product_attention(query: Tensor, key: Any, value: Any, attn_mask: Any = None,
                                 dropout_p: float = 0.0, is_causal: bool = False,
                                 scale: float | None = None, enable_gqa: bool = False) -> Tensor:
    """PyTorch's attention; dropout draws from the current draw source (`js.manual_seed`)."""
    return _attention.scaled_dot_product_attention(query, key, value, attn_mask, dropout_p,
                                                   is_causal, scale, enable_gqa)


def normalize(input: Tensor, p: float = 2.0, dim: int = 1, eps: float = 1e-12,  # noqa: A002
              out: Tensor | None = None) -> Tensor:
    if out is not None:
        raise NotImplementedError("normalize: out= is not supported (jaxstream never writes "
                                  "into a given tensor); use out.copy_(F.normalize(...))")
    return _distances.normalize(input, p, dim, eps)


def pairwise_distance(x1: Tensor, x2: Any, p: float = 2.0, eps: float = 1e-6,
                      keepdim: bool = False) -> Tensor:
    return _distances.pairwise_distance(x1, x2, p, eps, keepdim)


def cosine_similarity(x1: Tensor, x2: Any, dim: int = 1, eps: float = 1e-8) -> Tensor:
    return _distances.cosine_similarity(x1, x2, dim, eps)


def binary_cross_entropy(input: Tensor, target: Any, weight: Any = None,  # noqa: A002
                         size_average: bool | None = None, reduce: bool | None = None,
                         reduction: str = "mean") -> Tensor:
    return _losses.binary_cross_entropy(input, target, weight,
                                        legacy_reduction(size_average, reduce, reduction))


def binary_cross_entropy_with_logits(input: Tensor, target: Any,  # noqa: A002
                                     weight: Any = None, size_average: bool | None = None,
                                     reduce: bool | None = None, reduction: str = "mean",
                                     pos_weight: Any = None) -> Tensor:
    return _losses.binary_cross_entropy_with_logits(
        input, target, weight, legacy_reduction(size_average, reduce, reduction), pos_weight)


def l1_loss(input: Tensor, target: Any, size_average: bool | None = None,  # noqa: A002
            reduce: bool | None = None, reduction: str = "mean", weight: Any = None) -> Tensor:
    reduction = legacy_reduction(size_average, reduce, reduction)
    if weight is None:
        return _losses.l1_loss(input, target, reduction)
    return _weighted_elements(lambda r: _losses.l1_loss(input, target, r), input, weight,
                              reduction)


def smooth_l1_loss(input: Tensor, target: Any, size_average: bool | None = None,  # noqa: A002
                   reduce: bool | None = None, reduction: str = "mean",
                   beta: float = 1.0) -> Tensor:
    return _losses.smooth_l1_loss(input, target,
                                  legacy_reduction(size_average, reduce, reduction), beta)


def huber_loss(input: Tensor, target: Any, reduction: str = "mean",  # noqa: A002
               delta: float = 1.0, weight: Any = None) -> Tensor:
    if weight is None:
        return _losses.huber_loss(input, target, reduction, delta)
    return _weighted_elements(lambda r: _losses.huber_loss(input, target, r, delta), input,
                              weight, reduction, mean_over_weights=False)


def embedding(input: Any, weight: Tensor, padding_idx: int | None = None,  # noqa: A002
              max_norm: float | None = None, norm_type: float = 2.0,
              scale_grad_by_freq: bool = False, sparse: bool = False) -> Tensor:
    return _embedding.embedding(input, weight, padding_idx, max_norm, norm_type,
                                scale_grad_by_freq, sparse)


def embedding_bag(input: Any, weight: Tensor, offsets: Any = None,  # noqa: A002
                  max_norm: float | None = None, norm_type: float = 2,
                  scale_grad_by_freq: bool = False, mode: str = "mean", sparse: bool = False,
                  per_sample_weights: Any = None, include_last_offset: bool = False,
                  padding_idx: int | None = None) -> Tensor:
    return _embedding.embedding_bag(input, weight, offsets, max_norm, norm_type,
                                    scale_grad_by_freq, mode, sparse, per_sample_weights,
                                    include_last_offset, padding_idx)


# ------------------------------------------------------------------ convolution, pooling,
# pad and interpolate: thin wrappers of jaxstream/ops (convolution.py, pooling.py,
# padding.py, interpolation.py)
def conv1d(input: Tensor, weight: Tensor, bias: Tensor | None = None,  # noqa: A002
           stride: Any = 1, padding: Any = 0, dilation: Any = 1, groups: int = 1) -> Tensor:
    return _convolution.conv1d(input, weight, bias, stride, padding, dilation, groups)


def conv2d(input: Tensor, weight: Tensor, bias: Tensor | None = None,  # noqa: A002
           stride: Any = 1, padding: Any = 0, dilation: Any = 1, groups: int = 1) -> Tensor:
    return _convolution.conv2d(input, weight, bias, stride, padding, dilation, groups)


def max_pool1d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,  # noqa: A002
               dilation: Any = 1, ceil_mode: bool = False, return_indices: bool = False) -> Any:
    return _pooling.max_pool1d(input, kernel_size, stride, padding, dilation, ceil_mode,
                               return_indices)


def max_pool2d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,  # noqa: A002
               dilation: Any = 1, ceil_mode: bool = False, return_indices: bool = False) -> Any:
    return _pooling.max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode,
                               return_indices)


def avg_pool1d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,  # noqa: A002
               ceil_mode: bool = False, count_include_pad: bool = True) -> Tensor:
    return _pooling.avg_pool1d(input, kernel_size, stride, padding, ceil_mode, count_include_pad)


def avg_pool2d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,  # noqa: A002
               ceil_mode: bool = False, count_include_pad: bool = True,
               divisor_override: int | None = None) -> Tensor:
    return _pooling.avg_pool2d(input, kernel_size, stride, padding, ceil_mode, count_include_pad,
                               divisor_override)


def pad(input: Tensor, pad: Sequence[int], mode: str = "constant",  # noqa: A002
        value: float | None = None) -> Tensor:
    return _padding.pad(input, pad, mode, value)


def interpolate(input: Tensor, size: Any = None, scale_factor: Any = None,  # noqa: A002
                mode: str = "nearest", align_corners: bool | None = None,
                recompute_scale_factor: bool | None = None, antialias: bool = False) -> Tensor:
    return _interpolation.interpolate(input, size, scale_factor, mode, align_corners,
                                      recompute_scale_factor, antialias)


__all__ = ["batch_norm", "binary_cross_entropy", "binary_cross_entropy_with_logits",
           "cosine_similarity", "cross_entropy", "dropout", "embedding", "embedding_bag", "gelu",
           "huber_loss", "l1_loss", "layer_norm", "leaky_relu", "linear", "log_softmax",
           "mse_loss", "nll_loss", "normalize", "one_hot", "pairwise_distance", "relu",
           "scaled_dot_product_attention", "sigmoid", "silu", "smooth_l1_loss", "softmax",
           "softplus", "tanh"]
__all__ += ["celu", "elu", "glu", "hardshrink", "hardsigmoid", "hardswish", "hardtanh",
            "logsigmoid", "mish", "prelu", "relu6", "selu", "softmin", "softshrink", "softsign",
            "tanhshrink", "threshold"]
__all__ += ["avg_pool1d", "avg_pool2d", "conv1d", "conv2d", "interpolate", "max_pool1d",
            "max_pool2d", "pad"]
__all__ += ["adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_max_pool1d",
            "adaptive_max_pool2d", "bilinear", "cosine_embedding_loss", "dropout1d", "dropout2d",
            "gaussian_nll_loss", "group_norm", "kl_div", "margin_ranking_loss", "pixel_shuffle",
            "pixel_unshuffle", "poisson_nll_loss", "rms_norm", "triplet_margin_loss"]
__all__ += ["adaptive_avg_pool3d", "adaptive_max_pool3d", "avg_pool3d", "conv3d",
            "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "dropout3d", "max_pool3d"]
__all__ += ["alpha_dropout", "celu_", "channel_shuffle", "elu_", "feature_alpha_dropout",
            "gumbel_softmax", "hardtanh_", "hinge_embedding_loss", "leaky_relu_",
            "multi_margin_loss", "multilabel_margin_loss", "multilabel_soft_margin_loss", "pdist",
            "relu_", "rrelu", "rrelu_", "selu_", "soft_margin_loss", "threshold_",
            "triplet_margin_with_distance_loss"]
__all__ += ["adaptive_max_pool1d_with_indices", "adaptive_max_pool2d_with_indices",
            "adaptive_max_pool3d_with_indices", "fold", "instance_norm", "local_response_norm",
            "lp_pool1d", "lp_pool2d", "lp_pool3d", "max_pool1d_with_indices",
            "max_pool2d_with_indices", "max_pool3d_with_indices", "max_unpool1d", "max_unpool2d",
            "max_unpool3d", "unfold", "upsample", "upsample_bilinear", "upsample_nearest"]
