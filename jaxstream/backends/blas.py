"""How many threads NumPy's BLAS runs under jaxstream (Note [BLAS threads]).

Note [BLAS threads]
~~~~~~~~~~~~~~~~~~~
NumPy's BLAS (OpenBLAS in NumPy's wheels) splits each large enough product
over a pool of worker threads, one per core, that busy-wait between calls. The
NumPy backend's kernels are small and launched one at a time from Python, on
the calling thread or on the engine's device threads (Note [Device threads] in
autograd/threads.py). A pool sized for the whole machine then competes with
those threads for the same cores, and a product waits for its slowest worker:
when a worker has lost its core to another thread or process, a 0.1 ms product
takes a scheduler tick. On the two-core machine of experiments/digits_training,
busy with other processes, one Adam step of the 64-64-10 MLP took 39 ms at
batch 256 and 68 ms at batch 1024 with NumPy's two BLAS threads, against 1.1
and 2.2 ms with one. What one thread costs on an idle machine: nothing on a
64x64 by 64x64 product (OpenBLAS runs that on one thread anyway), 17 -> 23 us
on a 256-row one and 50 -> 87 us on a 1024-row one.

experiments/cpu_defaults chose the default again by measurement, with PyTorch
beside jaxstream at each library's defaults, in one process and each alone:
NumPy's own thread count was faster on the hessian step's 2000-row products,
slower on a small MLP's step (its BLAS threads wake for products too small to
share), and far slower whenever another process or another library's pool had
the second core. One thread bounds the worst case at a modest cost on large
products, so jaxstream runs NumPy's BLAS with `DEFAULT_THREADS` (one) thread: the
engine, not BLAS, is where jaxstream runs work in parallel. The cap is set through
threadpoolctl when the NumPy backend is first made, on the BLAS libraries
NumPy loaded (those inside NumPy's installation; every BLAS library where
NumPy links a system one), so PyTorch's or SciPy's own pools keep their sizes.
A user who sized the pool by hand (`OPENBLAS_NUM_THREADS`, `OMP_NUM_THREADS`,
`MKL_NUM_THREADS`) keeps it. `set_blas_threads(n)` changes the cap at any time
(large products on an idle many-core machine gain from a pool), and
`set_blas_threads(None)` gives NumPy back its own default.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import numpy as np
from threadpoolctl import ThreadpoolController

DEFAULT_THREADS = 1
HAND_SET_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")

class _NumpyBlas:
    """NumPy's BLAS libraries (found on first use), their own thread counts, jaxstream's cap."""

    lock = threading.Lock()
    controller: ThreadpoolController | None = None
    original: list[int] = []
    cap: int | None = None


def _numpy_blas() -> ThreadpoolController:
    """The BLAS libraries NumPy loaded, found once (their counts before any cap kept)."""
    if _NumpyBlas.controller is None:
        blas = ThreadpoolController().select(user_api="blas")
        install = Path(np.__file__).resolve().parent
        roots = (str(install), str(install.parent / "numpy.libs"))
        inside = [lib.filepath for lib in blas.lib_controllers if lib.filepath.startswith(roots)]
        controller = blas.select(filepath=inside) if inside else blas
        _NumpyBlas.original = [lib.num_threads for lib in controller.lib_controllers]
        _NumpyBlas.controller = controller
    return _NumpyBlas.controller


def set_blas_threads(count: int | None) -> None:
    """Cap NumPy's BLAS at `count` threads, or give it back its own number with None."""
    if count is not None and (type(count) is not int or count < 1):
        raise ValueError(
            f"set_blas_threads: expected a positive int or None (NumPy's own number), got "
            f"{count!r}"
        )
    with _NumpyBlas.lock:
        controller = _numpy_blas()
        if count is None:
            for lib, threads in zip(controller.lib_controllers, _NumpyBlas.original, strict=True):
                lib.set_num_threads(threads)
        else:
            controller.limit(limits=count)
        _NumpyBlas.cap = count


def blas_threads() -> int | None:
    """The cap jaxstream set on NumPy's BLAS threads, or None where it set none."""
    return _NumpyBlas.cap


def apply_default() -> None:
    """Jaxstream's cap, unless the pool was sized by hand (Note [BLAS threads])."""
    if not any(os.environ.get(name) for name in HAND_SET_VARIABLES):
        set_blas_threads(DEFAULT_THREADS)
