"""Where an op runs: one object per (backend, device) that decides once how ops run there.

Note [Deciding once where an op runs]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
How an op runs depends on two things: the backend of its arrays and the device they are
on. That pair fixes the kernel call (a cached `jax.jit` on JAX, Note [Compiled kernels on
JAX]; the kernel bound to the backend's namespace elsewhere), whether the kernel is launched
on a stream under the device's guard with its watchers told (Note [An op on an accelerator]
in dispatch.py), how a node computes its gradients with grad mode off (one compiled call,
the rules' array twins on the host arrays, or the rules op by op), and how two gradients of
one input are summed. So each pair has one `Venue`, made at its first op, and the op
dispatcher, `OpNode.apply` and the input buffers ask it, where each used to test the
backend's flags and the device's kind by hand.

A venue costs an op no more than those tests did (experiments/device_overhead): it is found
in its device's `venues` by the backend, one dictionary lookup by identity; the dispatcher
reads its decisions as fields and makes the kernel call itself, with no frame between (Note
[The op fast path] in dispatch.py); and on a device no watcher can watch (the cpu), a
node's backward is decided when the venue is made (`fixed_backward`). The backend's flags
are read then too: after a change to them (the tests run JAX's kernels uncompiled so),
`devices.forget_venues()` has every venue made again.

Two things may change while a program runs, so a venue reads them at each call, once:
whether the stream sanitizer checks the device (its switch, Note [Reading a switch on every
op] in devices/env_switch.py) and whether a virtual clock is open (Note [Virtual time]).
They are the device's watchers: while neither watches, a sim device's backward takes the
host's array twins as the cpu's does; while one does, each kernel goes through `apply`, so
that it sees each one. Inside a JAX trace (`js.compile`, `to_jax`) the same venue runs:
the stream work it asks for is skipped there by the streams and the sanitizer themselves
(Note [XLA's stream] in devices/xla.py), one program on XLA's stream being ordered by its
data flow.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .. import device_events
from ..autograd.exec_state import exec_state
from ..streams import stream_for

if TYPE_CHECKING:
    from ..backends.base import Backend
    from ..devices import Device
    from ..tensor import Tensor
    from .opdef import OpDef

COMPILED = "compiled"
"""A node's gradients from one compiled call (Note [Compiled backward on JAX])."""
ARRAY_TWINS = "array twins"
"""A node's gradients from its rules' array twins (Note [Array vjps on the host] in twins.py)."""
RULES = "rules"
"""A node's gradients from its rules, each op dispatched."""


class Venue:
    """How ops on arrays of `backend` on `device` run (Note [Deciding once where an op runs]).

    `compiles` chooses the kernel call (`dispatch.apply` makes it); on an accelerator,
    `launched` gives the stream the kernel ran on and tells the watchers.
    """

    __slots__ = ("backend", "device", "kind", "on_accelerator", "compiles", "_host_twins",
                 "sums_on_host", "fixed_backward")

    def __init__(self, backend: Backend, device: Device) -> None:
        self.backend = backend
        self.device = device
        self.kind = device.kind
        self.on_accelerator = device.is_accelerator
        self.compiles = backend.compiles_kernels
        self._host_twins = backend.runs_array_twins
        self.sums_on_host = backend.runs_array_twins and not device.is_accelerator
        """Whether two gradients of one input are summed as arrays when grad mode is off
        (on an accelerator the sum is an op, so that its stream sees it)."""
        self.fixed_backward = None if device.is_accelerator else self.backward_without_graph()
        """`backward_without_graph()` where no watcher can change it (the cpu has none)."""

    def __repr__(self) -> str:
        return f"<Venue {self.backend.name} on {self.device}>"

    def launched(self, op: OpDef, args: tuple, arrays: list, params: dict, out: Any) -> Any:
        """Op `op` ran its kernel here, an accelerator, under the device's guard: the stream
        it ran on, the backend's there, its watchers told (Note [An op on an
        accelerator] in dispatch.py)."""
        stream = stream_for(self.device, self.backend)
        device_events.op_launched(  # Note [The watchers' bus]
            stream, op, args, arrays, params, out, exec_state.graph_task is not None)
        return stream

    def backward_without_graph(self) -> str:
        """How a node's gradients are computed here with grad mode off: COMPILED, ARRAY_TWINS
        (where the node's rules have them) or RULES. Read at each node: the watchers may
        have changed (Note [Deciding once where an op runs])."""
        kind = self.kind
        if self.compiles:  # the sanitizer sees each kernel of the rules, never one program
            return RULES if kind.sanitized() else COMPILED
        if self._host_twins and (
            not self.on_accelerator or (kind.virtual_clock is None and not kind.sanitized())
        ):
            return ARRAY_TWINS
        return RULES


def venue(backend: Backend, device: Device) -> Venue:
    """The venue of `backend`'s arrays on `device`: made once, then found in `device.venues`."""
    found = device.venues.get(backend)
    if found is None:
        found = device.venues.setdefault(backend, Venue(backend, device))
    return found


def venue_of(t: Tensor) -> Venue:
    """The venue of tensor `t`'s array."""
    return t.device.venues.get(t.array_backend) or venue(t.array_backend, t.device)
