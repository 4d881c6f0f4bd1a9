"""The autograd graph: nodes, edges, the metadata of node inputs, saved tensors, hooks.

An edge is a `(node, input_nr)` pair: the gradient flows into input `input_nr`
of `node`. A `None` node marks an input that needs no gradient. This module
knows nothing of the engine: a node asks the graph task that runs it (found in
`exec_state`) which of its gradients are needed.
"""

from __future__ import annotations

import itertools
import sys
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from .. import instrumentation
from ..streams import current_stream, stream_for
from .exec_state import exec_state

if TYPE_CHECKING:
    from ..tensor import Tensor

# AccumulateGrad nodes get the largest sequence number, so that the ready queue
# runs them as soon as they are ready and a leaf's `.grad` is written early.
ACCUMULATE_GRAD_SEQUENCE_NR = sys.maxsize

_sequence_nrs = itertools.count()
_hook_ids = itertools.count()


def hook_name(hook: Callable) -> str:
    """How errors name a hook."""
    return getattr(hook, "__name__", repr(hook))


class InputMetadata:
    """What a gradient flowing into a node input must look like: `tensor`'s metadata.

    `stream` is the stream the tensor's kernel ran on (None on the cpu): its
    device's current stream when it was made, XLA's for a JAX tensor; the stream
    its gradient is consumed on in backward (Note [Streaming backward] in
    input_buffer.py).
    """

    __slots__ = ("shape", "dtype", "device", "array_backend", "stream")

    def __init__(self, tensor: Tensor) -> None:
        dev = tensor.device
        self._describe(
            tensor, stream_for(dev, tensor.array_backend) if dev.is_accelerator else None
        )

    @classmethod
    def on_stream(cls, tensor: Tensor, stream: Any) -> InputMetadata:
        """`tensor`'s metadata, its kernel having run on `stream`, which the caller looked
        up already (the op dispatcher: Note [An op on an accelerator] in ops/dispatch.py)."""
        meta = object.__new__(cls)
        meta._describe(tensor, stream)
        return meta

    def _describe(self, tensor: Tensor, stream: Any) -> None:
        array = tensor.array  # read directly: this runs for every recorded op
        shape = array.shape
        self.shape = shape if type(shape) is tuple else tuple(shape)
        self.dtype = array.dtype
        self.device = tensor.device
        self.array_backend = tensor.array_backend
        self.stream = stream

    def is_expandable_to(self, shape: tuple) -> bool:
        """Whether a gradient of `shape` is a broadcast of this input (so it can be summed back)."""
        mine = self.shape
        if len(mine) > len(shape):
            return False
        for m, s in zip(reversed(mine), reversed(shape), strict=False):
            if m != s and m != 1:
                return False
        return True


class RemovableHandle:
    """Returned by every `register_*hook`; `remove()` unregisters the hook."""

    __slots__ = ("_hooks", "id")

    def __init__(self, hooks: dict) -> None:
        self._hooks = hooks
        self.id = next(_hook_ids)

    def remove(self) -> None:
        self._hooks.pop(self.id, None)

    def __enter__(self) -> RemovableHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()


class Node:
    """A backward function: maps gradients of its outputs to gradients of its inputs.

    `next_edges[i]` says where the gradient of forward input `i` goes;
    `input_metadata[j]` describes the gradient of forward output `j`.
    `stream` is the stream the forward ran on (None on the cpu); the backward
    runs on it. The hook tables (None until a hook is registered) are read by
    the engine in the order of Note [Hook order] (hooks.py): `tensor_pre_hooks` maps a
    handle id to `(output_nr, hook)`, `retains_grad_hooks` maps an output number
    to the hook of the tensor that retains its grad, `pre_hooks` and
    `post_hooks` map handle ids to node hooks.
    """

    __slots__ = (
        "next_edges",
        "input_metadata",
        "sequence_nr",
        "topological_nr",
        "stream",
        "pre_hooks",
        "post_hooks",
        "tensor_pre_hooks",
        "retains_grad_hooks",
        "_metadata",
        "__weakref__",
    )

    def __init__(self, next_edges: tuple, sequence_nr: int | None = None) -> None:
        self.next_edges = next_edges
        self.input_metadata: Sequence[InputMetadata] = []
        self.sequence_nr = next(_sequence_nrs) if sequence_nr is None else sequence_nr
        topo = 0
        for fn, _ in next_edges:
            if fn is not None and fn.topological_nr >= topo:
                topo = fn.topological_nr + 1
        self.topological_nr = topo
        self.stream = None
        self.pre_hooks: dict | None = None
        self.post_hooks: dict | None = None
        self.tensor_pre_hooks: dict | None = None
        self.retains_grad_hooks: dict | None = None
        self._metadata: dict | None = None

    def name(self) -> str:
        return type(self).__name__

    def apply(self, grads: list) -> list:
        raise NotImplementedError(f"{self.name()} does not implement apply")

    def release_variables(self) -> None:
        """Free saved tensors after a backward that does not keep the graph."""

    def needs_input_grad(self) -> tuple:
        """For each forward input: does any path of the running backward need its gradient?

        Outside a backward, every input with an edge does. Inside, the graph
        task answers, with `exec_info` trimming (see `set_trimming_enabled`).
        """
        task = exec_state.graph_task
        if task is None or not task.exec_info:
            return tuple([fn is not None for fn, _ in self.next_edges])
        return task.needs_input_grad(self)

    def __call__(self, *grads: Any) -> Any:
        out = self.apply(list(grads))
        return out[0] if len(out) == 1 else tuple(out)

    @property
    def num_inputs(self) -> int:
        return len(self.input_metadata)

    @property
    def next_functions(self) -> tuple:
        return tuple(self.next_edges)

    @property
    def metadata(self) -> dict:
        if self._metadata is None:
            self._metadata = {}
        return self._metadata

    def register_hook(self, fn: Callable) -> RemovableHandle:
        """Post hook `fn(grad_inputs, grad_outputs)`; a non-None result replaces grad_inputs."""
        if self.post_hooks is None:
            self.post_hooks = {}
        handle = RemovableHandle(self.post_hooks)
        self.post_hooks[handle.id] = fn
        return handle

    def register_prehook(self, fn: Callable) -> RemovableHandle:
        """Pre hook `fn(grad_outputs)`; a non-None result replaces grad_outputs."""
        if self.pre_hooks is None:
            self.pre_hooks = {}
        handle = RemovableHandle(self.pre_hooks)
        self.pre_hooks[handle.id] = fn
        return handle

    def register_tensor_pre_hook(self, output_nr: int, fn: Callable) -> RemovableHandle:
        """A hook on the gradient of output `output_nr` (what `Tensor.register_hook` adds)."""
        if self.tensor_pre_hooks is None:
            self.tensor_pre_hooks = {}
        handle = RemovableHandle(self.tensor_pre_hooks)
        self.tensor_pre_hooks[handle.id] = (output_nr, fn)
        return handle

    def __repr__(self) -> str:
        return f"<{self.name()} object at {id(self):#x}>"


# Note [Post-accumulate hooks]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# A leaf's post-accumulate-grad hooks (`Tensor.register_post_accumulate_grad_hook`) run in
# its AccumulateGrad right after a gradient has been summed into `.grad`, as in PyTorch:
# after the leaf's tensor hooks (Note [Hook order] in hooks.py), in registration order,
# under the leaf's lock (a hook that steps an optimizer on the leaf sees, and leaves, a
# `.grad` no other backward is adding to), on the thread and under the stream of the
# accumulation (the node's, Note [Streaming backward] in input_buffer.py), and through the
# instrumentation like every hook. A hook gets the leaf and returns None. They run only where
# something is accumulated: not under `grad()`, not for a leaf that `backward(inputs=)`
# leaves out, not for a None gradient. A leaf without them pays one attribute test.


class AccumulateGrad(Node):
    """The sink of a leaf tensor: accumulates the incoming gradient into `variable.grad`.

    A leaf holds its AccumulateGrad weakly, so there is one per leaf while any
    graph that uses the leaf is alive. The leaf's tensor hooks (`leaf_hooks`,
    shared with the leaf) are this node's tensor pre-hooks (see Note [Hook
    order] in hooks.py); its post-accumulate-grad hooks run after the
    accumulation (Note [Post-accumulate hooks]). It is made by the first op
    that uses the leaf, so its stream, on which the hooks and the accumulation
    run, is that op's stream.
    """

    __slots__ = ("variable", "_lock")

    def __init__(self, variable: Tensor, leaf_hooks: dict | None) -> None:
        super().__init__((), ACCUMULATE_GRAD_SEQUENCE_NR)
        self.variable = variable
        # Backwards on several threads may accumulate into one leaf at once; the leaf has
        # one accumulator at a time, so this is the leaf's lock (Note [One accumulator per
        # leaf] in tensor.py).
        self._lock = threading.Lock()
        self.input_metadata = [InputMetadata(variable)]
        self.stream = self.input_metadata[0].stream
        self.tensor_pre_hooks = leaf_hooks

    def apply(self, grads: list) -> list:
        new_grad = grads[0]
        variable = self.variable
        if new_grad is not None and variable.requires_grad:
            with self._lock:
                variable.accumulate_grad(new_grad)
                if variable._post_accumulate_grad_hooks:
                    self._call_post_accumulate_hooks(variable)
        return []

    def _call_post_accumulate_hooks(self, variable: Tensor) -> None:
        """See Note [Post-accumulate hooks]; the caller holds the leaf's lock."""
        observer = instrumentation.current()
        task = exec_state.graph_task
        for hook in list(variable._post_accumulate_grad_hooks.values()):
            result = observer.call_hook("post_accumulate", task, self, hook, variable)
            if result is not None:
                raise RuntimeError(
                    f"post accumulate grad hook '{hook_name(hook)}' of a leaf (shape "
                    f"{tuple(variable.shape)}) returned a {type(result).__name__}; it must "
                    "return None. To change the gradient, assign or update leaf.grad in "
                    "the hook, or use register_hook"
                )


class GraphRoot(Node):
    """The dummy root used when a backward starts from several tensors.

    Its input metadata describes the seeds as the calling thread made them, so
    `stream` is the caller's current stream on the first seed's accelerator (as
    in PyTorch): the root runs under it on whichever thread runs it, a pool
    thread after a reentrant hand-off included. `apply` also orders that
    thread's current stream on each other seed's device after the seed's
    stream, so every seed reaches its consumer ordered after the stream that
    made it (Note [Streaming backward] in input_buffer.py).
    """

    __slots__ = ("_grads",)

    def __init__(self, roots: list, grads: list) -> None:
        super().__init__(tuple(roots))
        self._grads = grads
        self.input_metadata = [InputMetadata(g) for g in grads]
        self.stream = next((m.stream for m in self.input_metadata if m.stream is not None), None)

    def apply(self, grads: list) -> list:
        for meta in self.input_metadata:
            seed_stream = meta.stream
            if seed_stream is not None and seed_stream != self.stream:
                here = current_stream(seed_stream.device)
                if here != seed_stream:
                    here.wait_stream(seed_stream)
        return list(self._grads)


def freed_error(node: Node) -> RuntimeError:
    return RuntimeError(
        f"Trying to backward through the graph a second time (through {node.name()}), or to "
        "access its saved tensors after they have already been freed. Saved intermediate "
        "values of the graph are freed when you call .backward() or grad(). Specify "
        "retain_graph=True if you need to backward through the graph a second time or to "
        "access saved tensors after calling backward."
    )


class SavedTensor:
    """A tensor saved for backward, with the version it had when it was saved.

    An input is kept as the tensor itself. Of an output only its array, backend,
    device and class are kept (keeping the tensor would make a reference cycle
    through its own grad_fn; `detach()` would register a view with the output's
    base on every op that saves its output): it becomes an untracked alias of
    that value, with the node as grad_fn, when unpacked. The saved version guards
    the value. `unpack_array` gives the array alone, as a compiled backward needs it.
    """

    __slots__ = (
        "_tensor",
        "_array",
        "_backend",
        "_device",
        "_cls",
        "_output_nr",
        "_version_counter",
        "_saved_version",
    )

    def __init__(self, tensor: Tensor, output_nr: int | None = None) -> None:
        self._version_counter = counter = tensor.version_counter
        self._saved_version = counter[0]
        if output_nr is None:
            self._tensor = tensor
        else:
            self._tensor = None
            self._array = tensor.array
            self._backend = tensor.array_backend
            self._device = tensor.device
            self._cls = type(tensor)
            self._output_nr = output_nr

    def unpack(self, node: Node) -> Tensor:
        if self._version_counter[0] != self._saved_version:
            raise self._modified_error(node)
        if self._tensor is not None:
            return self._tensor
        alias = self._cls.wrap(self._array, self._backend, self._device)
        alias.version_counter = self._version_counter
        return alias.set_history(node, self._output_nr)

    def unpack_array(self, node: Node) -> Any:
        """The saved value's array, checked as `unpack` checks it, with no tensor made."""
        if self._version_counter[0] != self._saved_version:
            raise self._modified_error(node)
        return self._array if self._tensor is None else self._tensor.array

    def _modified_error(self, node: Node) -> RuntimeError:
        what = "an input" if self._tensor is not None else f"output {self._output_nr}"
        like = self._array if self._tensor is None else self._tensor.array
        return RuntimeError(
            f"one of the tensors needed for gradient computation has been modified by an "
            f"inplace operation: {what} of {node.name()} (shape {tuple(like.shape)}, "
            f"dtype {like.dtype}) is at version {self._version_counter[0]}; expected "
            f"version {self._saved_version} instead. Hint: clone() the tensor before "
            "modifying it in place, or do the in-place operation after the backward."
        )
