"""One training step of the digits MLP, the one a researcher writes first.

A 64 -> 64 -> 10 ReLU MLP on scikit-learn's digits, trained with Adam on the
cross-entropy: jaxstream on its NumPy and JAX backends beside PyTorch eager
(``torch.optim.Adam``) and ``jax.jit`` + optax (one compiled step), all from the
same weights. The model and data are ``experiments.workloads.digits_mlp``; here are
the peers (``peers``), the loss-agreement check (``checks``) and the run with its
table (``experiment``).
"""

from experiments.digits_training.experiment import EXPERIMENT

__all__ = ["EXPERIMENT"]
