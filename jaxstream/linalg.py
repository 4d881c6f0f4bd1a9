"""`js.linalg`: PyTorch's `torch.linalg` functions that jaxstream has, each its backend's
own kernel (NumPy's, JAX's or CuPy's `linalg`), differentiable by the standard formulas."""

from .ops.decompositions import linalg_cholesky as cholesky
from .ops.decompositions import linalg_pinv as pinv
from .ops.decompositions import linalg_qr as qr
from .ops.decompositions import linalg_slogdet as slogdet
from .ops.decompositions import linalg_svd as svd
from .ops.linalg import matmul
from .ops.matrices import LinAlgError, det, inv, solve
from .ops.more_products import linalg_cross as cross
from .ops.more_products import matrix_exp, matrix_power
from .ops.reductions import vector_norm

__all__ = [
    "LinAlgError", "cholesky", "cross", "det", "inv", "matmul", "matrix_exp", "matrix_power",
    "pinv", "qr", "slogdet", "solve", "svd", "vector_norm",
]
