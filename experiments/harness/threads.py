"""One intra-op thread per framework unless asked otherwise.

On a shared machine, a spinning thread pool (OpenMP in PyTorch, OpenBLAS under
NumPy, Eigen in XLA) whose threads lose their core to another process can make
a millisecond step take hundreds of milliseconds; single-threaded peers are
both steadier and comparable. The limits are read when the libraries load, so
they must be set before NumPy, PyTorch or JAX is first imported.
"""

from __future__ import annotations

import os
import sys

_THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
_SINGLE_THREADED_XLA = "--xla_cpu_multi_thread_eigen=false"
_LIBRARIES = ("numpy", "torch", "jax")


def limit_intra_op_threads(count: int) -> None:
    """Cap every framework's intra-op threads at ``count``; 0 keeps their defaults."""
    if count == 0:
        return
    loaded = [name for name in _LIBRARIES if name in sys.modules]
    if loaded:
        raise RuntimeError(f"thread limits must be set before importing {', '.join(loaded)}")
    os.environ.update({variable: str(count) for variable in _THREAD_VARIABLES})
    if count == 1:
        flags = os.environ.get("XLA_FLAGS", "")
        if _SINGLE_THREADED_XLA not in flags:
            os.environ["XLA_FLAGS"] = f"{flags} {_SINGLE_THREADED_XLA}".strip()
