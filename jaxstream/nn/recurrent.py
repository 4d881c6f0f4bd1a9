"""The sequence layers RNN, LSTM and GRU, with PyTorch's arguments, parameter names and order
(`weight_ih_l0`, `weight_hh_l0`, `bias_ih_l0`, `bias_hh_l0`, `weight_hr_l0`, then the
`_reverse` direction, layer by layer), initialisation, checks and results.

One driver (`run_layers`) runs the layers and directions of all three; each time step is the
step of recurrent_cells.py (Note [One step per recurrence]). Between layers, in training
mode, `dropout` zeroes the layer's output as `js.nn.Dropout` does, its masks drawn from the
call's `key=` (split per layer) or else the current draw source.

Differences from PyTorch: a PackedSequence is refused (pad the sequences to one length, as
`pad_sequence` does, and pass the padded tensor); `flatten_parameters()` does nothing, as
there is no cuDNN weight buffer to compact; RNN and GRU take no `proj_size` argument at all
(a TypeError, where PyTorch's ValueError says it is LSTM's only).
"""

from __future__ import annotations

import numbers
import warnings
from typing import Any

from ..devices import Device
from ..ops.neural import dropout as dropout_op
from ..ops.operands import as_tensor
from ..ops.random import resolve_key
from ..ops.shape_ops import cat, stack
from ..tensor import Tensor
from .init import split_key
from .module import Module
from .parameter import Parameter
from .recurrent_cells import (
    RECURRENCES,
    LayerWeights,
    Recurrence,
    State,
    input_gates,
    uniform_parameters,
)


def run_direction(recurrence: Recurrence, x: Tensor, state: State, weights: LayerWeights,
                  reverse: bool) -> tuple[Tensor, State]:
    """One direction of one layer over time-major `x` (T, B, I): its outputs (T, B, H) in
    time order and its final state."""
    steps = input_gates(x, weights).unbind(0)
    outputs = []
    for x_gates in reversed(steps) if reverse else steps:
        state = recurrence.step(x_gates, state, weights)
        outputs.append(state[0])
    return stack(outputs[::-1] if reverse else outputs), state


def run_layers(recurrence: Recurrence, x: Tensor, states: State, weights: list[LayerWeights],
               directions: int, dropout: float, key: Any) -> tuple[Tensor, State]:
    """Every layer and direction over time-major `x`: the last layer's outputs (T, B, D * H)
    and the final states, each stacked as (layers * D, B, H). `dropout` (0 outside training)
    applies to each layer's output but the last."""
    layers = len(weights) // directions
    drops = dropout > 0 and layers > 1
    keys = split_key(None if key is None or not drops else resolve_key(key), layers - 1)
    finals = []
    for layer in range(layers):
        outputs = []
        for direction in range(directions):
            index = layer * directions + direction
            out, final = run_direction(recurrence, x, tuple(s[index] for s in states),
                                       weights[index], reverse=direction == 1)
            outputs.append(out)
            finals.append(final)
        x = outputs[0] if directions == 1 else cat(outputs, -1)
        if drops and layer < layers - 1:
            x = dropout_op(x, dropout, training=True, key=keys[layer])
    return x, tuple(stack([f[i] for f in finals]) for i in range(len(states)))


def _check_arguments(input_size: Any, hidden_size: Any, num_layers: int, bias: Any,
                     batch_first: Any, dropout: Any, proj_size: int) -> None:
    """PyTorch's checks of a sequence layer's arguments, with its messages."""
    if (not isinstance(dropout, numbers.Number) or isinstance(dropout, bool)
            or not 0 <= dropout <= 1):
        raise ValueError("dropout should be a number in range [0, 1] representing the "
                         f"probability of an element being zeroed (got {dropout!r})")
    if dropout > 0 and num_layers == 1:
        warnings.warn("dropout option adds dropout after all but last recurrent layer, so "
                      "non-zero dropout expects num_layers greater than 1, but got "
                      f"dropout={dropout} and num_layers={num_layers}", stacklevel=4)
    for name, value, kind in [("bias", bias, bool), ("batch_first", batch_first, bool),
                              ("input_size", input_size, int), ("hidden_size", hidden_size, int)]:
        if not isinstance(value, kind):
            raise TypeError(f"{name} should be of type {kind.__name__}, got: "
                            f"{type(value).__name__}")
    for name, value in [("input_size", input_size), ("hidden_size", hidden_size),
                        ("num_layers", num_layers)]:
        if value <= 0:
            raise ValueError(f"{name} must be greater than zero (got {value})")
    if proj_size < 0:
        raise ValueError("proj_size should be a positive integer or zero to disable projections")
    if proj_size >= hidden_size:
        raise ValueError(f"proj_size has to be smaller than hidden_size (got proj_size="
                         f"{proj_size}, hidden_size={hidden_size})")


class RNNBase(Module):
    """What RNN, LSTM and GRU share: the parameters of every layer and direction, the
    checks of the input and the initial state, and the call of the driver."""

    def __init__(self, mode: str, input_size: int, hidden_size: int, num_layers: int = 1,
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
                 bidirectional: bool = False, proj_size: int = 0, *, key: Any = None,
                 dtype: Any = None, backend: str | None = None,
                 device: str | Device | None = None) -> None:
        super().__init__()
        _check_arguments(input_size, hidden_size, num_layers, bias, batch_first, dropout,
                         proj_size)
        self.mode, self.input_size, self.hidden_size = mode, input_size, hidden_size
        self.num_layers, self.bias, self.batch_first = num_layers, bias, batch_first
        self.dropout, self.bidirectional = float(dropout), bidirectional
        self.proj_size = proj_size
        names, shapes = self._parameter_layout()
        params = uniform_parameters(shapes, hidden_size, key,
                                    {"dtype": dtype, "backend": backend, "device": device})
        for name, param in zip(names, params, strict=True):
            setattr(self, name, param)
        per_direction = len(names) // (num_layers * self._directions())
        self._all_weights = tuple(tuple(names[i:i + per_direction])
                                  for i in range(0, len(names), per_direction))

    def _directions(self) -> int:
        return 2 if self.bidirectional else 1

    def _output_size(self) -> int:
        """The size of h: proj_size where there is a projection, else hidden_size."""
        return self.proj_size or self.hidden_size

    def _parameter_layout(self) -> tuple[list[str], list[tuple[int, ...]]]:
        """PyTorch's parameter names and shapes, in its order."""
        rows, size = RECURRENCES[self.mode].gates * self.hidden_size, self._output_size()
        names, shapes = [], []
        for layer in range(self.num_layers):
            inputs = self.input_size if layer == 0 else size * self._directions()
            for suffix in ("", "_reverse")[:self._directions()]:
                entries = [("weight_ih", (rows, inputs)), ("weight_hh", (rows, size))]
                if self.bias:
                    entries += [("bias_ih", (rows,)), ("bias_hh", (rows,))]
                if self.proj_size:
                    entries.append(("weight_hr", (self.proj_size, self.hidden_size)))
                names += [f"{name}_l{layer}{suffix}" for name, _ in entries]
                shapes += [shape for _, shape in entries]
        return names, shapes

    @property
    def all_weights(self) -> list[list[Parameter]]:
        """The parameters of each layer and direction, in PyTorch's order."""
        return [[getattr(self, name) for name in names] for names in self._all_weights]

    def flatten_parameters(self) -> None:
        """PyTorch's hint to compact the weights for cuDNN: nothing to do here."""

    def _layer_weights(self, index: int) -> LayerWeights:
        layer, direction = divmod(index, self._directions())
        suffix = f"_l{layer}" + ("_reverse" if direction else "")
        return LayerWeights(*(getattr(self, f"{name}{suffix}", None) for name in
                              ("weight_ih", "weight_hh", "bias_ih", "bias_hh", "weight_hr")))

    def _recurrence(self) -> Recurrence:
        return RECURRENCES[self.mode]

    def _run(self, input: Any, hx: State | None, key: Any) -> tuple[Tensor, State]:  # noqa: A002
        """`(output, final states)` of `input` from the initial states `hx` (None: zeros),
        batched or not, batch first or not, as the caller gave them; PyTorch's checks in
        PyTorch's order."""
        x, batched = self._batched_input(input)
        hx = None if hx is None else self._batched_states(hx, batched)
        self._check_input(x)
        states = self._initial_states(x, hx)
        time_major = x.transpose(0, 1) if self.batch_first else x
        weights = [self._layer_weights(i) for i in range(self.num_layers * self._directions())]
        out, finals = run_layers(self._recurrence(), time_major, states, weights,
                                 self._directions(), self.dropout if self.training else 0.0, key)
        out = out.transpose(0, 1) if self.batch_first else out
        if not batched:
            return out.squeeze(0 if self.batch_first else 1), tuple(f.squeeze(1) for f in finals)
        return out, finals

    def _batched_input(self, input: Any) -> tuple[Tensor, bool]:  # noqa: A002
        """The input with a batch axis, and whether it came with one."""
        name = type(self).__name__
        if hasattr(input, "batch_sizes"):
            raise NotImplementedError(
                f"{name}: a PackedSequence input is not supported; pad the sequences to one "
                f"length (as pad_sequence does) and pass the padded tensor")
        x = as_tensor(input)
        if x.ndim not in (2, 3):
            tensor = " tensor" if name == "RNN" else ""
            raise ValueError(f"{name}: Expected input to be 2D or 3D, got {x.ndim}D{tensor} "
                             f"instead")
        batched = x.ndim == 3
        return (x if batched else x.unsqueeze(0 if self.batch_first else 1)), batched

    @staticmethod
    def _batched_states(hx: State, batched: bool) -> State:
        """The initial states with a batch axis, checked to match the input's."""
        dims = [h.ndim for h in hx]
        if any(d != (3 if batched else 2) for d in dims):
            kind = "batched 3-D" if batched else "unbatched 2-D"
            if len(hx) == 1:
                raise RuntimeError(f"For {kind} input, hx should also be {kind[-3:]} but got "
                                   f"{dims[0]}-D tensor")
            raise RuntimeError(f"For {kind} input, hx and cx should also be {kind[-3:]} but "
                               f"got ({dims[0]}-D, {dims[1]}-D) tensors")
        return hx if batched else tuple(h.unsqueeze(1) for h in hx)

    def _check_input(self, x: Tensor) -> None:
        """PyTorch's checks of the input's dtype and size, in its words."""
        weight = self.weight_ih_l0
        if x.dtype != weight.dtype:
            raise ValueError(f"RNN input dtype ({x.dtype}) does not match weight dtype "
                             f"({weight.dtype}). Convert input: input.to({weight.dtype}), or "
                             f"build the model with dtype={x.dtype}")
        if x.shape[-1] != self.input_size:
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected "
                               f"{self.input_size}, got {x.shape[-1]}")

    def _initial_states(self, x: Tensor, hx: State | None) -> State:
        """The initial states as (layers * D, B, size) tensors: `hx`, checked, or zeros."""
        batch = x.shape[0] if self.batch_first else x.shape[1]
        rows = self.num_layers * self._directions()
        expected = [(rows, batch, self._output_size()), (rows, batch, self.hidden_size)]
        expected = expected[:self._recurrence().states]
        if hx is None:
            return tuple(x.new_zeros(shape) for shape in expected)
        for i, (h, shape) in enumerate(zip(hx, expected, strict=True)):
            if tuple(h.shape) != shape:
                what = "hidden" if len(hx) == 1 else f"hidden[{i}]"
                raise RuntimeError(f"Expected {what} size {shape}, got {list(h.shape)}")
        return hx

    def forward(self, input: Any, hx: Tensor | None = None, *,  # noqa: A002
                key: Any = None) -> tuple[Tensor, Tensor]:
        """`(output, h_n)` (LSTM's own gives `(output, (h_n, c_n))`); `key=` draws the
        dropout masks between layers in training mode."""
        out, (h_n,) = self._run(input, None if hx is None else (hx,), key)
        return out, h_n

    def extra_repr(self) -> str:
        text = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size != 0:
            text += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            text += f", num_layers={self.num_layers}"
        for name, default in [("bias", True), ("batch_first", False), ("dropout", 0),
                              ("bidirectional", False)]:
            if getattr(self, name) != default:
                text += f", {name}={getattr(self, name)}"
        return text


class RNN(RNNBase):
    """An Elman RNN of `num_layers` layers: h_t = tanh (or relu) of
    (W_ih x_t + b_ih + W_hh h_(t-1) + b_hh). Returns `(output, h_n)`."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1,
                 nonlinearity: str = "tanh", bias: bool = True, batch_first: bool = False,
                 dropout: float = 0.0, bidirectional: bool = False, *, key: Any = None,
                 dtype: Any = None, backend: str | None = None,
                 device: str | Device | None = None) -> None:
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or "
                             f"'relu'.")
        super().__init__(f"RNN_{nonlinearity.upper()}", input_size, hidden_size, num_layers,
                         bias, batch_first, dropout, bidirectional, key=key, dtype=dtype,
                         backend=backend, device=device)
        self.nonlinearity = nonlinearity


class LSTM(RNNBase):
    """A multi-layer LSTM, with the gates i, f, g, o and, with `proj_size`, h projected by
    `weight_hr`. Returns `(output, (h_n, c_n))`."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1,
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
                 bidirectional: bool = False, proj_size: int = 0, *, key: Any = None,
                 dtype: Any = None, backend: str | None = None,
                 device: str | Device | None = None) -> None:
        super().__init__("LSTM", input_size, hidden_size, num_layers, bias, batch_first,
                         dropout, bidirectional, proj_size, key=key, dtype=dtype,
                         backend=backend, device=device)

    def forward(self, input: Any, hx: tuple[Tensor, Tensor] | None = None, *,  # noqa: A002
                key: Any = None) -> tuple[Tensor, tuple[Tensor, Tensor]]:
        if hx is not None and (not isinstance(hx, tuple | list) or len(hx) != 2):
            raise TypeError(f"LSTM: hx must be a tuple (h_0, c_0) of two tensors, got "
                            f"{type(hx).__name__}")
        out, (h_n, c_n) = self._run(input, None if hx is None else tuple(hx), key)
        return out, (h_n, c_n)


class GRU(RNNBase):
    """A multi-layer GRU, with the gates r, z, n. Returns `(output, h_n)`."""

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1,
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
                 bidirectional: bool = False, *, key: Any = None, dtype: Any = None,
                 backend: str | None = None, device: str | Device | None = None) -> None:
        super().__init__("GRU", input_size, hidden_size, num_layers, bias, batch_first,
                         dropout, bidirectional, key=key, dtype=dtype, backend=backend,
                         device=device)
