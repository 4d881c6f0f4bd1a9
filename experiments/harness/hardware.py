"""Whether the hardware a run asks for is here, asked before anything heavy is imported."""

from __future__ import annotations


def missing_gpu() -> str | None:
    """Why ``--device cuda`` cannot run here (no CUDA GPU that CuPy or JAX sees), or None.

    jaxstream (and so NumPy and JAX) is imported only when asked, after the
    command line has limited the frameworks' threads.
    """
    from jaxstream.streams import cuda_device_count

    if cuda_device_count() > 0:
        return None
    return (
        "--device cuda needs a CUDA GPU, and neither CuPy nor JAX sees one here; on a machine "
        "with one, pip install -e '.[cuda13]' or '.[cuda12]' (CuPy and JAX's GPU plugin), or "
        "run without --device cuda"
    )


def gpu_name(index: int = 0) -> str:
    """CUDA GPU `index`'s name as CuPy reports it, so a record says which GPU measured it."""
    from jaxstream.devices import require_cupy

    name = require_cupy("the GPU's name").cuda.runtime.getDeviceProperties(index)["name"]
    return name.decode() if isinstance(name, bytes) else str(name)
