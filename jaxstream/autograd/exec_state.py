"""What the current thread is running in the backward pass, as PyTorch's thread-local state.

The engine sets `exec_state.graph_task` while a node of that task runs, on
whichever thread runs it; nodes consult it for what the task needs
(`Node.needs_input_grad`), `queue_callback` for where to queue.
"""

from __future__ import annotations

import threading
from typing import Any


class ExecState(threading.local):
    """The graph task that the current thread is evaluating (None outside backward).

    `checkpoint_valid` is False while a node of a backward that only computes
    some gradients (`grad()`, `backward(inputs=)`) runs: a reentrant checkpoint
    cannot honour that.
    """

    graph_task: Any = None
    checkpoint_valid: bool = True


exec_state = ExecState()
