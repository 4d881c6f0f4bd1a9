"""The recurrent cells RNNCell, LSTMCell and GRUCell, and the one step of each recurrence
that both a cell and the sequence layers of recurrent.py take.

Note [One step per recurrence]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
A step takes the input's share of the gates, `x @ weight_ih.T + bias_ih`, already
computed, and the state as a tuple: `(h,)` for RNN and GRU, `(h, c)` for LSTM. It
returns the next state in the same form. The cell computes the input's gates of its
one input; a sequence layer computes them for every time step in one product and then
steps through them. So each recurrence is written once, in PyTorch's gate order
(LSTM: i, f, g, o; GRU: r, z, n, with `n = tanh(W_in x + b_in + r * (W_hn h + b_hn))`),
and everything is composed of ops, which gives every gradient order and backend.

As PyTorch's, every parameter starts uniform in ±1/sqrt(hidden_size), and RNNCell
refuses an unknown `nonlinearity` when it is called, not when it is built.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from ..devices import Device
from ..ops.functional import linear
from ..ops.operands import as_tensor
from ..tensor import Tensor
from .init import kaiming_uniform, split_key
from .module import Module

State = tuple[Tensor, ...]


class LayerWeights(NamedTuple):
    """One direction of one layer: PyTorch's `weight_ih`, `weight_hh`, the biases (None
    without `bias`) and LSTM's projection `weight_hr` (None without `proj_size`)."""

    w_ih: Tensor
    w_hh: Tensor
    b_ih: Tensor | None
    b_hh: Tensor | None
    w_hr: Tensor | None = None


def input_gates(x: Tensor, weights: LayerWeights) -> Tensor:
    """The input's share of the gates, for any number of leading axes."""
    return linear(x, weights.w_ih, weights.b_ih)


def _elman_step(activation: Callable[[Tensor], Tensor]) -> Callable[..., State]:
    def step(x_gates: Tensor, state: State, weights: LayerWeights) -> State:
        return (activation(x_gates + linear(state[0], weights.w_hh, weights.b_hh)),)
    return step


def lstm_step(x_gates: Tensor, state: State, weights: LayerWeights) -> State:
    """c' = f * c + i * g, h' = o * tanh(c'), projected by `w_hr` where there is one."""
    h, c = state
    i, f, g, o = (x_gates + linear(h, weights.w_hh, weights.b_hh)).chunk(4, -1)
    c = f.sigmoid() * c + i.sigmoid() * g.tanh()
    h = o.sigmoid() * c.tanh()
    return (h if weights.w_hr is None else linear(h, weights.w_hr), c)


def gru_step(x_gates: Tensor, state: State, weights: LayerWeights) -> State:
    """h' = (1 - z) * n + z * h, the reset gate applied to the hidden share of n."""
    (h,) = state
    x_r, x_z, x_n = x_gates.chunk(3, -1)
    h_r, h_z, h_n = linear(h, weights.w_hh, weights.b_hh).chunk(3, -1)
    r, z = (x_r + h_r).sigmoid(), (x_z + h_z).sigmoid()
    n = (x_n + r * h_n).tanh()
    return ((1 - z) * n + z * h,)


class Recurrence(NamedTuple):
    """A kind of recurrence: its gates (blocks of hidden_size rows in the weights), its
    step, and how many tensors its state holds."""

    gates: int
    step: Callable[[Tensor, State, LayerWeights], State]
    states: int = 1


RECURRENCES = {
    "RNN_TANH": Recurrence(1, _elman_step(Tensor.tanh)),
    "RNN_RELU": Recurrence(1, _elman_step(Tensor.relu)),
    "LSTM": Recurrence(4, lstm_step, 2),
    "GRU": Recurrence(3, gru_step),
}


def uniform_parameters(shapes: list[tuple[int, ...]], hidden_size: int, key: Any,
                       factory: dict[str, Any]) -> list[Tensor]:
    """Parameters of `shapes`, each uniform in ±1/sqrt(hidden_size) from its own key."""
    return [kaiming_uniform(shape, hidden_size, key=k, **factory)
            for shape, k in zip(shapes, split_key(key, len(shapes)), strict=True)]


class RNNCellBase(Module):
    """What the cells share: `weight_ih`, `weight_hh`, `bias_ih`, `bias_hh` of the
    recurrence's gates (blocks of hidden_size rows), PyTorch's checks, the call of the step."""

    mode: str
    """The recurrence (a key of RECURRENCES) whose gates size the weights; each cell's own."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, *,
                 key: Any = None, dtype: Any = None, backend: str | None = None,
                 device: str | Device | None = None) -> None:
        super().__init__()
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        rows = RECURRENCES[self.mode].gates * hidden_size
        shapes = [(rows, input_size), (rows, hidden_size)] + [(rows,)] * (2 if bias else 0)
        params = uniform_parameters(shapes, hidden_size, key,
                                    {"dtype": dtype, "backend": backend, "device": device})
        self.weight_ih, self.weight_hh = params[:2]
        self.bias_ih, self.bias_hh = params[2:] if bias else (None, None)

    def _recurrence(self) -> Recurrence:
        return RECURRENCES[self.mode]

    def _step(self, input: Any, hx: tuple | None) -> State:  # noqa: A002
        """The next state of `input` (1-d or 2-d) from `hx` (a tuple, or None: zeros)."""
        name, x = type(self).__name__, as_tensor(input)
        if x.ndim not in (1, 2):
            raise ValueError(f"{name}: Expected input to be 1D or 2D, got {x.ndim}D instead")
        for i, h in enumerate(hx or ()):
            if h.ndim not in (1, 2):
                what = f"hx[{i}]" if len(hx) > 1 else "hidden"
                raise ValueError(f"{name}: Expected {what} to be 1D or 2D, got {h.ndim}D "
                                 f"instead")
        recurrence = self._recurrence()
        batched = x.ndim == 2
        x = x if batched else x.unsqueeze(0)
        zeros = x.new_zeros((x.shape[0], self.hidden_size))
        state = ((zeros,) * recurrence.states if hx is None
                 else tuple(h if batched else h.unsqueeze(0) for h in hx))
        self._check_sizes(x, state)
        weights = LayerWeights(self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh)
        state = recurrence.step(input_gates(x, weights), state, weights)
        return state if batched else tuple(s.squeeze(0) for s in state)

    def _check_sizes(self, x: Tensor, state: State) -> None:
        """PyTorch's checks of the input's and each hidden tensor's sizes, in its words."""
        if x.shape[1] != self.input_size:
            raise RuntimeError(f"input has inconsistent input_size: got {x.shape[1]} expected "
                               f"{self.input_size}")
        for i, h in enumerate(state):
            if h.shape[0] != x.shape[0]:
                raise RuntimeError(f"Input batch size {x.shape[0]} doesn't match hidden{i} "
                                   f"batch size {h.shape[0]}")
            size = h.shape[1] if h.ndim > 1 else tuple(h.shape)
            if h.ndim != 2 or size != self.hidden_size:
                hint = "" if h.ndim == 2 else (
                    f" (hidden{i} of shape {tuple(h.shape)} for an input of shape "
                    f"{tuple(x.shape)}: give both batched or both unbatched)")
                raise RuntimeError(f"hidden{i} has inconsistent hidden_size: got {size}, "
                                   f"expected {self.hidden_size}{hint}")

    def forward(self, input: Any, hx: Tensor | None = None) -> Tensor:  # noqa: A002
        """The next hidden state (LSTMCell's own gives `(h, c)`)."""
        return self._step(input, None if hx is None else (hx,))[0]

    def extra_repr(self) -> str:
        text = f"{self.input_size}, {self.hidden_size}"
        if self.bias is not True:
            text += f", bias={self.bias}"
        nonlinearity = getattr(self, "nonlinearity", "tanh")
        return text + (f", nonlinearity={nonlinearity}" if nonlinearity != "tanh" else "")


class RNNCell(RNNCellBase):
    """One step of an Elman RNN: h' = tanh (or relu) of (W_ih x + b_ih + W_hh h + b_hh)."""

    mode = "RNN_TANH"

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True,
                 nonlinearity: str = "tanh", *, key: Any = None, dtype: Any = None,
                 backend: str | None = None, device: str | Device | None = None) -> None:
        super().__init__(input_size, hidden_size, bias, key=key, dtype=dtype, backend=backend,
                         device=device)
        self.nonlinearity = nonlinearity

    def _recurrence(self) -> Recurrence:
        if self.nonlinearity not in ("tanh", "relu"):
            raise RuntimeError(f"Unknown nonlinearity: {self.nonlinearity}")
        return RECURRENCES[f"RNN_{self.nonlinearity.upper()}"]


class LSTMCell(RNNCellBase):
    """One step of an LSTM; `hx` and the result are `(h, c)`."""

    mode = "LSTM"

    def forward(self, input: Any,  # noqa: A002
                hx: tuple[Tensor, Tensor] | None = None) -> tuple[Tensor, Tensor]:
        h, c = self._step(input, None if hx is None else tuple(hx))
        return h, c


class GRUCell(RNNCellBase):
    """One step of a GRU."""

    mode = "GRU"
