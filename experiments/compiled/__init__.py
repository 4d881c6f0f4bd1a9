"""``js.compile`` against ``jax.jit`` of the same computation written in JAX.

Two workloads, each timed as one whole step: an MLP training step (forward,
loss, ``backward()``, an SGD update of the parameters in place under
``no_grad``; ``mlp``) and the hessian experiment's workload (the input Hessian
of an MLP, variant A, and a training step on it, variant B) at two batch
sizes. Peers: jaxstream eager on the JAX backend, its ``js.compile``, and
``jax.jit``; the run (``experiment``) reports each ratio to ``jax.jit`` and
where a compiled call's time goes.
"""

from experiments.compiled.experiment import EXPERIMENT

__all__ = ["EXPERIMENT"]
