"""Device overhead: what an accelerator's host side adds to an op and to a backward node.

A chain of tanh and multiply on 1,024 float32s (experiments/workloads/tanh_mul_chain.py),
timed per op in its forward and per node in its backward, with jaxstream in every place a
machine has (``peers``): the cpu (NumPy and JAX), sim:0 with the stream checks off and on
(NumPy and JAX), cuda:0 over the host stand-in of CuPy (any machine) and, with ``--device
cuda``, cuda:0 for real (CuPy and JAX); against PyTorch on the same device, and against
the floors, one raw call of each op (NumPy's, the stand-in's, CuPy's, a cached
``jax.jit``). Each row is a place and a pass, with three ratios: to jaxstream on the cpu
with the same backend (the targets: sim with the checks off within 1.5x per op and per
node, the stand-in within 1.3x per op), to PyTorch, and to one raw call. Beside
the chain, in the places that calibrate virtual time's host (``calibrating``): a chain of
matrix products per op, and a stream's host work (an event record, a wait, a switch) per
call. The run
(``experiment``) also checks every place's gradient against ``jax.grad`` and profiles
where sim's time goes.
"""

from experiments.device_overhead.experiment import EXPERIMENT

__all__ = ["EXPERIMENT"]
