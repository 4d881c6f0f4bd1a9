"""jaxstream: a define-by-run autograd engine with PyTorch's engine semantics,
over NumPy, JAX and CuPy arrays exchanged zero-copy through DLPack."""

from . import amp, autograd, config, linalg, nn, optim, profiler, viz
from .autograd import (
    backward,
    enable_grad,
    grad,
    is_grad_enabled,
    no_grad,
    set_grad_enabled,
)
from .autograd.checkpoint import checkpoint
from .compiling import compile  # noqa: A004
from .device_sync import synchronize
from .devices import Device, DeviceGuardError, device, sim
from .devices.memory import OutOfMemoryError
from .dtypes import get_default_dtype, set_default_dtype
from .jax_interop import jax_function, to_jax
from .ops import return_types
from .ops.convolution import conv1d, conv2d
from .ops.creation import (
    arange,
    eye,
    full,
    full_like,
    linspace,
    ones,
    ones_like,
    zeros,
    zeros_like,
)
from .ops.distances import cdist
from .ops.extrema import amax, amin, max, min  # noqa: A004
from .ops.functional import (  # noqa: A004
    abs,
    clamp,
    clip,
    cos,
    erf,
    exp,
    expm1,
    floor_divide,
    gelu,
    leaky_relu,
    linear,
    log,
    log1p,
    maximum,
    minimum,
    relu,
    remainder,
    sigmoid,
    silu,
    sin,
    softplus,
    sqrt,
    square,
    take_along_axis,
    tanh,
    where,
)
from .ops.indexing import (
    argsort,
    gather,
    index_select,
    scatter_add,
    sort,
    topk,
)
from .ops.linalg import (
    addmm,
    baddbmm,
    bmm,
    einsum,
    matmul,
)
from .ops.neural import (
    cross_entropy,
    dropout,
    log_softmax,
    logsumexp,
    mse_loss,
    nll_loss,
    one_hot,
    softmax,
)
from .ops.pointwise import (  # noqa: A004
    all,
    any,
    arctan2,
    atan2,
    clamp_max,
    clamp_min,
    erfinv,
    floor,
    isclose,
    lerp,
    masked_fill,
    nan_to_num,
    round,
    rsqrt,
    sign,
)
from .ops.random import (
    get_rng_state,
    initial_seed,
    manual_seed,
    rand,
    rand_like,
    randint,
    randn,
    randn_like,
    set_rng_state,
    uniform,
)
from .ops.reductions import (  # noqa: A004
    argmax,
    argmin,
    cumprod,
    cumsum,
    logcumsumexp,
    mean,
    prod,
    std,
    std_mean,
    sum,
    var,
    var_mean,
    vector_norm,
)
from .ops.return_types import Size
from .ops.sampling import bernoulli, normal
from .ops.shape_ops import (
    cat,
    chunk,
    concat,
    concatenate,
    expand_dims,
    flatten,
    flip,
    permute_dims,
    reshape,
    split,
    squeeze,
    stack,
    transpose,
    unbind,
    unsqueeze,
)
from .ops.structure import (
    diag,
    ger,
    kron,
    outer,
    roll,
    tile,
    trace,
    tril,
    triu,
)
from .precision import get_float32_matmul_precision, set_float32_matmul_precision
from .sanitizer import StreamRaceError
from .streams import (
    Event,
    Stream,
    current_device,
    current_stream,
    default_stream,
    set_device,
    stream,
    xla_stream,
)
from .tensor import Tensor, from_dlpack, tensor

__version__ = "0.1.0"

# The public names: everything imported above (each ops module's block lists its own).
__all__ = sorted(name for name in dict(globals()) if not name.startswith("_"))
