"""Input Hessians of an MLP with and without trimming, after PyTorch PR #82544.

``grad(..., inputs=x)`` needs only the input-gradient half of every linear
layer's backward; trimming tells each node which of its inputs the engine will
use, so the weight-gradient matmuls are skipped. Variant A computes
``h = d/dx sum(dy/dx)``; variant A' does the same in the form of the PR's
snippet (create_graph=True on both grads); variant B (training) then
backpropagates ``sum(h ** 2)`` into the weights. Each runs with tanh and with the
PR's ReLU. jaxstream runs with trimming off and on, on both backends and under
``js.compile``, beside PyTorch eager, ``torch.func`` and ``jax.jit`` of composed
``jax.grad``.

The model is ``experiments.workloads.hessian_model``; here are the peers
(``peers``), the correctness checks (``checks``), what the PR measured
(``pr82544``) and the run with its table (``experiment``).
"""

from experiments.hessian.experiment import EXPERIMENT

__all__ = ["EXPERIMENT"]
