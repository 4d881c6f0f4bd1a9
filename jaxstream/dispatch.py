"""The one door every op goes through.

`apply(op, *args, **params)` checks that the tensor arguments share a backend and
a device, runs the op's kernel on their arrays, wraps the result, and, when grad
mode is on and some input requires grad, records an `OpNode` whose backward is
the op's vjp rule (see `ops/rules.py`). Python scalars may stand for tensors;
they get no edge.

On an accelerator the kernel runs on the current stream of the tensors'
device: the stream sanitizer is told what it read and what it allocated, and
the node and its input metadata remember that stream, on which the engine runs
the backward (Note [Streaming backward] in the engine). On the cpu none of this
happens: the only cost is one test of the device type.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import sanitizer
from .autograd import anomaly
from .autograd.grad_mode import state as grad_state
from .autograd.graph import InputMetadata, Node, SavedTensor, freed_error
from .streams import current_stream
from .tensor import Tensor, gradient_edge


class OpDef:
    """A differentiable op: a forward kernel and a vjp rule written in jaxstream ops.

    `kernel(xp, *arrays, **params)` gets the array namespace (or the backend
    object itself when `backend_kernel` is set, for the few kernels the array
    API lacks). `vjp(g, ctx)` returns one gradient (or None) per argument.
    `saves` names what the vjp reads: argument positions and/or "y" (the output).
    `node_name` is a string or `fn(args, params) -> str`.
    """

    __slots__ = (
        "name", "node_name", "kernel", "vjp", "save_args", "save_output", "backend_kernel", "saves"
    )

    def __init__(
        self,
        name: str,
        node_name: str | Callable | None,
        kernel: Callable | None,
        saves: str = "",
        vjp: Callable | None = None,
        backend_kernel: bool = False,
    ) -> None:
        self.name = name
        self.node_name = node_name
        self.kernel = kernel
        self.vjp = vjp
        self.save_args = frozenset(int(c) for c in saves if c.isdigit())
        self.save_output = "y" in saves
        self.saves = bool(saves)
        self.backend_kernel = backend_kernel

    def __repr__(self) -> str:
        return f"<op {self.name}>"


class OpContext:
    """What a vjp rule sees: saved arguments, the saved output, params, shapes, needs."""

    __slots__ = ("args", "y", "p", "shapes", "needs")

    @property
    def a(self) -> Any:
        return self.args[0]

    @property
    def b(self) -> Any:
        return self.args[1]


class OpNode(Node):
    """The backward node of a built-in op."""

    __slots__ = ("op", "params", "_name", "_saved", "_saved_output", "_shapes")

    def name(self) -> str:
        return self._name

    def apply(self, grads: list) -> list:
        g = grads[0]
        if g is None:
            return [None] * len(self.next_edges)
        saved = self._saved
        if saved is None:
            raise freed_error(self)
        ctx = OpContext()
        ctx.args = [s.unpack(self) if type(s) is SavedTensor else s for s in saved]
        ctx.y = None if self._saved_output is None else self._saved_output.unpack(self)
        ctx.p = self.params
        ctx.shapes = self._shapes
        ctx.needs = self.needs_input_grad()
        return list(self.op.vjp(g, ctx))

    def release_variables(self) -> None:
        if self.op.saves:
            self._saved = None
            self._saved_output = None


def _mismatch(op: OpDef, first: Tensor, i: int, other: Tensor) -> RuntimeError:
    if other._backend is not first._backend:
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
    """Run `op` on `args` (tensors and Python scalars), recording a node if needed."""
    first = None
    requires_grad = False
    for i, a in enumerate(args):
        if type(a) is Tensor:
            if first is None:
                first = a
            elif a._backend is not first._backend or (
                a._device is not first._device and a._device != first._device
            ):
                raise _mismatch(op, first, i, a)
            if a._requires_grad:
                requires_grad = True
    if first is None:
        raise TypeError(f"{op.name} needs at least one Tensor argument")
    backend = first._backend
    out = op.kernel(
        backend if op.backend_kernel else backend.xp,
        *[a._data if type(a) is Tensor else a for a in args],
        **params,
    )
    out = backend.normalize(out)
    dev = first._device
    if dev.type != "cpu":
        record_kernel(op.name, dev, [a._data for a in args if type(a) is Tensor], out)
    result = Tensor._wrap(out, backend, dev)
    if requires_grad and grad_state.grad_enabled and op.vjp is not None:
        record(op, args, params, result)
    return result


def record_kernel(name: str, dev: Any, reads: list, out: Any) -> None:
    """Tell the stream sanitizer about one kernel on `dev`'s current stream.

    An output that views an input's memory is no new buffer: only the reads count.
    """
    stream = current_stream(dev)
    if not sanitizer.enabled_for(dev):
        return
    owner = _storage_owner(out)
    fresh = all(_storage_owner(r) is not owner for r in reads)
    sanitizer.on_kernel(stream, op=name, reads=reads, allocs=(out,) if fresh else ())


def _storage_owner(array: Any) -> Any:
    while True:
        base = getattr(array, "base", None)
        if base is None or not hasattr(base, "shape"):
            return array
        array = base


def record(op: OpDef, args: tuple, params: dict, result: Tensor) -> None:
    node = OpNode(
        tuple(
            gradient_edge(a) if type(a) is Tensor and a._requires_grad else (None, 0) for a in args
        )
    )
    node.op = op
    node.params = params
    name = op.node_name
    node._name = name if type(name) is str else name(args, params)
    meta = InputMetadata.of(result)
    node.input_metadata = [meta]
    node.stream = meta.stream
    save = op.save_args
    node._saved = tuple(
        (SavedTensor(a) if type(a) is Tensor else a) if i in save else None
        for i, a in enumerate(args)
    )
    node._saved_output = SavedTensor(result, 0) if op.save_output else None
    node._shapes = tuple(a._data.shape if type(a) is Tensor else None for a in args)
    if anomaly.state.enabled:
        anomaly.stamp_creation(node)
    result._grad_fn = node
    result._requires_grad = True
