"""The autograd graph: nodes, edges, the metadata of node inputs, saved tensors, hooks.

An edge is a `(node, input_nr)` pair: the gradient flows into input `input_nr`
of `node`. A `None` node marks an input that needs no gradient.
"""

from __future__ import annotations

import itertools
import sys
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .. import sanitizer
from ..streams import current_stream

if TYPE_CHECKING:
    from ..tensor import Tensor

Edge = tuple["Node | None", int]

# AccumulateGrad nodes get the largest sequence number, so that the ready queue
# runs them as soon as they are ready and a leaf's `.grad` is written early.
ACCUMULATE_GRAD_SEQUENCE_NR = sys.maxsize

_sequence_nrs = itertools.count()
_hook_ids = itertools.count()


class _ExecState(threading.local):
    """The graph task that the current thread is evaluating (None outside backward).

    `checkpoint_valid` is False while a node of a backward that only computes
    some gradients (`grad()`, `backward(inputs=)`) runs: a reentrant checkpoint
    cannot honour that.
    """

    graph_task: Any = None
    checkpoint_valid: bool = True


exec_state = _ExecState()


class _Trimming:
    enabled = True


def is_trimming_enabled() -> bool:
    return _Trimming.enabled


class set_trimming_enabled:
    """Turns exec_info trimming of node outputs on or off (global; a function or a context).

    With trimming on (the default), a node computes only the gradients that
    `exec_info` says some captured input or leaf needs (PyTorch PR #82544). With
    it off, every node computes the gradient of every input that requires grad,
    as engines did before that change; the engine still skips unneeded nodes.
    """

    def __init__(self, mode: bool) -> None:
        self._prev = _Trimming.enabled
        _Trimming.enabled = bool(mode)

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        _Trimming.enabled = self._prev


class InputMetadata:
    """What a gradient flowing into a node input must look like.

    `stream` is the current stream of the tensor's device when the tensor was
    made (None on the cpu): the stream its gradient is consumed on in backward
    (see Note [Streaming backward] in the engine).
    """

    __slots__ = ("shape", "dtype", "device", "backend", "stream")

    def __init__(self, shape: tuple, dtype: Any, device: Any, backend: Any, stream: Any = None):
        self.shape = shape
        self.dtype = dtype
        self.device = device
        self.backend = backend
        self.stream = stream

    @classmethod
    def of(cls, tensor: Tensor) -> InputMetadata:
        dev = tensor._device
        stream = None if dev.type == "cpu" else current_stream(dev)
        return cls(tensor.shape, tensor.dtype, dev, tensor._backend, stream)

    def is_expandable_to(self, shape: tuple) -> bool:
        """Whether a gradient of `shape` is a broadcast of this input (so it can be summed back)."""
        mine = self.shape
        if len(mine) > len(shape):
            return False
        for m, s in zip(reversed(mine), reversed(shape), strict=False):
            if m != s and m != 1:
                return False
        return True

    def describe(self) -> str:
        return f"shape {self.shape}, dtype {self.dtype}, device {self.device}"


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
    runs on it.
    """

    __slots__ = (
        "next_edges",
        "input_metadata",
        "sequence_nr",
        "topological_nr",
        "stream",
        "_pre_hooks",
        "_post_hooks",
        "_tensor_pre_hooks",
        "_retains_grad_hooks",
        "_metadata",
        "__weakref__",
    )

    def __init__(self, next_edges: tuple, sequence_nr: int | None = None) -> None:
        self.next_edges = next_edges
        self.input_metadata: list[InputMetadata] = []
        self.sequence_nr = next(_sequence_nrs) if sequence_nr is None else sequence_nr
        topo = 0
        for fn, _ in next_edges:
            if fn is not None and fn.topological_nr >= topo:
                topo = fn.topological_nr + 1
        self.topological_nr = topo
        self.stream = None
        self._pre_hooks: dict | None = None
        self._post_hooks: dict | None = None
        self._tensor_pre_hooks: dict | None = None
        self._retains_grad_hooks: dict | None = None
        self._metadata: dict | None = None

    def name(self) -> str:
        return type(self).__name__

    def apply(self, grads: list) -> list:
        raise NotImplementedError(f"{self.name()} does not implement apply")

    def release_variables(self) -> None:
        """Free saved tensors after a backward that does not keep the graph."""

    def needs_input_grad(self) -> tuple:
        """For each forward input: does any path of the running backward need its gradient?

        Reflects `exec_info` trimming (see `set_trimming_enabled`).
        """
        task = exec_state.graph_task
        exec_info = task.exec_info if task is not None and _Trimming.enabled else None
        if not exec_info:
            return tuple(fn is not None for fn, _ in self.next_edges)
        needs = []
        for fn, _ in self.next_edges:
            info = exec_info.get(fn) if fn is not None else None
            needs.append(info is not None and (info.needed or info.captures is not None))
        return tuple(needs)

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
        if self._post_hooks is None:
            self._post_hooks = {}
        handle = RemovableHandle(self._post_hooks)
        self._post_hooks[handle.id] = fn
        return handle

    def register_prehook(self, fn: Callable) -> RemovableHandle:
        """Pre hook `fn(grad_outputs)`; a non-None result replaces grad_outputs."""
        if self._pre_hooks is None:
            self._pre_hooks = {}
        handle = RemovableHandle(self._pre_hooks)
        self._pre_hooks[handle.id] = fn
        return handle

    def _register_tensor_pre_hook(self, output_nr: int, fn: Callable) -> RemovableHandle:
        if self._tensor_pre_hooks is None:
            self._tensor_pre_hooks = {}
        handle = RemovableHandle(self._tensor_pre_hooks)
        self._tensor_pre_hooks[handle.id] = (output_nr, fn)
        return handle

    def __repr__(self) -> str:
        return f"<{self.name()} object at {id(self):#x}>"


class AccumulateGrad(Node):
    """The sink of a leaf tensor: accumulates the incoming gradient into `variable.grad`.

    A leaf holds its AccumulateGrad weakly, so there is one per leaf while any
    graph that uses the leaf is alive. The leaf's tensor hooks are this node's
    tensor pre-hooks (see Note [Hook order] in the engine). It is made by the
    first op that uses the leaf, so its stream, on which the hooks and the
    accumulation run, is that op's stream.
    """

    __slots__ = ("variable", "_lock")

    def __init__(self, variable: Tensor) -> None:
        super().__init__((), ACCUMULATE_GRAD_SEQUENCE_NR)
        self.variable = variable
        # Backwards on several threads may accumulate into one leaf at once.
        self._lock = threading.Lock()
        self.input_metadata = [InputMetadata.of(variable)]
        self.stream = self.input_metadata[0].stream
        self._tensor_pre_hooks = variable._hooks

    def apply(self, grads: list) -> list:
        new_grad = grads[0]
        variable = self.variable
        if new_grad is not None and variable.requires_grad:
            with self._lock:
                accumulate_into_grad(variable, new_grad)
        return []


def accumulate_into_grad(tensor: Tensor, new_grad: Tensor) -> None:
    """`tensor.grad += new_grad`, the one rule for leaves and `retain_grad`.

    Without grad mode the existing `.grad` tensor is updated in place (its
    holders see the sum, as in PyTorch); with grad mode on (create_graph) the
    sum is recorded so that the gradient stays differentiable.
    """
    from .grad_mode import state

    old = tensor._grad
    if state.grad_enabled:
        tensor._grad = new_grad.clone() if old is None else old + new_grad
    elif old is None:
        tensor._grad = new_grad.detach()._fresh_version()
    else:
        total = old._backend.normalize(old._backend.xp.add(old._data, new_grad._data))
        dev = old._device
        if dev.type != "cpu":
            sanitizer.on_kernel(
                current_stream(dev), op="accumulate_grad", reads=(old._data, new_grad._data),
                allocs=(total,),
            )
        old._set_data(total)


class GraphRoot(Node):
    """The dummy root used when a backward starts from several tensors."""

    __slots__ = ("_grads",)

    def __init__(self, roots: list, grads: list) -> None:
        super().__init__(tuple(roots))
        self._grads = grads

    def apply(self, grads: list) -> list:
        return list(self._grads)


def freed_error(node: Node) -> RuntimeError:
    return RuntimeError(
        f"Trying to backward through {node.name()} a second time (or to access its saved "
        "tensors after they were freed). Saved intermediate values of the graph are freed "
        "when you call .backward() or grad(). Specify retain_graph=True if you need to "
        "backward through the graph a second time or to access saved tensors after "
        "calling backward."
    )


class SavedTensor:
    """A tensor saved for backward, with the version it had when it was saved.

    An input is kept as the tensor itself. An output is kept as its array only
    (keeping the tensor would make a reference cycle through its own grad_fn)
    and becomes a tensor again, with the node as grad_fn, when unpacked.
    """

    __slots__ = ("_tensor", "_data", "_output_nr", "_version_counter", "_saved_version")

    def __init__(self, tensor: Tensor, output_nr: int | None = None) -> None:
        self._version_counter = tensor._version_counter
        self._saved_version = tensor._version_counter[0]
        if output_nr is None:
            self._tensor = tensor
            self._data = None
            self._output_nr = 0
        else:
            self._tensor = None
            self._data = tensor.detach()
            self._output_nr = output_nr

    def unpack(self, node: Node) -> Tensor:
        current = self._version_counter[0]
        if current != self._saved_version:
            what = "an input" if self._tensor is not None else f"output {self._output_nr}"
            like = self._tensor if self._tensor is not None else self._data
            raise RuntimeError(
                f"one of the tensors needed for gradient computation has been modified by an "
                f"in-place operation: {what} of {node.name()} (shape {like.shape}, dtype "
                f"{like.dtype}) is at version {current}; expected version "
                f"{self._saved_version} instead. Hint: clone() the tensor before modifying "
                "it in place, or do the in-place operation after the backward."
            )
        if self._tensor is not None:
            return self._tensor
        return self._data._as_output_of(node, self._output_nr)


def current_execution_order() -> list[Node]:
    """The nodes the current backward will run, in order (multithreading must be off)."""
    import heapq

    from .grad_mode import state

    task = exec_state.graph_task
    if task is None:
        raise RuntimeError("current_execution_order can only be called during a backward pass")
    if state.multithreading_enabled:
        raise RuntimeError(
            "current_execution_order expects the current backward to be executed with "
            "multithreading disabled, e.g. by running:\n\n"
            ">>> with js.autograd.set_multithreading_enabled(False):\n"
            "...     js.grad(...)\n"
        )
    # Replays the engine's single-threaded schedule: a node is ready once every
    # edge into it has delivered, and the ready node created last runs first.
    exec_info = task.exec_info
    dependencies = dict(task.dependencies)
    order: list[Node] = []
    heap = [(-fn.sequence_nr, id(fn), fn) for fn in task.graph_roots]
    heapq.heapify(heap)
    while heap:
        fn = heapq.heappop(heap)[2]
        order.append(fn)
        for next_fn, _ in fn.next_edges:
            if next_fn is None:
                continue
            if exec_info:
                info = exec_info.get(next_fn)
                if info is None or not info.should_execute():
                    continue
            remaining = dependencies[next_fn] - 1
            if remaining:
                dependencies[next_fn] = remaining
            else:
                del dependencies[next_fn]
                heapq.heappush(heap, (-next_fn.sequence_nr, id(next_fn), next_fn))
    return order


def will_engine_execute_node(node: Any) -> bool:
    """Whether the running backward will execute `node`.

    `node` is a Node, or a tensor: its grad_fn, or for a leaf its AccumulateGrad.
    """
    task = exec_state.graph_task
    if task is None:
        raise RuntimeError(
            "will_engine_execute_node should only be called during the backward pass"
        )
    if not isinstance(node, Node):
        if not hasattr(node, "_get_grad_accumulator") or not node.requires_grad:
            raise TypeError(
                "will_engine_execute_node expects a Node or a tensor that requires grad, got "
                f"{type(node).__name__}"
            )
        if node.grad_fn is not None:
            node = node.grad_fn
        else:
            ref = node._grad_accumulator
            node = ref() if ref is not None else None
            if node is None:
                return False
    result = node in task.nodes_in_graph
    if result and task.exec_info:
        info = task.exec_info.get(node)
        if info is None or not info.should_execute():
            return False
        if node.topological_nr == 0 and info.captures is not None:
            raise RuntimeError(
                "A leaf node was passed to will_engine_execute_node but we are currently "
                "running grad(). This is currently not supported."
            )
    return result
