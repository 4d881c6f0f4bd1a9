"""Input Hessians of an MLP with and without trimming, after PyTorch PR #82544.

``grad(..., inputs=x)`` needs only the input-gradient half of every linear
layer's backward; trimming tells each node which of its inputs the engine will
use, so the weight-gradient matmuls are skipped. Variant A computes
``h = d/dx sum(dy/dx)``; variant B (training) then backpropagates
``sum(h ** 2)`` into the weights. jaxstream runs with trimming off and on, on
both backends, beside PyTorch eager and ``jax.jit`` of composed ``jax.grad``.

The model is ``experiments.workloads.hessian_model``; here are the peers
(``peers``), the correctness checks (``checks``), what the PR measured
(``pr82544``) and the run with its table (``experiment``).
"""

from experiments.hessian.experiment import EXPERIMENT

__all__ = ["EXPERIMENT"]
