"""`js.linalg`: PyTorch's `torch.linalg` functions that jaxstream has, each its backend's
own kernel (NumPy's, JAX's or CuPy's `linalg`), differentiable by the standard formulas."""

from .ops.linalg import matmul
from .ops.matrices import LinAlgError, det, inv, solve
from .ops.reductions import vector_norm

__all__ = ["LinAlgError", "det", "inv", "matmul", "solve", "vector_norm"]
