"""The CPU at each library's defaults: what a user sees who configures nothing.

Two workloads a researcher runs side by side with PyTorch, in one process and then each
library in a process of its own: the hessian experiment's input Hessian (variant A,
batch 2,000) and an MLP training step (64-128-10, SGD, batch 128). jaxstream's NumPy
backend runs with NumPy's BLAS at one thread and at NumPy's own count, the measurement
that chose jaxstream's default (Note [BLAS threads] in jaxstream/backends/blas.py).
The peers are in ``peers``, the run and its table in ``experiment``.
"""

from experiments.cpu_defaults.experiment import EXPERIMENT

__all__ = ["EXPERIMENT"]
