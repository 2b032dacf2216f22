"""Recurrences: ``rnn_layer``, one layer and one direction of an RNN (tanh or ReLU), LSTM or
GRU over a whole sequence, and ``rnn_layer_backward``, its backward through time.

Each is one op whose kernel holds the time loop, as PyTorch's ``aten::lstm``/``gru``/
``rnn_tanh`` are single ops: a compiled graph then has one node per layer and direction
whatever the sequence length, and its generated code (a loop over time around one GEMM
and one elementwise pass per step) is the size of one step.

``rnn_layer(x, h0, [c0,] w_ih, w_hh, b_ih, b_hh, mode, reverse)``: ``x`` (T, B, I), states
(B, H), weights and biases in PyTorch's layout and gate order (LSTM: input, forget, cell,
output; GRU: reset, update, new). Its value is the layer's **workspace** (T, B, W): per time
step, the hidden state ``h_t`` in columns ``[0, H)``, the LSTM's cell state ``c_t`` in
``[H, 2H)``, then what the backward reads (the LSTM's four gate activations; the GRU's
reset, update and new gates and ``W_hn h + b_hn``). ``reverse`` runs the steps from the
last to the first (the second direction of a bidirectional layer); ``h_t`` stays at time
``t``. The layer's outputs are views of the workspace (`nn.RNN` takes them); the VJP
takes a gradient of every column.

``rnn_layer_backward(g, ws, h0, [c0,] w_hh, mode, reverse)`` runs the time loop backward
(BPTT) and returns (T + 1, B, K): for each step the gradient of the gate pre-activations
(the GRU's input-side and hidden-side gradients differ in the new gate, so K is 6H for it,
input side first), and in row T the gradients of ``h0`` (and ``c0``). The VJP of
``rnn_layer`` takes the input and weight gradients from these with three matrix products
and two sums over the whole sequence. A second derivative through the recurrence is not
supported and raises.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import ShapeError
from ..modes import bind
from .elementwise import _sigmoid_impl
from .linalg import matmul
from .reduce import sum as _sum
from .registry import OpDef, register
from .shape import concatenate, reshape, transpose

MODES = ("tanh", "relu", "lstm", "gru")
_GATES = {"tanh": 1, "relu": 1, "lstm": 4, "gru": 3}
# Workspace columns per step, in units of H: h; LSTM h, c, i, f, g, o; GRU h, r, z, n, hn.
_WIDTH = {"tanh": 1, "relu": 1, "lstm": 6, "gru": 5}


def gates(mode: str) -> int:
    """The number of gates of ``mode`` (rows of ``w_ih`` per hidden unit)."""
    return _GATES[mode]


def width(mode: str, hidden: int) -> int:
    """Columns of the workspace per step."""
    return _WIDTH[mode] * hidden


def grad_width(mode: str, hidden: int) -> int:
    """Columns of ``rnn_layer_backward``'s result."""
    return (2 if mode == "gru" else 1) * _GATES[mode] * hidden


def _split(mode: str, args: tuple) -> tuple:
    """``(x, h0, c0, w_ih, w_hh, b_ih, b_hh)`` with ``c0`` None but for the LSTM."""
    if mode == "lstm":
        return tuple(args)
    x, h0, *rest = args
    return (x, h0, None, *rest)


def _steps(t_len: int, reverse: bool) -> range:
    return range(t_len - 1, -1, -1) if reverse else range(t_len)


# ------------------------------------------------------------------------- forward


def _layer_impl(*args: np.ndarray, mode: str, reverse: bool) -> np.ndarray:
    x, h0, c0, w_ih, w_hh, b_ih, b_hh = _split(mode, args)
    t_len, batch, n_in = x.shape
    n = h0.shape[1]
    gn = _GATES[mode] * n
    # The input side of every step is one product over the whole sequence.
    gx = (x.reshape(t_len * batch, n_in) @ w_ih.T + b_ih).reshape(t_len, batch, gn)
    ws = np.empty((t_len, batch, width(mode, n)), x.dtype)
    h, c = h0, c0
    for t in _steps(t_len, reverse):
        gh = h @ w_hh.T + b_hh
        row = ws[t]
        if mode == "tanh":
            h = np.tanh(gx[t] + gh)
        elif mode == "relu":
            h = np.maximum(gx[t] + gh, x.dtype.type(0))
        elif mode == "lstm":
            a = gx[t] + gh
            i = _sigmoid_impl(a[:, :n])
            f = _sigmoid_impl(a[:, n:2 * n])
            g = np.tanh(a[:, 2 * n:3 * n])
            o = _sigmoid_impl(a[:, 3 * n:])
            c = f * c + i * g
            h = o * np.tanh(c)
            row[:, n:2 * n] = c
            row[:, 2 * n:] = np.concatenate((i, f, g, o), axis=1)
        else:
            r = _sigmoid_impl(gx[t, :, :n] + gh[:, :n])
            z = _sigmoid_impl(gx[t, :, n:2 * n] + gh[:, n:2 * n])
            hn = gh[:, 2 * n:]
            new = np.tanh(gx[t, :, 2 * n:] + r * hn)
            # h' = (1 - z) * n + z * h, as PyTorch's kernel computes it.
            h = (h - new) * z + new
            row[:, n:] = np.concatenate((r, z, new, hn), axis=1)
        row[:, :n] = h
    return ws


def _layer_infer(*args: Any, mode: str, reverse: bool) -> tuple:
    if mode not in MODES:
        raise ValueError(f"rnn_layer: mode must be one of {MODES}, got {mode!r}")
    want = 7 if mode == "lstm" else 6
    if len(args) != want:
        raise TypeError(f"rnn_layer[{mode}] takes {want} tensors, got {len(args)}")
    x, h0, c0, w_ih, w_hh, b_ih, b_hh = _split(mode, args)
    shapes = {k: tuple(v.shape) for k, v in
              (("x", x), ("h0", h0), ("w_ih", w_ih), ("w_hh", w_hh), ("b_ih", b_ih),
               ("b_hh", b_hh)) + ((("c0", c0),) if c0 is not None else ())}
    if len(shapes["x"]) != 3 or shapes["x"][0] < 1:
        raise ShapeError(f"rnn_layer: expected input (time >= 1, batch, features), got "
                         f"{shapes['x']}")
    t_len, batch, n_in = shapes["x"]
    if len(shapes["h0"]) != 2:
        raise ShapeError(f"rnn_layer: expected h0 (batch, hidden), got {shapes['h0']}")
    n = shapes["h0"][1]
    gn = _GATES[mode] * n
    expected = {"h0": (batch, n), "c0": (batch, n), "w_ih": (gn, n_in), "w_hh": (gn, n),
                "b_ih": (gn,), "b_hh": (gn,)}
    for k, shape in shapes.items():
        if k != "x" and shape != expected[k]:
            raise ShapeError(f"rnn_layer[{mode}]: {k} has shape {shape}, expected "
                             f"{expected[k]} for input {shapes['x']} and hidden size {n}")
    dtypes = {np.dtype(a.dtype) for a in (x, h0, w_ih, w_hh, b_ih, b_hh)
              + ((c0,) if c0 is not None else ())}
    if len(dtypes) != 1 or next(iter(dtypes)).kind != "f":
        raise TypeError(f"rnn_layer: every tensor must have the same floating dtype, got "
                        f"{sorted(str(d) for d in dtypes)}")
    return (t_len, batch, width(mode, n)), x.dtype


def _layer_vjp(ctx, g):
    mode, reverse = ctx.attrs["mode"], ctx.attrs["reverse"]
    x, h0, c0, w_ih, w_hh, _, _ = _split(mode, ctx.args)
    ws = ctx.out
    needs = _split(mode, ctx.needs_input_grad)
    t_len, batch, n_in = ctx.inputs[0].shape
    n = ctx.inputs[1].shape[1]
    gn = _GATES[mode] * n
    states = (h0, c0) if mode == "lstm" else (h0,)
    back = layer_backward(g, ws, *states, w_hh, mode=mode, reverse=reverse)
    dgx = back[:t_len, :, :gn]
    dgh = back[:t_len, :, gn:] if mode == "gru" else dgx
    rows = t_len * batch
    grads = {}
    if needs[0]:
        grads["x"] = matmul(dgx, w_ih)
    if needs[1]:
        grads["h0"] = back[t_len, :, :n]
    if needs[2]:
        grads["c0"] = back[t_len, :, n:2 * n]
    if needs[3]:
        grads["w_ih"] = matmul(transpose(reshape(dgx, (rows, gn))),
                               reshape(x, (rows, n_in)))
    if needs[4]:
        # Each step's hidden product read the state before it: h0, then h_t in time order
        # (reversed: h_{t+1}, then h0 at the last step).
        first = reshape(h0, (1, batch, n))
        if t_len == 1:
            before = first
        elif reverse:
            before = concatenate((ws[1:, :, :n], first), axis=0)
        else:
            before = concatenate((first, ws[:t_len - 1, :, :n]), axis=0)
        grads["w_hh"] = matmul(transpose(reshape(dgh, (rows, gn))),
                               reshape(before, (rows, n)))
    if needs[5]:
        grads["b_ih"] = _sum(dgx, (0, 1))
    if needs[6]:
        grads["b_hh"] = _sum(dgh, (0, 1))
    names = ("x", "h0", "c0", "w_ih", "w_hh", "b_ih", "b_hh")
    out = tuple(grads.get(k) for k in names)
    return out if mode == "lstm" else out[:2] + out[3:]


def _torch_name(node: Any) -> str:
    mode = node.attrs["mode"]
    return {"lstm": "LstmBackward0", "gru": "GruBackward0"}.get(mode, "RnnBackward0")


RNN_LAYER = register(OpDef(
    "rnn_layer", _layer_impl, _layer_infer, _layer_vjp, _torch_name,
    saves=(0, 1, 2, 3, 4), saves_out=True,
))


# ------------------------------------------------------------------------ backward


def _backward_impl(g: np.ndarray, ws: np.ndarray, h0: np.ndarray, *rest: np.ndarray,
                   mode: str, reverse: bool) -> np.ndarray:
    c0, w_hh = rest if mode == "lstm" else (None, rest[0])
    t_len, batch, _ = ws.shape
    n = h0.shape[1]
    gn = _GATES[mode] * n
    out = np.zeros((t_len + 1, batch, grad_width(mode, n)), ws.dtype)
    dh = np.zeros((batch, n), ws.dtype)
    dc = np.zeros((batch, n), ws.dtype)
    one = ws.dtype.type(1)
    order = list(_steps(t_len, reverse))
    for k in range(t_len - 1, -1, -1):
        t = order[k]
        prev = order[k - 1] if k else None  # the step whose state this one read
        dh = dh + g[t, :, :n]
        h = ws[t, :, :n]
        if mode == "tanh":
            d = dh * (one - h * h)
        elif mode == "relu":
            d = np.where(h > 0, dh, ws.dtype.type(0))
        elif mode == "lstm":
            c = ws[t, :, n:2 * n]
            i, f, cell, o = (ws[t, :, (2 + j) * n:(3 + j) * n] for j in range(4))
            c_prev = c0 if prev is None else ws[prev, :, n:2 * n]
            gi, gf, gc, go = (g[t, :, (2 + j) * n:(3 + j) * n] for j in range(4))
            tc = np.tanh(c)
            dc = dc + g[t, :, n:2 * n] + dh * o * (one - tc * tc)
            d = np.concatenate(((dc * cell + gi) * i * (one - i),
                                (dc * c_prev + gf) * f * (one - f),
                                (dc * i + gc) * (one - cell * cell),
                                (dh * tc + go) * o * (one - o)), axis=1)
            dc = dc * f
        else:
            r, z, new, hn = (ws[t, :, (1 + j) * n:(2 + j) * n] for j in range(4))
            gr, gz, gnew, ghn = (g[t, :, (1 + j) * n:(2 + j) * n] for j in range(4))
            h_prev = h0 if prev is None else ws[prev, :, :n]
            dnew = (dh * (one - z) + gnew) * (one - new * new)
            dr = (dnew * hn + gr) * r * (one - r)
            dz = (dh * (h_prev - new) + gz) * z * (one - z)
            out[t, :, :gn] = np.concatenate((dr, dz, dnew), axis=1)
            d = np.concatenate((dr, dz, dnew * r + ghn), axis=1)
            out[t, :, gn:] = d
            dh = dh * z + d @ w_hh
            continue
        out[t, :, :gn] = d
        dh = d @ w_hh
    out[t_len, :, :n] = dh
    if mode == "lstm":
        out[t_len, :, n:2 * n] = dc
    return out


def _backward_infer(g: Any, ws: Any, h0: Any, *rest: Any, mode: str, reverse: bool) -> tuple:
    t_len, batch, _ = ws.shape
    if tuple(g.shape) != tuple(ws.shape):
        raise ShapeError(f"rnn_layer_backward: gradient {tuple(g.shape)} and workspace "
                         f"{tuple(ws.shape)} differ")
    n = h0.shape[1]
    return (t_len + 1, batch, grad_width(mode, n)), ws.dtype


def _backward_vjp(ctx, g):
    raise NotImplementedError(
        "a second derivative through nn.RNN, nn.LSTM or nn.GRU (rnn_layer_backward) is not "
        "supported; use the cells (nn.RNNCell, nn.LSTMCell, nn.GRUCell) in a Python loop")


RNN_LAYER_BACKWARD = register(OpDef(
    "rnn_layer_backward", _backward_impl, _backward_infer, _backward_vjp,
    "RnnLayerBackwardBackward0",
))


# ---------------------------------------------------------------------- functions


def rnn_layer(x: Any, h0: Any, c0: Any, w_ih: Any, w_hh: Any, b_ih: Any, b_hh: Any,
              mode: str, reverse: bool = False) -> Any:
    """One recurrent layer and direction over the sequence ``x`` (T, B, I); returns the
    workspace (T, B, W) whose columns ``[0, H)`` are the hidden states and, for the LSTM,
    ``[H, 2H)`` the cell states. ``c0`` is the LSTM's initial cell state (None otherwise)."""
    if mode not in MODES:
        raise ValueError(f"rnn_layer: mode must be one of {MODES}, got {mode!r}")
    if (c0 is None) == (mode == "lstm"):
        raise TypeError("rnn_layer: c0 is the LSTM's initial cell state: give it for "
                        f"mode='lstm' and only then (mode={mode!r})")
    states = (h0, c0) if mode == "lstm" else (h0,)
    return bind(RNN_LAYER, x, *states, w_ih, w_hh, b_ih, b_hh, mode=mode,
                reverse=bool(reverse))


def layer_backward(g: Any, ws: Any, *states_and_w_hh: Any, mode: str,
                   reverse: bool = False) -> Any:
    """The backward through time of `rnn_layer` (see the module's docstring)."""
    return bind(RNN_LAYER_BACKWARD, g, ws, *states_and_w_hh, mode=mode, reverse=bool(reverse))
