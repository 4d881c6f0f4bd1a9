"""The one door every op goes through.

`apply(op, *args, **params)` checks that the tensor arguments share a backend and
a device, runs the op's kernel on their arrays, wraps the result, and, when grad
mode is on and some input requires grad, records an `OpNode` whose backward is
the op's vjp rule (see `opdef.py` and the table in `rules.py`). Python scalars
may stand for tensors; they get no edge. The result of a view op is made a view
of its input (Note [Views and in-place ops] in views.py): one test of `op.view`
for every other op.

On the JAX backend the kernel is called as a cached `jax.jit` of it (Note
[Compiled kernels on JAX] in compiled_kernels.py); elsewhere it is called as is.

On an accelerator the kernel is launched under the device's guard (Note
[Device guards] in devices/kind.py), on the stream its backend runs there
(`stream_for`: the current stream of the tensors' device, or XLA's for JAX
arrays): the stream sanitizer is told what it read and what it produced, and
the node and its input metadata remember that stream, on which the engine runs
the backward (Note [Streaming backward] in autograd/input_buffer.py), each at the
cost Note [An op on an accelerator] says. On the cpu none of this happens: the
only cost is one test of the device.
"""

from __future__ import annotations

from typing import Any

from ..autograd.grad_mode import state as grad_state
from ..tensor import Tensor
from . import compiled_kernels
from .opdef import OpDef, is_basic_index, record_node
from .venues import venue

# Note [The op fast path]
# ~~~~~~~~~~~~~~~~~~~~~~~
# Every op of a forward and every op a vjp rule runs in backward comes through
# `apply`, so on tiny tensors its own Python sets the pace (experiments/engine_overhead).
# The cpu path is one loop over the arguments (device checks, the arrays, whether any
# requires grad), one lookup of the arguments' venue (Note [Deciding once where an op
# runs] in venues.py), whose kernel call is one cached lookup of the kernel bound to the
# backend (`OpDef.bind`: `np.multiply` itself for an array API kernel, no wrapper frame, no
# `getattr` per call), and no node unless an input requires grad with grad mode on, as in
# backward without create_graph. On JAX the kernel is the cached `jax.jit`
# (`compiled_kernels.run`: an op without params is its own key), given the numbers among the
# arguments as cached arrays (Note [Numbers as cached arrays]). Accelerators (guards,
# streams, the sanitizer) take the venue's `launch`.

# Note [An op on an accelerator]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# An op on an accelerator pays, besides the cpu path, for what the device's semantics ask
# and nothing more (experiments/device_overhead times it against the cpu):
# * the device's guard, entered only where the device is not the runtime's current one
#   already (`DeviceKind.is_current`): an op in a backward node, in a `js.stream` block, or
#   on the device its thread works on enters none;
# * one lookup of the stream the kernel runs on (`stream_for`: the thread's current stream
#   of the device, read without a lock, or XLA's for JAX), which the node keeps with its
#   input metadata (`record_node`), shared as a host node's is;
# * the watchers told of the launch (Note [The watchers' bus] in device_events.py) only
#   where one has work: the sanitizer's checks are on for the device (read once per op,
#   Note [Reading a switch on every op] in devices/env_switch.py), or the device counts its
#   memory (sim's, whose charge is a weak reference queued without a lock, Note [Sim device
#   memory] in devices/memory.py), or a virtual clock is open (`DeviceKind.virtual_clock`).
# In backward without create_graph, a node's rules take their array twins on a sim device
# too when no one watches each kernel (Note [Array vjps on the host] in twins.py).


def _mismatch(op: OpDef, args: tuple, first: Tensor, other: Tensor) -> RuntimeError:
    i = next(i for i, a in enumerate(args) if a is other)
    if other.array_backend is not first.array_backend:
        return RuntimeError(
            f"{op.name}: expected all tensors on one backend, but argument {i} is a "
            f"{other.backend} tensor and the first tensor argument is a {first.backend} tensor "
            f"(shapes {other.shape} and {first.shape}). Convert one of them first, e.g. "
            f"t.to(backend={first.backend!r}) (zero-copy through DLPack where the memory allows)."
        )
    return RuntimeError(
        f"{op.name}: expected all tensors on one device, but argument {i} is on "
        f"{other.device} and the first tensor argument is on {first.device} (shapes "
        f"{other.shape} and {first.shape}). Move one of them first, e.g. "
        f"t.to({str(first.device)!r})."
    )


def apply(op: OpDef, *args: Any, **params: Any) -> Tensor:
    """Run `op` on `args` (tensors and Python scalars), recording a node if needed.

    This runs for every op, forward and backward, so the cpu path is kept short
    (Note [The op fast path]).
    """
    first = None
    requires_grad = False
    numbers = False
    arrays = []
    for a in args:  # one pass: checks, the arrays, and whether a node may be needed
        if type(a) is Tensor:
            if first is None:
                first = a
            elif a.array_backend is not first.array_backend or a.device is not first.device:
                raise _mismatch(op, args, first, a)
            if a._requires_grad:
                requires_grad = True
            arrays.append(a.array)
        else:
            numbers = True
            arrays.append(a)
    if first is None:
        raise TypeError(f"{op.name} needs at least one Tensor argument")
    place = first.device.venues.get(first.array_backend) or venue(
        first.array_backend, first.device)  # Note [Deciding once where an op runs]
    if place.on_accelerator and not place.kind.is_current(place.device.index):
        with place.kind.guard(place.device.index):  # Note [An op on an accelerator]
            return apply(op, *args, **params)
    backend = place.backend
    out = backend.normalize(  # the kernel call the venue chose
        compiled_kernels.run(op, backend, arrays, params, numbers) if place.compiles
        else (op.bound.get(backend) or op.bind(backend))(*arrays, **params))
    stream = place.launched(op, args, arrays, params, out) if place.on_accelerator else None
    result = Tensor.wrap(out, backend, place.device)
    if requires_grad and op.differentiable and grad_state.grad_enabled:
        record_node(op, args, params, result, stream)
    if op.view:
        _track_view(op, args[0], params, result)
    return result


def _track_view(op: OpDef, source: Tensor, params: dict, result: Tensor) -> None:
    """Make `result` a view of `source` (Note [Views and in-place ops] in views.py)."""
    index = params.get("index")
    if index is None or is_basic_index(index):
        result.become_view_of(source, ((op, params),))
