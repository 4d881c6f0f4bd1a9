"""`js.autograd.graph`: the graph as users see it, as PyTorch's `torch.autograd.graph`.

Nodes, hooks and handles come from node.py; the two questions a hook may ask
about the running backward come from the graph task (graph_task.py).
"""

from .graph_task import current_execution_order, will_engine_execute_node
from .node import (
    ACCUMULATE_GRAD_SEQUENCE_NR,
    AccumulateGrad,
    GraphRoot,
    InputMetadata,
    Node,
    RemovableHandle,
    SavedTensor,
)

__all__ = [
    "ACCUMULATE_GRAD_SEQUENCE_NR",
    "AccumulateGrad",
    "GraphRoot",
    "InputMetadata",
    "Node",
    "RemovableHandle",
    "SavedTensor",
    "current_execution_order",
    "will_engine_execute_node",
]
