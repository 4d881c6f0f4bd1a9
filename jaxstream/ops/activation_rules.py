"""The op table of the activations PyTorch gives a backward node of their own: elu (selu and
celu are elus), hardtanh (relu6), hardsigmoid, hardswish, mish, logsigmoid, softshrink,
hardshrink, threshold, glu and prelu.

Same conventions as `rules.py`. An op's vjp is one op of its own backward, as PyTorch's
`elu_backward`, which `create_graph` records under PyTorch's name (EluBackwardBackward0, ...)
and whose vjps are jaxstream ops again; mish's is a composite, as PyTorch's is under
create_graph. Each vjp has its array twin (twins.py). At a kink the gradient takes PyTorch's
side: strictly inside hardtanh's and hardsigmoid's bounds, strictly outside the shrinks'
[-lambd, lambd] and above threshold's threshold, elu's and prelu's negative branch at 0 (and
prelu's second derivatives the positive one, as PyTorch's do). At a NaN input the gradient is
that of PyTorch's vectorized CPU loop (0 for hardtanh, hardsigmoid and the shrinks, NaN for
elu and hardswish), which takes all but a tensor's last few elements: its scalar loop, which
takes those, passes the gradient there instead.

Note [Hardsigmoid has no second derivative]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
PyTorch does not differentiate `hardsigmoid_backward`: a gradient taken with create_graph has
the node `torch::autograd::NotImplemented`, and a backward through it raises. Ours records
that node and raises the same error, so that code runs here exactly where it runs on PyTorch.
"""

from __future__ import annotations

from typing import Any

from ..tensor import Tensor
from .dispatch import apply
from .opdef import OpContext, OpDef
from .rules import WHERE
from .shape_rules import CONCAT
from .twins import fused_vjp, kept_or_zero, with_array_twin


# ------------------------------------------------------------------ kernels
def _logistic(xp: Any, a: Any) -> Any:
    return (xp.tanh(a * 0.5) + 1) * 0.5


def _elu(xp: Any, a: Any, alpha: float, scale: float, input_scale: float) -> Any:
    """`scale * x` above 0, `scale * alpha * (exp(x * input_scale) - 1)` at or below it."""
    negative = xp.expm1(xp.minimum(a, 0) * input_scale) * (alpha * scale)
    return xp.where(a > 0, a * scale, negative)


def _elu_slope(xp: Any, a: Any, alpha: float, scale: float, input_scale: float) -> Any:
    """The slope of elu's negative branch (bounded above 0, where it is not taken)."""
    return xp.exp(xp.minimum(a, 0) * input_scale) * (alpha * scale * input_scale)


def _elu_bw(xp: Any, g: Any, a: Any, alpha: float, scale: float, input_scale: float) -> Any:
    """The negative branch's slope at 0 too (PyTorch's side)."""
    return xp.where(a > 0, g * scale, g * _elu_slope(xp, a, alpha, scale, input_scale))


def _inside(a: Any, min_val: float, max_val: float) -> Any:
    """Where hardtanh passes the gradient: strictly between the bounds."""
    return (a > min_val) & (a < max_val)


def _hardtanh(xp: Any, a: Any, min_val: float, max_val: float) -> Any:
    return xp.clip(a, min=min_val, max=max_val)


def _hardtanh_bw(xp: Any, g: Any, a: Any, min_val: float, max_val: float) -> Any:
    return xp.where(_inside(a, min_val, max_val), g, xp.zeros_like(g))


def _hardsigmoid(xp: Any, a: Any) -> Any:
    return xp.clip(a + 3.0, min=0.0, max=6.0) / 6.0


def _hardsigmoid_bw(xp: Any, g: Any, a: Any) -> Any:
    return xp.where((a > -3.0) & (a < 3.0), g / 6.0, xp.zeros_like(g))


def _hardswish(xp: Any, a: Any) -> Any:
    return a * xp.clip(a + 3.0, min=0.0, max=6.0) / 6.0


def _hardswish_bw(xp: Any, g: Any, a: Any) -> Any:
    """Zero at -3 and below, `g` at 3 and above (PyTorch's sides)."""
    return xp.where(a <= -3.0, xp.zeros_like(g), xp.where(a >= 3.0, g, g * (a / 3.0 + 0.5)))


def _mish(xp: Any, a: Any) -> Any:
    return a * xp.tanh(xp.logaddexp(a, xp.zeros_like(a)))


def _mish_backward(xp: Any, g: Any, a: Any) -> Any:
    t = xp.tanh(xp.logaddexp(a, xp.zeros_like(a)))
    return g * (t + a * _logistic(xp, a) * (1 - t * t))


def _logsigmoid(xp: Any, a: Any) -> Any:
    return -xp.logaddexp(xp.zeros_like(a), -a)


def _logsigmoid_bw(xp: Any, g: Any, a: Any) -> Any:
    return g * _logistic(xp, -a)


def _softshrink(xp: Any, a: Any, lambd: float) -> Any:
    return xp.where(xp.abs(a) <= lambd, xp.zeros_like(a), xp.where(a > 0, a - lambd, a + lambd))


def _hardshrink(xp: Any, a: Any, lambd: float) -> Any:
    return xp.where(xp.abs(a) <= lambd, xp.zeros_like(a), a)


def _shrink_bw(xp: Any, g: Any, a: Any, lambd: float) -> Any:
    """Both shrinks pass `g` strictly outside [-lambd, lambd]."""
    return xp.where(xp.abs(a) > lambd, g, xp.zeros_like(g))


def _threshold(xp: Any, a: Any, threshold: float, value: float) -> Any:
    return xp.where(a <= threshold, value, a)


def _threshold_bw(xp: Any, g: Any, a: Any, threshold: float) -> Any:
    return xp.where(a <= threshold, xp.zeros_like(g), g)


def _halves(a: Any, dim: int) -> tuple[Any, Any]:
    """The two halves of an array or tensor along `dim` (counted from 0), as glu splits it."""
    half = a.shape[dim] // 2
    lead = (slice(None),) * dim
    return a[(*lead, slice(0, half))], a[(*lead, slice(half, None))]


def _glu(xp: Any, a: Any, dim: int) -> Any:
    first, second = _halves(a, dim)
    return first * _logistic(xp, second)


def _glu_bw(xp: Any, g: Any, a: Any, dim: int) -> Any:
    first, second = _halves(a, dim)
    s = _logistic(xp, second)
    return xp.concat((g * s, g * first * s * (1 - s)), axis=dim)


def _prelu(xp: Any, a: Any, w: Any) -> Any:
    return xp.where(a > 0, a, w * a)


def _prelu_bw_a(xp: Any, g: Any, a: Any, w: Any) -> Any:
    return xp.where(a > 0, g, w * g)


def _prelu_bw_w(xp: Any, g: Any, a: Any, *unused: Any) -> Any:
    """Of the broadcast shape: the engine sums it back to the weight's."""
    return xp.where(a > 0, xp.zeros_like(g), a * g)


def _twin(kernel: Any) -> Any:
    """The array twin `kernel(xp, g, *saved, **params)` of a vjp that reads the op's params,
    called as such twins are, `(xp, g, *saved, shapes, params)`."""
    return with_array_twin(
        lambda xp, g, *saved_shapes_params: kernel(
            xp, g, *saved_shapes_params[:-2], **saved_shapes_params[-1]
        ),
        reads_params=True,
    )


def _host_select(keep: Any) -> Any:
    """The array twin of a backward that keeps `g` where `keep(a, **params)`, else 0: the
    host's bit-mask select, as relu's (Note [A select as a bit mask on the host] in twins.py)."""
    return with_array_twin(
        lambda xp, g, a, shapes, params: kept_or_zero(xp, keep(a, **params), g),
        reads_params=True,
    )


# ------------------------------------------------------------------ vjps
# `_d<op>`: the gradient of the op's input; `_d<op>_bw_<input>`: of its backward op's inputs,
# (g, a) in order (and w for prelu's). A backward of a piecewise linear op is constant in `a`.
_zero = with_array_twin(lambda xp, g, *saved: g * 0.0)(lambda g, ctx: g * 0.0)


def _elu_in_place_slope(params: dict) -> None:
    """PyTorch refuses the backward of an in-place elu or celu with a negative alpha."""
    if params["alpha"] < 0:
        raise RuntimeError(
            "In-place elu backward calculation is triggered with a negative slope which is not "
            f"supported (alpha={params['alpha']}). This is caused by calling in-place forward "
            "function with a negative slope, please call out-of-place version instead."
        )


def _elu_in_place_twin(xp: Any, g: Any, a: Any, shapes: tuple, params: dict) -> Any:
    _elu_in_place_slope(params)
    return _elu_bw(xp, g, a, **params)


def _delu_in_place(g: Tensor, ctx: OpContext) -> Tensor:
    _elu_in_place_slope(ctx.params)
    return apply(ELU_BW, g, ctx.inputs[0], **ctx.params)


def _elu_bw_a(xp: Any, gg: Any, g: Any, a: Any, alpha: float, scale: float,
              input_scale: float) -> Any:
    """Strictly below 0 (PyTorch's second derivative is zero at 0)."""
    slope = _elu_slope(xp, a, alpha, scale, input_scale) * input_scale
    return xp.where(a < 0, gg * g * slope, xp.zeros_like(gg))


def _delu_bw_a_composite(gg: Tensor, ctx: OpContext) -> Tensor:
    g, a = ctx.inputs
    p = ctx.params
    slope = (a.clamp(max=0.0) * p["input_scale"]).exp() * (
        p["alpha"] * p["scale"] * p["input_scale"] ** 2)
    return apply(WHERE, a < 0, gg * g * slope, 0.0)


_delu = _twin(_elu_bw)(lambda g, ctx: apply(ELU_BW, g, ctx.inputs[0], **ctx.params))
_delu_in_place = with_array_twin(_elu_in_place_twin, reads_params=True)(_delu_in_place)
_delu_bw_g = _twin(lambda xp, gg, g, a, **p: _elu_bw(xp, gg, a, **p))(
    lambda gg, ctx: apply(ELU_BW, gg, ctx.inputs[1], **ctx.params))
_delu_bw_a = _twin(_elu_bw_a)(_delu_bw_a_composite)
_dhardtanh = _host_select(_inside)(
    lambda g, ctx: apply(HARDTANH_BW, g, ctx.inputs[0], **ctx.params))
_dhardtanh_bw_g = _twin(lambda xp, gg, a, **p: _hardtanh_bw(xp, gg, a, **p))(
    lambda gg, ctx: apply(HARDTANH_BW, gg, ctx.inputs[1], **ctx.params))
_dhardsigmoid = with_array_twin(_hardsigmoid_bw)(
    lambda g, ctx: apply(HARDSIGMOID_BW, g, ctx.inputs[0]))


def _hardsigmoid_not_differentiable(gg: Tensor, ctx: OpContext) -> Tensor:
    """Note [Hardsigmoid has no second derivative]; no array twin, so that it always runs."""
    raise RuntimeError(
        "derivative for aten::hardsigmoid_backward is not implemented (a gradient of "
        f"hardsigmoid of shape {ctx.shapes[1]} taken with create_graph=True). hardsigmoid is "
        "piecewise linear: for a form that differentiates twice, write "
        "F.hardtanh(x / 6 + 0.5, 0.0, 1.0)"
    )


_dhardswish = with_array_twin(_hardswish_bw)(lambda g, ctx: apply(HARDSWISH_BW, g, ctx.inputs[0]))
_dhardswish_bw_g = with_array_twin(lambda xp, gg, g, a: _hardswish_bw(xp, gg, a))(
    lambda gg, ctx: apply(HARDSWISH_BW, gg, ctx.inputs[1]))
_dhardswish_bw_a = with_array_twin(
    lambda xp, gg, g, a: xp.where((a > -3.0) & (a < 3.0), gg * g / 3.0, xp.zeros_like(gg)))(
    lambda gg, ctx: apply(WHERE, (ctx.inputs[1] > -3.0) & (ctx.inputs[1] < 3.0),
                          gg * ctx.inputs[0] / 3.0, 0.0))


def _mish_composite(g: Tensor, ctx: OpContext) -> Tensor:
    """PyTorch's mish gradient under create_graph, op for op (so its graph is PyTorch's)."""
    x = ctx.inputs[0]
    t = x.exp().log1p().tanh()
    return g * (t + x * x.sigmoid() * (1.0 - t * t))


_dmish = fused_vjp(_mish_backward, _mish_composite)
_dlogsigmoid = with_array_twin(_logsigmoid_bw)(
    lambda g, ctx: apply(LOGSIGMOID_BW, g, ctx.inputs[0]))
_dlogsigmoid_bw_g = with_array_twin(lambda xp, gg, g, a: _logsigmoid_bw(xp, gg, a))(
    lambda gg, ctx: apply(LOGSIGMOID_BW, gg, ctx.inputs[1]))


def _dlogsigmoid_bw_a_composite(gg: Tensor, ctx: OpContext) -> Tensor:
    g, a = ctx.inputs
    s = a.sigmoid()
    return gg * g * -(s * (1.0 - s))


_dlogsigmoid_bw_a = with_array_twin(
    lambda xp, gg, g, a: gg * g * -(_logistic(xp, a) * _logistic(xp, -a)))(
    _dlogsigmoid_bw_a_composite)
_shrink_passes = lambda a, lambd: abs(a) > lambd
_dsoftshrink = _host_select(_shrink_passes)(
    lambda g, ctx: apply(SOFTSHRINK_BW, g, ctx.inputs[0], **ctx.params))
_dsoftshrink_bw_g = _twin(lambda xp, gg, a, **p: _shrink_bw(xp, gg, a, **p))(
    lambda gg, ctx: apply(SOFTSHRINK_BW, gg, ctx.inputs[1], **ctx.params))
_dhardshrink = _host_select(_shrink_passes)(
    lambda g, ctx: apply(HARDSHRINK_BW, g, ctx.inputs[0], **ctx.params))
_dhardshrink_bw_g = _twin(lambda xp, gg, a, **p: _shrink_bw(xp, gg, a, **p))(
    lambda gg, ctx: apply(HARDSHRINK_BW, gg, ctx.inputs[1], **ctx.params))
_threshold_passes = lambda a, threshold, value: ~(a <= threshold)  # a NaN passes
_dthreshold = _host_select(_threshold_passes)(
    lambda g, ctx: apply(THRESHOLD_BW, g, ctx.inputs[0], threshold=ctx.params["threshold"]))
_dthreshold_bw_g = _twin(lambda xp, gg, a, **p: _threshold_bw(xp, gg, a, **p))(
    lambda gg, ctx: apply(THRESHOLD_BW, gg, ctx.inputs[1], **ctx.params))
_dglu = _twin(_glu_bw)(lambda g, ctx: apply(GLU_BW, g, ctx.inputs[0], **ctx.params))


def _dglu_bw_g(gg: Tensor, ctx: OpContext) -> Tensor:
    first, second = _halves(ctx.inputs[1], ctx.params["dim"])
    gg_first, gg_second = _halves(gg, ctx.params["dim"])
    s = second.sigmoid()
    return gg_first * s + gg_second * first * s * (1.0 - s)


def _dglu_bw_a(gg: Tensor, ctx: OpContext) -> Tensor:
    g, a = ctx.inputs
    dim = ctx.params["dim"]
    first, second = _halves(a, dim)
    gg_first, gg_second = _halves(gg, dim)
    s = second.sigmoid()
    slope = s * (1.0 - s)
    d_second = gg_first * g * slope + gg_second * g * first * slope * (1.0 - 2.0 * s)
    return apply(CONCAT, gg_second * g * slope, d_second, axis=dim)


_dprelu_a = with_array_twin(_prelu_bw_a)(lambda g, ctx: apply(PRELU_BW_A, g, *ctx.inputs))
_dprelu_w = with_array_twin(_prelu_bw_w)(lambda g, ctx: apply(PRELU_BW_W, g, ctx.inputs[0]))
# PyTorch's second derivatives of prelu take the negative side only strictly below 0, where
# its gradient takes it at 0 too: at 0 they are the positive side's.
_dprelu_bw_a_g = with_array_twin(lambda xp, gg, g, a, w: xp.where(a < 0, w * gg, gg))(
    lambda gg, ctx: apply(WHERE, ctx.inputs[1] < 0, ctx.inputs[2] * gg, gg))
# Both prelu backwards' other vjp: gg * g strictly below 0, else 0.
_dprelu_bw_rest = with_array_twin(
    lambda xp, gg, g, a, *w: xp.where(a < 0, gg * g, xp.zeros_like(gg)))(
    lambda gg, ctx: apply(WHERE, ctx.inputs[1] < 0, gg * ctx.inputs[0], 0.0))
_dprelu_bw_w_g = with_array_twin(lambda xp, gg, g, a: _prelu_bw_w(xp, gg, a))(
    lambda gg, ctx: apply(PRELU_BW_W, gg, ctx.inputs[1]))


# ------------------------------------------------------------------ the table
# OpDef(name, node name, kernel, vjp of input 0, vjp of input 1, ..., what the vjps read).
# The in-place forms are the same ops under PyTorch's names for them (EluBackward1, ...).
# fmt: off
ELU = OpDef("elu", "EluBackward0", _elu, _delu, save_inputs=(0,))
ELU_IN_PLACE = OpDef("elu_", "EluBackward1", _elu, _delu_in_place, save_inputs=(0,))
CELU = OpDef("celu", "CeluBackward0", _elu, _delu, save_inputs=(0,))
CELU_IN_PLACE = OpDef("celu_", "CeluBackward1", _elu, _delu_in_place, save_inputs=(0,))
ELU_BW = OpDef("elu_backward", "EluBackwardBackward0", _elu_bw, _delu_bw_g, _delu_bw_a,
               save_for=((1,), (0, 1)))
HARDTANH = OpDef("hardtanh", "HardtanhBackward0", _hardtanh, _dhardtanh, save_inputs=(0,))
HARDTANH_BW = OpDef("hardtanh_backward", "HardtanhBackwardBackward0", _hardtanh_bw,
                    _dhardtanh_bw_g, _zero, save_for=((1,), ()))
HARDSIGMOID = OpDef("hardsigmoid", "HardsigmoidBackward0", _hardsigmoid, _dhardsigmoid,
                    save_inputs=(0,))
HARDSIGMOID_BW = OpDef("hardsigmoid_backward", "torch::autograd::NotImplemented", _hardsigmoid_bw,
                       _hardsigmoid_not_differentiable, _hardsigmoid_not_differentiable)
HARDSWISH = OpDef("hardswish", "HardswishBackward0", _hardswish, _dhardswish, save_inputs=(0,))
HARDSWISH_BW = OpDef("hardswish_backward", "HardswishBackwardBackward0", _hardswish_bw,
                     _dhardswish_bw_g, _dhardswish_bw_a, save_for=((1,), (0, 1)))
MISH = OpDef("mish", "MishBackward0", _mish, _dmish, save_inputs=(0,))
LOGSIGMOID = OpDef("log_sigmoid", "LogSigmoidBackward0", _logsigmoid, _dlogsigmoid,
                   save_inputs=(0,))
LOGSIGMOID_BW = OpDef("log_sigmoid_backward", "LogSigmoidBackwardBackward0", _logsigmoid_bw,
                      _dlogsigmoid_bw_g, _dlogsigmoid_bw_a, save_for=((1,), (0, 1)))
SOFTSHRINK = OpDef("softshrink", "SoftshrinkBackward0", _softshrink, _dsoftshrink,
                   save_inputs=(0,))
SOFTSHRINK_BW = OpDef("softshrink_backward", "SoftshrinkBackwardBackward0", _shrink_bw,
                      _dsoftshrink_bw_g, _zero, save_for=((1,), ()))
HARDSHRINK = OpDef("hardshrink", "HardshrinkBackward0", _hardshrink, _dhardshrink,
                   save_inputs=(0,))
HARDSHRINK_BW = OpDef("hardshrink_backward", "HardshrinkBackwardBackward0", _shrink_bw,
                      _dhardshrink_bw_g, _zero, save_for=((1,), ()))
THRESHOLD = OpDef("threshold", "ThresholdBackward0", _threshold, _dthreshold, save_inputs=(0,))
THRESHOLD_IN_PLACE = OpDef("threshold_", "ThresholdBackward1", _threshold, _dthreshold,
                           save_inputs=(0,))
THRESHOLD_BW = OpDef("threshold_backward", "ThresholdBackwardBackward0", _threshold_bw,
                     _dthreshold_bw_g, _zero, save_for=((1,), ()))
GLU = OpDef("glu", "GluBackward0", _glu, _dglu, save_inputs=(0,))
GLU_BW = OpDef("glu_backward", "GluBackwardBackward0", _glu_bw, _dglu_bw_g, _dglu_bw_a,
               save_for=((1,), (0, 1)))
PRELU = OpDef("prelu", "PreluKernelBackward0", _prelu, _dprelu_a, _dprelu_w,
              save_for=((0, 1), (0,)))
PRELU_BW_A = OpDef("prelu_backward", "PreluKernelBackwardBackward0", _prelu_bw_a,
                   _dprelu_bw_a_g, _zero, _dprelu_bw_rest, save_for=((1, 2), (), (0, 1)))
PRELU_BW_W = OpDef("prelu_backward", "PreluKernelBackwardBackward0", _prelu_bw_w,
                   _dprelu_bw_w_g, _dprelu_bw_rest, save_for=((1,), (0, 1)))
# fmt: on
