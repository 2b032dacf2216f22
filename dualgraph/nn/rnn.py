"""Recurrent layers: `RNN`, `LSTM`, `GRU` and their cells, with PyTorch's signatures,
parameter names, initialisation and gate order.

Each layer and direction of a sequence layer is one `rnn_layer` op (``ops/recurrent.py``)
whose kernel holds the time loop, as PyTorch's ``aten::lstm`` is one op: a compiled graph
has one node per layer and direction whatever the sequence length, and its generated code
is the size of one step (docs/rnn.md gives the design and what it costs to compile).

A `PackedSequence` input runs the same ops over the padded batch with each sequence's
length (past its end a sequence keeps its state), padded and packed again by one gather
each; the LSTM's projection (``proj_size``) is the op's ``w_hr``. The cells are one step
composed of registry ops (``addmm``, ``sigmoid``, ``tanh``, slicing).
"""

from __future__ import annotations

import math
import numbers
import warnings
from typing import Any

import numpy as np

from ..dtypes import as_dtype, default_float
from ..eager.creation import zeros
from ..eager.grad_mode import is_grad_enabled
from ..eager.internal import set_array
from ..eager.tensor import tensor
from ..ops import elementwise as E
from ..ops import linalg as L
from ..ops import recurrent as R
from ..ops import shape as S
from ..ops.mixin import TensorOps
from . import functional as F
from .modules import Module, Parameter
from .modules.module import _uniform
from .utils.rnn import PackedSequence, batch_sizes_of, pack_rows, packed_sizes, pad_rows

# The recurrence's VJP composes a differentiable backward when the gradient will be
# differentiated again (create_graph); the gradient mode is the eager layer's to tell.
R.set_recording_query(is_grad_enabled)

_GATES = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}
_OP_MODE = {"LSTM": "lstm", "GRU": "gru", "RNN_TANH": "tanh", "RNN_RELU": "relu"}


def _factory_dtype(device: Any, dtype: Any) -> np.dtype:
    """The parameters' dtype; ``device`` may only name the CPU (a CPU build's devices)."""
    if device is not None and str(device).split(":")[0] != "cpu":
        raise RuntimeError(f"dualgraph runs on the CPU only; got device={device!r}")
    return default_float() if dtype is None else as_dtype(dtype)


def _check_size(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} should be of type int, got: {type(value).__name__}")
    if value <= 0:
        raise ValueError(f"{name} must be greater than zero")


_TORCH_DTYPE = {"float16": "Half", "bfloat16": "BFloat16", "float32": "Float",
                "float64": "Double"}


def _check_state_dtype(name: str, h: Any, weight: Any) -> None:
    """A state whose dtype is not the weights' is refused as PyTorch refuses it (a
    RuntimeError naming both dtypes), not promoted."""
    if h.dtype != weight.dtype:
        got, want = (_TORCH_DTYPE.get(str(d), str(d)) for d in (h.dtype, weight.dtype))
        raise RuntimeError(f"{name}: the hidden state and the weights must have the same "
                           f"dtype, but got {got} and {want}")


def _lengths(packed: Any) -> Any:
    """A packed sequence's lengths in its (sorted) batch order, as an int64 tensor."""
    if packed is None:
        return None
    sizes = np.asarray(packed_sizes(packed))
    return tensor(batch_sizes_of(sizes) if sizes.size else sizes.astype(np.int64))


def _cols(x: Any, k: int, n: int) -> Any:
    """Columns ``k*n .. (k+1)*n`` of a 2-D tensor: gate ``k`` of a packed gate matrix."""
    return x[:, k * n:(k + 1) * n]


# ------------------------------------------------------------------ one time step
# A layer's two products, ``x @ W_ih.T + b_ih`` and ``h @ W_hh.T + b_hh``, are one product
# of ``[x, h]`` with the weights side by side, packed once per call: each time step then
# costs one matrix product forward and two backward (not two and four), which is what a
# user's loop over the cells grows by.


def _pack(mode: str, w_ih: Any, w_hh: Any, b_ih: Any, b_hh: Any) -> tuple[Any, Any]:
    """``(W.T, b)`` such that the step's gates are ``[x, h] @ W.T + b``. For the GRU the
    new gate needs its two halves apart (the reset gate scales the hidden half, bias
    included), so the packed gates are ``[r, z, W_in x + b_in, W_hn h + b_hn]``."""
    if mode != "GRU":
        w = S.concatenate((w_ih, w_hh), axis=1)
        b = None if b_ih is None else E.add(b_ih, b_hh)
        return S.transpose(w), b
    n, n_in = w_hh.shape[0] // 3, w_ih.shape[1]
    zeros_in = zeros(n, n_in, dtype=w_ih.dtype)
    zeros_h = zeros(n, n, dtype=w_hh.dtype)
    left = S.concatenate((w_ih, zeros_in), axis=0)
    right = S.concatenate((w_hh[:2 * n], zeros_h, w_hh[2 * n:]), axis=0)
    w = S.concatenate((left, right), axis=1)
    b = None
    if b_ih is not None:
        b = S.concatenate((E.add(b_ih[:2 * n], b_hh[:2 * n]), b_ih[2 * n:], b_hh[2 * n:]))
    return S.transpose(w), b


def _gates(x: Any, h: Any, wt: Any, b: Any) -> Any:
    xh = S.concatenate((x, h), axis=1)
    return L.matmul(xh, wt) if b is None else L.addmm(b, xh, wt)


def _step(mode: str, x: Any, state: Any, wt: Any, b: Any) -> Any:
    """One time step: the new state (a tensor, or ``(h, c)`` for the LSTM) from the input
    and state, (batch, features) each, and the packed weights."""
    if mode == "LSTM":
        h, c = state
        g = _gates(x, h, wt, b)
        n = g.shape[1] // 4
        # PyTorch's gate order: input, forget, cell, output.
        i = E.sigmoid(_cols(g, 0, n))
        f = E.sigmoid(_cols(g, 1, n))
        cell = E.tanh(_cols(g, 2, n))
        o = E.sigmoid(_cols(g, 3, n))
        c = E.add(E.mul(f, c), E.mul(i, cell))
        return E.mul(o, E.tanh(c)), c
    g = _gates(x, state, wt, b)
    if mode == "GRU":
        n = g.shape[1] // 4
        # PyTorch's gates: reset, update, new; n = tanh(W_in x + b_in + r * (W_hn h + b_hn)).
        r = E.sigmoid(_cols(g, 0, n))
        z = E.sigmoid(_cols(g, 1, n))
        new = E.tanh(E.add(_cols(g, 2, n), E.mul(r, _cols(g, 3, n))))
        # h' = (1 - z) * n + z * h, written as PyTorch's kernel computes it.
        return E.add(E.mul(E.sub(state, new), z), new)
    return E.relu(g) if mode == "RNN_RELU" else E.tanh(g)


# ------------------------------------------------------------------ sequence layers


class RNNBase(Module):
    """What `RNN`, `LSTM` and `GRU` share: parameters per layer and direction, named as
    PyTorch names them (``weight_ih_l0``, ``bias_hh_l1_reverse``, ``weight_hr_l0``), and
    the loop over layers, directions and time steps."""

    def __init__(self, mode: str, input_size: int, hidden_size: int, num_layers: int = 1,
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
                 bidirectional: bool = False, proj_size: int = 0, device: Any = None,
                 dtype: Any = None) -> None:
        if mode not in _GATES:
            raise ValueError("Unrecognized RNN mode: " + str(mode))
        if isinstance(dropout, bool) or not isinstance(dropout, numbers.Number) or \
                not 0 <= dropout <= 1:
            raise ValueError("dropout should be a number in range [0, 1] representing the "
                             "probability of an element being zeroed")
        if not isinstance(bias, bool):
            raise TypeError(f"bias should be of type bool, got: {type(bias).__name__}")
        if not isinstance(batch_first, bool):
            raise TypeError(f"batch_first should be of type bool, got: "
                            f"{type(batch_first).__name__}")
        _check_size("input_size", input_size)
        _check_size("hidden_size", hidden_size)
        if isinstance(num_layers, bool) or not isinstance(num_layers, (int, np.integer)) or \
                num_layers <= 0:
            raise ValueError("num_layers must be greater than zero")
        if proj_size < 0:
            raise ValueError("proj_size should be a positive integer or zero to disable "
                             "projections")
        if proj_size >= hidden_size:
            raise ValueError("proj_size has to be smaller than hidden_size")
        if proj_size and mode != "LSTM":
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        if dropout > 0 and num_layers == 1:
            warnings.warn("dropout option adds dropout after all but last recurrent layer, so "
                          "non-zero dropout expects num_layers greater than 1, but got "
                          f"dropout={dropout} and num_layers={num_layers}", stacklevel=3)
        super().__init__()
        self.mode = mode
        self.input_size = int(input_size)
        self.hidden_size = int(hidden_size)
        self.num_layers = int(num_layers)
        self.bias = bias
        self.batch_first = batch_first
        self.dropout = float(dropout)
        self.bidirectional = bool(bidirectional)
        self.proj_size = int(proj_size)
        dt = _factory_dtype(device, dtype)
        gate_size = _GATES[mode] * hidden_size
        real_hidden = proj_size or hidden_size
        directions = 2 if bidirectional else 1
        self._flat_weights_names: list[str] = []
        self._all_weights: list[list[str]] = []
        for layer in range(num_layers):
            layer_input = input_size if layer == 0 else real_hidden * directions
            for direction in range(directions):
                suffix = f"_l{layer}" + ("_reverse" if direction else "")
                shapes = {"weight_ih": (gate_size, layer_input),
                          "weight_hh": (gate_size, real_hidden)}
                if bias:
                    shapes.update(bias_ih=(gate_size,), bias_hh=(gate_size,))
                if proj_size:
                    shapes["weight_hr"] = (proj_size, hidden_size)
                names = []
                for kind, shape in shapes.items():
                    setattr(self, kind + suffix, Parameter(np.zeros(shape, dt)))
                    names.append(kind + suffix)
                self._flat_weights_names.extend(names)
                self._all_weights.append(names)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Every parameter uniform in ``±1/sqrt(hidden_size)``, as PyTorch."""
        bound = 1.0 / math.sqrt(self.hidden_size)
        for p in self.parameters():
            set_array(p, _uniform(tuple(p.shape), bound).astype(p.dtype))

    def flatten_parameters(self) -> None:
        """Accepted for PyTorch programs; parameters are separate arrays on the CPU, as in
        PyTorch's CPU build, so there is nothing to pack."""

    @property
    def _flat_weights(self) -> list:
        return [getattr(self, name) for name in self._flat_weights_names]

    @property
    def all_weights(self) -> list:
        """The parameters, one list per layer and direction (PyTorch's order)."""
        return [[getattr(self, name) for name in names] for names in self._all_weights]

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size:
            s += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if self.batch_first:
            s += f", batch_first={self.batch_first}"
        if self.dropout != 0:
            s += f", dropout={self.dropout}"
        if self.bidirectional:
            s += f", bidirectional={self.bidirectional}"
        return s

    # ------------------------------------------------------------------ forward

    def _state_shape(self, batch: int, cell: bool = False) -> tuple:
        size = self.hidden_size if cell or not self.proj_size else self.proj_size
        return (self.num_layers * (2 if self.bidirectional else 1), batch, size)

    def _check_input(self, x: Any) -> None:
        if not isinstance(x, TensorOps):
            raise TypeError(f"{type(self).__name__}: input must be a tensor, got "
                            f"{type(x).__name__}")
        w = self.weight_ih_l0
        if x.dtype != w.dtype:
            raise ValueError(f"RNN input dtype ({x.dtype}) does not match weight dtype "
                             f"({w.dtype}). Convert input: input.to({w.dtype}), or convert "
                             f"model: model.to({x.dtype})")
        if x.shape[-1] != self.input_size:
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected "
                               f"{self.input_size}, got {x.shape[-1]}")

    def _check_state(self, h: Any, expected: tuple, what: str = "hidden size") -> None:
        if tuple(h.shape) != expected:
            raise RuntimeError(f"Expected {what} {expected}, got {list(h.shape)}")
        _check_state_dtype(type(self).__name__, h, self.weight_ih_l0)

    def _run_sequence(self, x: Any, states: list, lengths: Any = None) -> tuple[Any, list]:
        """Run all layers over ``x`` (T, B, features), each layer and direction one
        `rnn_layer` op; ``lengths`` (a packed sequence's, in its sorted batch order) stops
        each sequence at its own end. Returns the last layer's output (T, B, directions *
        H; rows past a sequence's end are not defined) and the final states, one per layer
        and direction: a tensor (RNN, GRU) or an ``(h, c)`` pair (LSTM)."""
        directions = 2 if self.bidirectional else 1
        mode = _OP_MODE[self.mode]
        n = self.proj_size or self.hidden_size  # the state's width
        c_cols = slice(n, n + self.hidden_size)
        last = x.shape[0] - 1
        final = []
        dropping = self.training and self.dropout > 0
        for layer in range(self.num_layers):
            if layer and dropping:
                x = F.dropout(x, self.dropout, True)
            outs = []
            for direction in range(directions):
                index = layer * directions + direction
                weights = self.all_weights[index]
                if self.bias:
                    w_ih, w_hh, b_ih, b_hh = weights[:4]
                else:
                    w_ih, w_hh = weights[:2]
                    b_ih = b_hh = zeros(w_ih.shape[0], dtype=w_ih.dtype)
                w_hr = weights[-1] if self.proj_size else None
                state = states[index]
                h0, c0 = state if mode == "lstm" else (state, None)
                ws = R.rnn_layer(x, h0, c0, w_ih, w_hh, b_ih, b_hh, mode=mode,
                                 reverse=bool(direction), lengths=lengths, w_hr=w_hr)
                outs.append(ws[:, :, :n])
                # With lengths too: a sequence keeps its state past its end, so the last
                # row (reversed: the first) holds every sequence's final state.
                end = 0 if direction else last
                h = ws[end, :, :n]
                final.append((h, ws[end, :, c_cols]) if mode == "lstm" else h)
            x = outs[0] if directions == 1 else S.concatenate(outs, axis=-1)
        return x, final

    def _finish_sequence(self, y: Any, batched: bool, packed: Any = None) -> Any:
        if packed is not None:
            return packed._replace(data=pack_rows(y, packed_sizes(packed)))
        if not batched:
            return y.squeeze(1)
        return S.transpose(y, 0, 1) if self.batch_first else y

    def _prepare(self, x: Any) -> tuple[Any, int, bool, Any]:
        """The input as (T, B, features), the batch size, whether the input had a batch
        dim, and the `PackedSequence` it was (or None): a packed sequence is padded (its
        batch in the packed order), its lengths stop each sequence at its end."""
        if isinstance(x, PackedSequence):
            self._check_input(x.data)
            sizes = packed_sizes(x)
            if not sizes:
                raise ValueError(f"{type(self).__name__}: the packed sequence is empty")
            return pad_rows(x.data, sizes), sizes[0], True, x
        if isinstance(x, TensorOps) and x.ndim not in (2, 3):
            raise ValueError(f"{type(self).__name__}: Expected input to be 2D or 3D, got "
                             f"{x.ndim}D tensor instead")
        self._check_input(x)
        batched = x.ndim == 3
        if not batched:
            x = x.unsqueeze(1)
        elif self.batch_first:
            x = S.transpose(x, 0, 1)
        return x, x.shape[1], batched, None

    @staticmethod
    def _permute(h: Any, packed: Any, which: str) -> Any:
        """A state's batch in the packed (sorted) order, or back in the user's order."""
        index = None if packed is None else getattr(packed, which)
        return h if index is None else h.index_select(1, index)

    def _zeros(self, shape: tuple, like: Any) -> Any:
        return zeros(*shape, dtype=like.dtype)

    def _states_of(self, h: Any) -> list:
        return list(S.unbind(h, 0))

    def forward(self, input: Any, hx: Any = None) -> tuple:  # noqa: A002
        """``(output, h_n)``: output (time, batch, directions * hidden) (batch first with
        ``batch_first``), h_n (layers * directions, batch, hidden)."""
        x, batch, batched, packed = self._prepare(input)
        expected = self._state_shape(batch)
        if hx is None:
            hx = self._zeros(expected, x)
        else:
            if hx.ndim != (3 if batched else 2):
                raise RuntimeError(
                    f"For {'batched 3-D' if batched else 'unbatched 2-D'} input, hx should "
                    f"also be {3 if batched else 2}-D but got {hx.ndim}-D tensor")
            if not batched:
                hx = hx.unsqueeze(1)
            self._check_state(hx, expected)
            hx = self._permute(hx, packed, "sorted_indices")
        y, final = self._run_sequence(x, self._states_of(hx), _lengths(packed))
        h_n = self._permute(S.stack(final, 0), packed, "unsorted_indices")
        return self._finish_sequence(y, batched, packed), (h_n if batched else h_n.squeeze(1))


class RNN(RNNBase):
    """Elman RNN, ``h' = tanh(W_ih x + b_ih + W_hh h + b_hh)`` (or ReLU), over a sequence.

    ``RNN(input_size, hidden_size, num_layers=1, nonlinearity='tanh', bias=True,
    batch_first=False, dropout=0.0, bidirectional=False, device=None, dtype=None)``;
    ``forward(input, hx=None)`` returns ``(output, h_n)``.

    >>> rnn = dg.nn.RNN(10, 20, 2)
    >>> output, h_n = rnn(dg.randn(5, 3, 10))   # (5, 3, 20), (2, 3, 20)
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        if len(args) > 3:
            nonlinearity = args[3]
            args = args[:3] + args[4:]
        else:
            nonlinearity = kwargs.pop("nonlinearity", "tanh")
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or "
                             f"'relu'.")
        super().__init__("RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU", *args, **kwargs)
        self.nonlinearity = nonlinearity


class GRU(RNNBase):
    """Gated recurrent unit over a sequence; PyTorch's gates (reset, update, new).

    ``GRU(input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
    bidirectional=False, device=None, dtype=None)``; ``forward(input, hx=None)`` returns
    ``(output, h_n)``.

    >>> gru = dg.nn.GRU(10, 20, batch_first=True)
    >>> output, h_n = gru(dg.randn(3, 5, 10))   # (3, 5, 20), (1, 3, 20)
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        super().__init__("GRU", *args, **kwargs)


class LSTM(RNNBase):
    """Long short-term memory over a sequence; PyTorch's gates (input, forget, cell, output)
    and optional projection (``proj_size``: ``h = W_hr (o * tanh(c))``).

    ``LSTM(input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
    bidirectional=False, proj_size=0, device=None, dtype=None)``;
    ``forward(input, (h_0, c_0)=None)`` returns ``(output, (h_n, c_n))``.

    >>> lstm = dg.nn.LSTM(10, 20, 2)
    >>> output, (h_n, c_n) = lstm(dg.randn(5, 3, 10))
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__("LSTM", *args, **kwargs)

    def forward(self, input: Any, hx: Any = None) -> tuple:  # noqa: A002
        x, batch, batched, packed = self._prepare(input)
        h_shape = self._state_shape(batch)
        c_shape = self._state_shape(batch, cell=True)
        if hx is None:
            h0, c0 = self._zeros(h_shape, x), self._zeros(c_shape, x)
        else:
            if not isinstance(hx, (tuple, list)) or len(hx) != 2:
                raise TypeError("LSTM: hx must be a tuple (h_0, c_0)")
            h0, c0 = hx
            dims = 3 if batched else 2
            if h0.ndim != dims or c0.ndim != dims:
                kind = "batched 3-D" if batched else "unbatched 2-D"
                raise RuntimeError(f"For {kind} input, hx and cx should also be {dims}-D but "
                                   f"got ({h0.ndim}-D, {c0.ndim}-D) tensors")
            if not batched:
                h0, c0 = h0.unsqueeze(1), c0.unsqueeze(1)
            self._check_state(h0, h_shape)
            self._check_state(c0, c_shape, "hidden[1] size")
            h0 = self._permute(h0, packed, "sorted_indices")
            c0 = self._permute(c0, packed, "sorted_indices")
        states = list(zip(self._states_of(h0), self._states_of(c0)))
        y, final = self._run_sequence(x, states, _lengths(packed))
        h_n = self._permute(S.stack([h for h, _ in final], 0), packed, "unsorted_indices")
        c_n = self._permute(S.stack([c for _, c in final], 0), packed, "unsorted_indices")
        if not batched:
            h_n, c_n = h_n.squeeze(1), c_n.squeeze(1)
        return self._finish_sequence(y, batched, packed), (h_n, c_n)


# -------------------------------------------------------------------------- cells


class RNNCellBase(Module):
    """What the cells share: ``weight_ih`` (gates * hidden, input), ``weight_hh``,
    ``bias_ih``, ``bias_hh``, uniform in ``±1/sqrt(hidden_size)``."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool, num_chunks: int,
                 device: Any = None, dtype: Any = None) -> None:
        _check_size("input_size", input_size)
        _check_size("hidden_size", hidden_size)
        super().__init__()
        self.input_size = int(input_size)
        self.hidden_size = int(hidden_size)
        self.bias = bias
        dt = _factory_dtype(device, dtype)
        gates = num_chunks * hidden_size
        self.weight_ih = Parameter(np.zeros((gates, input_size), dt))
        self.weight_hh = Parameter(np.zeros((gates, hidden_size), dt))
        if bias:
            self.bias_ih = Parameter(np.zeros(gates, dt))
            self.bias_hh = Parameter(np.zeros(gates, dt))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        bound = 1.0 / math.sqrt(self.hidden_size)
        for p in self.parameters():
            set_array(p, _uniform(tuple(p.shape), bound).astype(p.dtype))

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if getattr(self, "nonlinearity", "tanh") != "tanh":
            s += f", nonlinearity={self.nonlinearity}"
        return s

    def _packed(self, mode: str) -> tuple[Any, Any]:
        return _pack(mode, self.weight_ih, self.weight_hh, self.bias_ih, self.bias_hh)

    def _batched(self, x: Any, states: tuple) -> tuple[Any, list, bool]:
        """``x`` and each state with a batch dim, zeros for missing states."""
        name = type(self).__name__
        if not isinstance(x, TensorOps):
            raise TypeError(f"{name}: input must be a tensor, got {type(x).__name__}")
        if x.ndim not in (1, 2):
            raise ValueError(f"{name}: Expected input to be 1D or 2D, got {x.ndim}D instead")
        if x.shape[-1] != self.input_size:
            raise RuntimeError(f"input has inconsistent input_size: got {x.shape[-1]} "
                               f"expected {self.input_size}")
        if x.dtype != self.weight_ih.dtype:
            raise ValueError(f"{name}: input dtype ({x.dtype}) does not match weight dtype "
                             f"({self.weight_ih.dtype})")
        batched = x.ndim == 2
        if not batched:
            x = x.unsqueeze(0)
        out = []
        for k, h in enumerate(states):
            if h is None:
                h = zeros(x.shape[0], self.hidden_size, dtype=x.dtype)
            else:
                if h.ndim not in (1, 2):
                    what = f"hx[{k}]" if len(states) > 1 else "hidden"
                    raise ValueError(f"{name}: Expected {what} to be 1D or 2D, got "
                                     f"{h.ndim}D instead")
                if not batched:
                    h = h.unsqueeze(0)
                _check_state_dtype(name, h, self.weight_ih)
                if tuple(h.shape) != (x.shape[0], self.hidden_size):
                    raise RuntimeError(f"{name}: hidden state of shape {tuple(h.shape)} does "
                                       f"not match (batch, hidden_size) = "
                                       f"{(x.shape[0], self.hidden_size)}")
            out.append(h)
        return x, out, batched


class RNNCell(RNNCellBase):
    """One Elman RNN step: ``h' = tanh(W_ih x + b_ih + W_hh h + b_hh)`` (or ReLU).

    >>> cell = dg.nn.RNNCell(10, 20)
    >>> h = cell(dg.randn(3, 10))   # (3, 20); the hidden state starts at zeros
    """

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True,
                 nonlinearity: str = "tanh", device: Any = None, dtype: Any = None) -> None:
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity: {nonlinearity}")
        super().__init__(input_size, hidden_size, bias, 1, device, dtype)
        self.nonlinearity = nonlinearity

    def forward(self, input: Any, hx: Any = None) -> Any:  # noqa: A002
        x, (h,), batched = self._batched(input, (hx,))
        mode = "RNN_RELU" if self.nonlinearity == "relu" else "RNN_TANH"
        h = _step(mode, x, h, *self._packed(mode))
        return h if batched else h.squeeze(0)


class LSTMCell(RNNCellBase):
    """One LSTM step; ``forward(input, (h, c)=None)`` returns ``(h', c')``.

    >>> cell = dg.nn.LSTMCell(10, 20)
    >>> h, c = cell(dg.randn(3, 10))
    """

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True,
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__(input_size, hidden_size, bias, 4, device, dtype)

    def forward(self, input: Any, hx: Any = None) -> tuple:  # noqa: A002
        states = (None, None) if hx is None else tuple(hx)
        if len(states) != 2:
            raise TypeError("LSTMCell: hx must be a tuple (h, c)")
        x, (h, c), batched = self._batched(input, states)
        h, c = _step("LSTM", x, (h, c), *self._packed("LSTM"))
        return (h, c) if batched else (h.squeeze(0), c.squeeze(0))


class GRUCell(RNNCellBase):
    """One GRU step: ``h' = (1 - z) * n + z * h``.

    >>> cell = dg.nn.GRUCell(10, 20)
    >>> h = cell(dg.randn(3, 10))
    """

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True,
                 device: Any = None, dtype: Any = None) -> None:
        super().__init__(input_size, hidden_size, bias, 3, device, dtype)

    def forward(self, input: Any, hx: Any = None) -> Any:  # noqa: A002
        x, (h,), batched = self._batched(input, (hx,))
        h = _step("GRU", x, h, *self._packed("GRU"))
        return h if batched else h.squeeze(0)
