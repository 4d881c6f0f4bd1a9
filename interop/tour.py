# %% [markdown]
# # A tour of jaxstream
# Percent-format cells: open in Jupyter (jupytext) or VS Code, or run as a script.
# Every cell asserts what it shows, so the tour is also a test.

# %%
import numpy as np

import jaxstream as js

# %% [markdown]
# ## Tensors wrap arrays without copying
# A NumPy array becomes a tensor of the NumPy backend; a JAX array, of the JAX
# backend. `numpy()` gives a read-only view back.

# %%
arr = np.linspace(-1.0, 1.0, 6, dtype=np.float32).reshape(2, 3)
x = js.tensor(arr, requires_grad=True)
assert x.data is arr and x.backend == "numpy" and x.dtype == np.float32
assert np.shares_memory(x.numpy(), arr)

# %% [markdown]
# ## Backward, PyTorch style
# Broadcasting gradients are summed back to each input's shape; dtypes are kept.

# %%
b = js.tensor(np.ones(3, np.float32), requires_grad=True)
loss = js.tanh(x * b + 0.5).sum()
loss.backward()
assert b.grad.shape == (3,) and b.grad.dtype == np.float32
first_grad = x.grad.numpy().copy()
print("x.grad =\n", first_grad)

# %% [markdown]
# ## The graph is inspectable
# Nodes are named like PyTorch's; `next_functions` leads to the leaves'
# `AccumulateGrad` nodes.

# %%
y = (x * 2.0).exp()
print(y.grad_fn.name(), "->", [(fn.name() if fn else None) for fn, _ in y.grad_fn.next_functions])
assert y.grad_fn.name() == "ExpBackward0"

# %% [markdown]
# ## Hooks fire in PyTorch's order
# Tensor hooks, then the retain_grad hook, then node pre-hooks, the node, and
# node post-hooks.

# %%
events = []
h = x * 3.0
h.retain_grad()
h.register_hook(lambda g: events.append("tensor hook"))
h.grad_fn.register_prehook(lambda g: events.append("node pre-hook"))
h.grad_fn.register_hook(lambda gi, go: events.append("node post-hook"))
h.sum().backward()
assert events == ["tensor hook", "node pre-hook", "node post-hook"]
assert h.grad is not None

# %% [markdown]
# ## Gradients of gradients, to any order
# Every backward formula is written in jaxstream ops, so `create_graph=True`
# records the backward pass too. Here: the third derivative of tanh.

# %%
t = js.tensor(np.float64(0.3), requires_grad=True)
(d1,) = js.grad(js.tanh(t), t, create_graph=True)
(d2,) = js.grad(d1, t, create_graph=True)
(d3,) = js.grad(d2, t)
th = np.tanh(0.3)
assert np.isclose(d3.item(), -2 * (1 - th**2) ** 2 + 4 * th**2 * (1 - th**2))

# %% [markdown]
# ## exec_info trimming
# `grad(y, x)` computes only what reaches `x`: the weight's gradient of a
# linear layer is skipped (PyTorch PR #82544).

# %%
w = js.tensor(np.ones((4, 3), np.float32), requires_grad=True)
ran = []
out = js.linear(x, w)
out.grad_fn.register_prehook(lambda g: ran.append(js.autograd.graph.will_engine_execute_node(w)))
js.grad(out.sum(), x)
assert ran == [False] and w.grad is None

# %% [markdown]
# ## Custom Functions
# `needs_input_grad` tells a backward which gradients anyone will use.

# %%
class Cube(js.autograd.Function):
    @staticmethod
    def forward(ctx, a):
        ctx.save_for_backward(a)
        return a * a * a

    @staticmethod
    def backward(ctx, g):
        (a,) = ctx.saved_tensors
        return g * 3.0 * a * a


c = js.tensor(np.array([2.0]), requires_grad=True)
Cube.apply(c).sum().backward()
assert c.grad.numpy()[0] == 12.0 and Cube.apply(c).grad_fn.name() == "CubeBackward"

# %% [markdown]
# ## The same code on JAX arrays

# %%
xj = js.tensor(arr, backend="jax", requires_grad=True)
js.tanh(xj * b.to(backend="jax") + 0.5).sum().backward()
assert xj.grad.backend == "jax"
assert np.allclose(xj.grad.numpy(), first_grad, atol=1e-6)

# %% [markdown]
# ## Errors say what went wrong and what to do

# %%
try:
    x + xj
except RuntimeError as err:
    print(str(err).splitlines()[0])
else:
    raise AssertionError("mixing backends must fail")
