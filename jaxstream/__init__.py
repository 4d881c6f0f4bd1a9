"""jaxstream: a define-by-run autograd engine with PyTorch's engine semantics,
over NumPy, JAX and CuPy arrays exchanged zero-copy through DLPack."""

from . import amp, autograd, config, profiler, viz
from .autograd import (
    backward,
    enable_grad,
    grad,
    is_grad_enabled,
    no_grad,
    set_grad_enabled,
)
from .autograd.checkpoint import checkpoint
from .devices import Device, device, sim
from .dtypes import get_default_dtype, set_default_dtype
from .jax_interop import jax_function, to_jax
from .ops.creation import (
    ones,
    ones_like,
    randn,
    zeros,
    zeros_like,
)
from .ops.functional import (  # noqa: A004
    abs,
    concatenate,
    cos,
    exp,
    linear,
    log,
    matmul,
    max,
    mean,
    relu,
    sigmoid,
    sin,
    softplus,
    sqrt,
    stack,
    sum,
    tanh,
    where,
)
from .sanitizer import StreamRaceError
from .streams import Event, Stream, current_stream, default_stream, set_device, stream
from .tensor import Tensor, from_dlpack, tensor

__version__ = "0.1.0"

# The public names: everything imported above (each ops module's block lists its own).
__all__ = sorted(name for name in dict(globals()) if not name.startswith("_"))
