"""PyTorch tensors in and out of jaxstream through DLPack, checked against torch.autograd.

`js.from_dlpack` adopts a CPU torch tensor's memory as a NumPy-backend tensor;
`torch.from_dlpack` reads a jaxstream tensor back. Neither copies.

Run: python interop/torch_exchange.py   (needs torch)
"""

import jax.numpy as jnp
import numpy as np
import torch

import jaxstream as js
from jaxstream.jax_interop import jax_function


def main() -> None:
    torch.manual_seed(0)
    x_torch = torch.randn(5, 3)
    w_torch = torch.randn(3, 2)

    # torch -> jaxstream: the same memory.
    x = js.tensor(js.from_dlpack(x_torch), requires_grad=True)
    w = js.tensor(js.from_dlpack(w_torch), requires_grad=True)
    assert x.data.ctypes.data == x_torch.data_ptr()
    print("torch -> jaxstream shares memory:", x.backend, x.shape)

    # A loss mixing jaxstream ops and a JAX function.
    scores = jax_function(lambda a, b: jnp.tanh(a @ b))(x, w)
    loss = js.softplus(scores).mean()
    loss.backward()

    # The same loss in PyTorch.
    xr, wr = x_torch.clone().requires_grad_(), w_torch.clone().requires_grad_()
    reference = torch.nn.functional.softplus(torch.tanh(xr @ wr)).mean()
    reference.backward()
    np.testing.assert_allclose(loss.item(), reference.item(), rtol=1e-5)

    # jaxstream -> torch: gradients come back without copies.
    gx = torch.from_dlpack(x.grad)
    assert gx.data_ptr() == x.grad.data.ctypes.data
    torch.testing.assert_close(gx, xr.grad, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(torch.from_dlpack(w.grad), wr.grad, rtol=1e-5, atol=1e-6)
    print("gradients match torch.autograd; loss", round(loss.item(), 6))


if __name__ == "__main__":
    main()
