"""The one-kernel twins of vjps: fused kernels, and the array twins the host runs.

A vjp rule is written in jaxstream ops, so that `create_graph` records it and
differentiates it again. Where nothing is recorded the same gradient can come from
one kernel: a fused op on any backend (Note [Fused vjps without create_graph]), and on
the host's NumPy arrays a plain function of the arrays, called with no op dispatched
(Note [Array vjps on the host]). The tables (`rules.py` and the others) attach a twin
to a rule on the rule's own line; `OpNode` (opdef.py) picks the way.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from ..autograd.grad_mode import state as grad_state
from ..tensor import Tensor
from .dispatch import apply
from .opdef import PASS_THROUGH, OpContext, OpDef, Vjp


def fused(fn: Callable, host: Callable | None = None) -> Callable:
    """A kernel of several elementwise steps; on JAX it is compiled once, so XLA fuses
    the steps into one pass instead of dispatching each eagerly. Elsewhere `host`, of the
    same signature, runs in its place where given: a form that writes its steps into one
    new array, since each step's fresh array costs NumPy more than its arithmetic."""
    jitted = jax.jit(functools.partial(fn, jnp))
    eager = fn if host is None else host

    @functools.wraps(fn)
    def kernel(xp: Any, *arrays: Any) -> Any:
        return jitted(*arrays) if xp is jnp else eager(xp, *arrays)

    return kernel


# Note [Fused vjps without create_graph]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# A vjp written as several jaxstream ops (cos's `g * -x.sin()`) dispatches each of
# them, and on tiny tensors each dispatch costs more than its arithmetic. Under
# create_graph those ops must run one by one: they record PyTorch's double-backward
# graph (MulBackward0, NegBackward0, SinBackward0 for cos). Without it (grad mode off
# in the backward, so nothing would be recorded) the same gradient can come from one
# kernel: `fused_vjp(kernel, composite)` calls `kernel(xp, g, *saved)` instead, where
# `saved` is the inputs the op saved (or its output, for a rule that reads only that),
# as one non-recording op, compiled and fused by XLA on JAX. tests/test_fused_vjps.py
# checks that the two ways agree with each other and with jax.grad for every such rule.

# Note [Array vjps on the host]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# Even one dispatched op per gradient costs more than its arithmetic on tiny tensors: the
# tensor checks, the node test, the `OpContext`, the rule's own frame. So on the host (a
# backend that `runs_array_twins`, NumPy's, on the cpu or a sim device), with grad mode off,
# an `OpNode` whose every vjp has an *array twin* skips the rules and `apply` altogether:
# `OpNode._array_rules` calls each needed twin, `kernel(xp, g, *saved inputs)` on the arrays
# (or `kernel(xp, g, output)`; a twin that reads the op's params, such as the axis of
# log_softmax, gets the input shapes and the params after them), and wraps what it returns,
# or passes `g` on itself where the twin is `PASS_THROUGH`. `with_array_twin` gives a vjp
# its twin on the vjp's own line of the table; a fused vjp's kernel is its twin unless it
# names a faster one for NumPy (`host=`). The saved tensors are still checked against
# in-place changes, and the engine still validates the gradients (a broadcast operand's is
# summed back there). An op with some vjp lacking a twin runs its rules as before; so does
# every op under create_graph, and on JAX (Note [Compiled backward on JAX]). On a sim
# device's host arrays the twins run too where no one watches each kernel (the stream checks
# off and no virtual clock open), each array they make charged to the device's memory as an
# op's output is (Note [Sim device memory]); with the checks on, or a clock open, the rules
# run op by op, so that the sanitizer and the clock see each kernel. The engine's sum of two
# gradients of one input on the host takes the same short cut (`input_buffer._sum`).
# tests/test_fused_vjps.py checks each twin against its rule and against jax.grad.


def fused_vjp(
    kernel: Callable, composite: Vjp, reads_output: bool = False, host: Callable | None = None
) -> Vjp:
    """`composite` with a one-kernel twin for backward without create_graph:
    `kernel(xp, g, *saved inputs)`, or `kernel(xp, g, output)` where `reads_output`
    (Note [Fused vjps without create_graph]). `host`, of the same signature, is its array
    twin where one formulation is faster on NumPy; by default the kernel is."""
    op = OpDef(kernel.__name__.lstrip("_"), None, fused(kernel))

    def vjp(g: Tensor, ctx: OpContext) -> Tensor:
        if grad_state.grad_enabled:
            return composite(g, ctx)
        if reads_output:
            return apply(op, g, ctx.output)
        return apply(op, g, *ctx.saved_inputs())

    return with_array_twin(kernel if host is None else host, reads_output)(vjp)


def with_array_twin(
    kernel: Callable | Any, reads_output: bool = False, reads_params: bool = False
) -> Callable[[Vjp], Vjp]:
    """Give a vjp its array twin, `kernel(xp, g, *saved inputs)` (or `kernel(xp, g,
    output)` where `reads_output`) on the host's arrays, or `PASS_THROUGH` for a vjp
    that returns `g` itself (Note [Array vjps on the host]). A twin that `reads_params`
    gets the node's input shapes and params after those: `kernel(xp, g, ..., shapes,
    params)`."""
    twin = kernel if kernel is PASS_THROUGH else (kernel, reads_output, reads_params)

    def give(vjp: Vjp) -> Vjp:
        vjp.array_twin = twin
        return vjp

    return give


# Note [A select as a bit mask on the host]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# NumPy's `where` branches on every element: on a mask without runs (relu's, over a layer
# of activations) it took 50 us for 256x64 float32, where an elementwise product took 7.
# `where(keep, g, 0)` is the same select as and-ing g's bits with all ones where kept and
# all zeros elsewhere, which NumPy runs as three vectorized passes: +0.0 where dropped (as
# PyTorch's threshold_backward, where `g * keep` would give -0.0, and NaN for an infinite
# g), and g's own bits, NaN and infinities included, where kept.
_UNSIGNED_OF_SIZE = {2: "uint16", 4: "uint32", 8: "uint64"}


def kept_or_zero(xp: Any, keep: Any, g: Any) -> Any:
    """`where(keep, g, 0)` for host arrays, as a bit mask where g is a float array and
    keep a boolean one of its shape (Note [A select as a bit mask on the host])."""
    keep = xp.asarray(keep)  # a 0-d array, where `keep` is a NumPy scalar
    unsigned = _UNSIGNED_OF_SIZE.get(g.dtype.itemsize)
    if (
        unsigned is None
        or g.dtype.kind != "f"
        or keep.dtype.kind != "b"
        or keep.shape != g.shape
    ):
        return xp.where(keep, g, xp.zeros_like(g))
    mask = keep.astype(unsigned)
    xp.negative(mask, out=mask)  # 1 -> all ones; in place, as a scalar's negation would warn
    return (g.view(unsigned) & mask).view(g.dtype)
