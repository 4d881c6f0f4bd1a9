"""The computations the experiments time, each written once over any framework's tensors.

- ``chain``: ``y = y * 1.0001`` repeated on a tiny tensor, then a sum;
- ``random_dag``: a seeded random layered DAG of elementwise ops;
- ``hessian_model``: an MLP, its input Hessian and a training step on it;
- ``digits_mlp``: the digits data, a 64-64-10 MLP's initial weights and its loss in JAX.
"""
