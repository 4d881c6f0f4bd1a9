"""What a built-in op is (`OpDef`) and the backward node it records (`OpNode`).

The op table (`rules.py`) is a list of OpDefs; `dispatch.apply` runs an OpDef's
kernel and, when some input requires grad, calls `record_node` to put an
OpNode in the graph. In backward the OpNode runs the OpDef's vjp rules for the
inputs whose gradient some path needs, and only those: trimming is done here,
once, so that no rule tests it. On JAX without create_graph the rules run as one
compiled call (Note [Compiled backward on JAX] in compiled_backward.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from types import EllipsisType, NoneType
from typing import Any

import numpy as np

from ..autograd import anomaly
from ..autograd.exec_state import exec_state
from ..autograd.grad_mode import state as grad_state
from ..autograd.node import InputMetadata, Node, SavedTensor, freed_error
from ..sanitizer import storage_owner
from ..tensor import Tensor, gradient_edge
from . import compiled_backward
from .venues import ARRAY_TWINS, COMPILED, venue

Vjp = Callable[[Tensor, "OpContext"], Tensor]
JointVjp = Callable[[Tensor, "OpContext", Sequence[bool]], Sequence[Tensor | None]]


class OpDef:
    """A differentiable op: a forward kernel and vjp rules written in jaxstream ops.

    `kernel(xp, *arrays, **params)` gets the array namespace (or the backend
    object itself when `backend_kernel` is set, for the few kernels the array
    API lacks). On JAX it runs under `jax.jit` with the params as statics (Note
    [Compiled kernels on JAX] in compiled_kernels.py), so it must be a pure
    function of its arrays; one that reads values on the host still works, eagerly.
    `node_name` is a string or `fn(args, params) -> str`.

    The backward is one of:

    * `*grads`: one vjp per input, in order, as HIPS autograd's `defvjp`:
      `fn(g, ctx) -> gradient of that input`, or None for an input that gets
      none. The node calls only those whose gradient some path needs and
      gives None for the rest. An op whose last inputs are optional (linear's
      bias) lists their vjps too; those of absent inputs are never called.
    * `joint_grads(g, ctx, needs) -> one gradient or None per input`: one
      function for every input, for variadic ops (concatenate, stack) that
      split one gradient; it reads `needs` (a bool per input) itself.

    With neither the op is not differentiable: no node is recorded.

    `view=True`: the result shares its first input's values, as PyTorch's view
    ops do (Note [Views and in-place ops] in views.py); an in-place op on
    either changes both. Indexing is a view only with a basic index.

    `per_call_params=True`: the params are data that change from call to call
    (an index, a region), so the JAX backend calls the kernel as is instead of
    compiling one per value (Note [Compiled kernels on JAX]).

    What a rule reads is saved at forward time, and nothing else, so that
    in-place changes to other inputs stay legal: `save_inputs` lists input
    positions (`ctx.inputs[i]`, None for the others) and `save_output` keeps
    the output (`ctx.output`). `ctx.params` and `ctx.shapes` are always there.
    Where each input's vjp reads other inputs (mul's gradient of `a` reads `b`),
    `save_for` lists them per input instead of `save_inputs`: an input is then
    saved only when a vjp that reads it may run, that is when its own input
    requires grad, as PyTorch saves a variable only for a gradient that may be
    computed (`x * w` with a frozen `w` keeps no `x`).
    """

    __slots__ = (
        "name",
        "node_name",
        "kernel",
        "grads",
        "joint_grads",
        "save_inputs",
        "save_for",
        "saved_positions",
        "save_output",
        "saves",
        "backend_kernel",
        "differentiable",
        "view",
        "per_call_params",
        "bound",
        "array_vjps",
    )

    def __init__(
        self,
        name: str,
        node_name: str | Callable[[tuple, dict], str] | None,
        kernel: Callable | None,
        *grads: Vjp | None,
        save_inputs: tuple[int, ...] = (),
        save_for: tuple[tuple[int, ...], ...] | None = None,
        save_output: bool = False,
        joint_grads: JointVjp | None = None,
        backend_kernel: bool = False,
        view: bool = False,
        per_call_params: bool = False,
    ) -> None:
        if grads and joint_grads is not None:
            raise ValueError(f"op {name}: give per-input grads or joint_grads, not both")
        self.name = name
        self.node_name = node_name
        self.kernel = kernel
        self.grads = grads
        self.joint_grads = joint_grads
        if save_for is not None:
            if save_inputs:
                raise ValueError(f"op {name}: give save_inputs or save_for, not both")
            save_inputs = tuple(i for reads in save_for for i in reads)
        self.save_inputs = frozenset(save_inputs)
        self.save_for = save_for
        self.saved_positions = tuple(sorted(self.save_inputs))
        self.save_output = save_output
        self.saves = bool(save_inputs) or save_output  # release_variables has something to free
        self.backend_kernel = backend_kernel
        self.view = view
        self.per_call_params = per_call_params
        # Without a backward `dispatch.apply` records no node.
        self.differentiable = bool(grads) or joint_grads is not None
        self.bound: dict[Any, Callable] = {}  # `bind`'s cache, read by dispatch directly
        self.array_vjps = _array_vjps(grads)

    def bind(self, backend: Any) -> Callable:
        """The kernel on `backend` as a function of the arrays and params alone, cached;
        the array API's own function where the kernel is one (Note [The op fast path])."""
        name = getattr(self.kernel, "array_api_name", None)
        if name is not None and not self.backend_kernel:
            bound = getattr(backend.xp, name)
        else:
            bound = partial(self.kernel, backend if self.backend_kernel else backend.xp)
        self.bound[backend] = bound
        return bound

    def __repr__(self) -> str:
        return f"<op {self.name}>"


class _PassThrough:
    """The array twin of a vjp that returns the output gradient itself."""

    def __repr__(self) -> str:
        return "PASS_THROUGH"


PASS_THROUGH = _PassThrough()


def _array_vjps(grads: tuple) -> tuple | None:
    """Each vjp's array twin (Note [Array vjps on the host] in
    twins.py), or None where a vjp has none."""
    if not grads:
        return None
    twins = tuple(None if vjp is None else getattr(vjp, "array_twin", None) for vjp in grads)
    for vjp, twin in zip(grads, twins, strict=True):
        if vjp is not None and twin is None:
            return None
    return twins


_BASIC_INDEX_PARTS = (int, np.integer, slice, NoneType, EllipsisType)


def is_basic_index(index: Any) -> bool:
    """Whether `index` has only ints, slices, None and Ellipsis (NumPy's basic indexing,
    which gives a view; an array or a bool in it copies, as in PyTorch)."""
    parts = index if type(index) is tuple else (index,)
    return all(
        isinstance(p, _BASIC_INDEX_PARTS) and not isinstance(p, bool | np.bool_) for p in parts
    )


class OpContext:
    """What a vjp rule sees.

    `inputs`: the forward inputs the op saved (None elsewhere); `output`: the
    forward output if `save_output`; `params`: the op's keyword params; `shapes`:
    every input's shape (None for Python scalars).
    """

    __slots__ = ("inputs", "output", "params", "shapes", "_positions")

    def __init__(
        self, inputs: list, output: Tensor | None, params: dict, shapes: tuple, positions: tuple
    ) -> None:
        self.inputs = inputs
        self.output = output
        self.params = params
        self.shapes = shapes
        self._positions = positions

    def saved_inputs(self) -> list:
        """The inputs in the op's save positions, in order: None for one that `save_for`
        left unsaved, whose reader does not run."""
        inputs = self.inputs
        return [inputs[i] for i in self._positions if i < len(inputs)]


def rules_of(
    op: OpDef, g: Tensor, inputs: list, output: Any, params: dict, shapes: tuple, needs: Sequence
) -> list:
    """The gradients `op`'s vjp rules give for the inputs in `needs` (None for the others)."""
    ctx = OpContext(inputs, output, params, shapes, op.saved_positions)
    if op.joint_grads is not None:
        return list(op.joint_grads(g, ctx, needs))
    vjps = op.grads
    grads = []
    for i, need in enumerate(needs):
        grads.append(vjps[i](g, ctx) if need and vjps[i] is not None else None)
    return grads


class OpNode(Node):
    """The backward node of a built-in op."""

    __slots__ = ("op", "params", "_name", "_saved", "_saved_output", "_shapes", "_needs")

    def name(self) -> str:
        return self._name

    def apply(self, grads: list) -> list:
        g = grads[0]
        if g is None:
            return [None] * len(self.next_edges)
        saved = self._saved
        if saved is None:
            raise freed_error(self)
        # `needs_input_grad()`, with the answer outside `exec_info` kept from the forward.
        task = exec_state.graph_task
        needs = self._needs if task is None or not task.exec_info else task.needs_input_grad(self)
        if not grad_state.grad_enabled:  # Note [Deciding once where an op runs]
            place = g.device.venues.get(g.array_backend) or venue(g.array_backend, g.device)
            how = place.fixed_backward or place.backward_without_graph()
            if how is COMPILED:
                out = self._compiled(g, saved, needs)
                if out is not None:
                    return out
            elif how is ARRAY_TWINS and self.op.array_vjps is not None:
                return self._array_rules(g, saved, needs)
        inputs = []
        for s in saved:  # a loop, not a comprehension: this runs for every node (see Note
            inputs.append(s.unpack(self) if type(s) is SavedTensor else s)  # [The op fast path])
        output = None if self._saved_output is None else self._saved_output.unpack(self)
        return rules_of(self.op, g, inputs, output, self.params, self._shapes, needs)

    def _compiled(self, g: Tensor, saved: tuple, needs: tuple) -> list | None:
        """The gradients from one compiled call (Note [Compiled backward on JAX]), or None
        where the rules must run op by op."""
        inputs = []
        for s in saved:
            inputs.append(s.unpack_array(self) if type(s) is SavedTensor else s)
        saved_output = self._saved_output
        output = None if saved_output is None else saved_output.unpack_array(self)
        return compiled_backward.run(
            rules_of, self.op, self.params, needs, g, inputs, output, self._shapes
        )

    def _array_rules(self, g: Tensor, saved: tuple, needs: tuple) -> list:
        """The gradients from the vjps' array twins, each one kernel call on the host
        arrays with no op dispatched (Note [Array vjps on the host] in twins.py)."""
        arrays = []
        for i in self.op.saved_positions:  # in place: None where `save_for` saved nothing
            if i < len(saved):
                s = saved[i]
                arrays.append(s.unpack_array(self) if type(s) is SavedTensor else s)
        saved_output = self._saved_output
        output = None if saved_output is None else saved_output.unpack_array(self)
        backend = g.array_backend
        xp, device, array = backend.xp, g.device, g.array
        memory = device.kind if device.kind.counts_memory else None
        grads = []
        twins = self.op.array_vjps
        for i, need in enumerate(needs):
            twin = twins[i]
            if not need or twin is None:
                grads.append(None)
            elif twin is PASS_THROUGH:
                grads.append(g)
            else:
                kernel, reads_output, reads_params = twin
                args = (output,) if reads_output else arrays
                if reads_params:
                    out = kernel(xp, array, *args, self._shapes, self.params)
                else:
                    out = kernel(xp, array, *args)
                out = backend.normalize(out)
                if memory is not None:  # Note [Sim device memory]: counted once, a view too
                    owner = out if getattr(out, "base", None) is None else storage_owner(out)
                    memory.allocate(device.index, (owner,), self._name)
                grads.append(Tensor.wrap(out, backend, device))
        return grads

    def release_variables(self) -> None:
        if self.op.saves:
            self._saved = None
            self._saved_output = None


_NO_EDGE = (None, 0)

# Note [Objects the collector tracks per node]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# A graph lives until its backward, so the objects a forward records outlive Python's
# young generations, and each one the cyclic collector tracks moves it towards a full
# collection: one runs whenever the survivors since the last reach a quarter of all tracked
# objects, and it visits every one of them. The collector's share of a forward therefore
# grows with the tracked objects per node, not with the heap, and on a chain of tiny ops it
# can take as long as the rest of the forward (experiments/engine_overhead measures both
# passes with the collector running). PyTorch's graph lives in C++, where the collector
# never looks; ours keeps the tracked objects per node few instead:
# * a node's `input_metadata` is one tuple shared by every node whose output has the
#   same shape, dtype and backend on the same device and stream (`_output_metadata`):
#   metadata is immutable;
# * an input is saved only when a vjp that reads it may run (`OpDef.save_for`): `y * 2.0`
#   saves the number alone, and its tuple of saved values, holding no tracked object, is
#   untracked by the collector's first look.
# What is left is the node, its edges and the saved tensors a vjp needs (with their version
# counters); an intermediate tensor no vjp saves is freed with its array as soon as the
# forward drops it, as in PyTorch.

SHARED_METADATA_LIMIT = 4096
"""The most output descriptions `_shared_metadata` holds; past it the table starts over."""

_shared_metadata: dict[tuple, tuple[InputMetadata]] = {}
"""(shape, dtype, backend) -> the one-element input metadata of the last node whose output
looked so (Note [Objects the collector tracks per node])."""


def _output_metadata(result: Tensor, stream: Any) -> tuple[InputMetadata]:
    """A new node's `input_metadata`, describing `result`, made on `stream`: shared, where
    two outputs of one shape, dtype and backend are described alike on one device and
    stream (the last one seen of each description is kept)."""
    array = result.array
    key = (array.shape, array.dtype, result.array_backend)
    metas = _shared_metadata.get(key)
    if metas is None or metas[0].device is not result.device or metas[0].stream is not stream:
        if len(_shared_metadata) >= SHARED_METADATA_LIMIT:
            _shared_metadata.clear()  # one call, safe against other recording threads
        metas = _shared_metadata[key] = (InputMetadata.on_stream(result, stream),)
    return metas


def record_node(op: OpDef, args: tuple, params: dict, result: Tensor, stream: Any) -> None:
    """Make `result`, made on `stream` (None on the cpu), the output of a new OpNode of
    `op` applied to `args`."""
    edges, needs, saved, shapes = [], [], [], []
    save = op.save_inputs
    # Only what the vjps that may run read (Note [Objects the collector tracks per node]).
    if op.save_for is not None:
        save, i = (), 0
        for a in args:  # a counter, not zip(): this runs for every product
            if type(a) is Tensor and a._requires_grad:
                save += op.save_for[i]
            i += 1
    for i, a in enumerate(args):  # one pass: this runs once per op in every forward
        if type(a) is Tensor:
            requires_grad = a._requires_grad
            edges.append(gradient_edge(a) if requires_grad else _NO_EDGE)
            needs.append(requires_grad)
            saved.append(SavedTensor(a) if i in save else None)
            shapes.append(a.array.shape)
        else:
            edges.append(_NO_EDGE)
            needs.append(False)
            saved.append(a if i in save else None)
            shapes.append(None)
    node = OpNode(tuple(edges))
    node._needs = tuple(needs)
    node.op = op
    node.params = params
    name = op.node_name
    node._name = name if type(name) is str else name(args, params)
    metas = node.input_metadata = _output_metadata(result, stream)
    node.stream = metas[0].stream
    node._saved = tuple(saved)
    node._saved_output = SavedTensor(result, 0) if op.save_output else None
    node._shapes = tuple(shapes)
    if anomaly.state.enabled:
        anomaly.stamp_creation(node)
    result.set_history(node, 0)
