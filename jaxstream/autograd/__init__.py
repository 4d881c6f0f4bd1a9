"""Reverse-mode automatic differentiation with PyTorch's engine semantics."""

from . import graph
from .anomaly import detect_anomaly, is_anomaly_enabled
from .api import backward, grad
from .engine import (
    engine_threads,
    get_max_reentrant_depth,
    set_max_reentrant_depth,
    shutdown_engine_threads,
)
from .function import Function, FunctionCtx, FunctionNode
from .grad_mode import (
    enable_grad,
    is_grad_enabled,
    is_multithreading_enabled,
    no_grad,
    set_grad_enabled,
    set_multithreading_enabled,
)
from .graph import AccumulateGrad, GraphRoot, InputMetadata, Node, RemovableHandle
from .graph_task import is_trimming_enabled, queue_callback, set_trimming_enabled

__all__ = [
    "AccumulateGrad",
    "Function",
    "FunctionCtx",
    "FunctionNode",
    "GraphRoot",
    "InputMetadata",
    "Node",
    "RemovableHandle",
    "backward",
    "detect_anomaly",
    "enable_grad",
    "engine_threads",
    "get_max_reentrant_depth",
    "grad",
    "graph",
    "is_anomaly_enabled",
    "is_grad_enabled",
    "is_multithreading_enabled",
    "is_trimming_enabled",
    "no_grad",
    "queue_callback",
    "set_grad_enabled",
    "set_max_reentrant_depth",
    "set_multithreading_enabled",
    "set_trimming_enabled",
    "shutdown_engine_threads",
]
