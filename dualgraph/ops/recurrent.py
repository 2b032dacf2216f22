"""Recurrences: ``rnn_layer``, one layer and one direction of an RNN (tanh or ReLU), LSTM or
GRU over a whole sequence, and ``rnn_layer_backward``, its backward through time.

Each is one op whose kernel holds the time loop, as PyTorch's ``aten::lstm``/``gru``/
``rnn_tanh`` are single ops: a compiled graph then has one node per layer and direction
whatever the sequence length, and its generated code (a loop over time around one GEMM
and one elementwise pass per step) is the size of one step.

``rnn_layer(x, h0, [c0,] [lengths,] w_ih, w_hh, b_ih, b_hh, mode, reverse)``: ``x`` (T,
B, I), states (B, H), weights and biases in PyTorch's layout and gate order (LSTM: input,
forget, cell, output; GRU: reset, update, new). Its value is the layer's **workspace** (T,
B, W): per time step, the hidden state ``h_t`` in columns ``[0, H)``, the LSTM's cell state
``c_t`` in ``[H, 2H)``, then what the backward reads (the LSTM's four gate activations; the
GRU's reset, update and new gates and ``W_hn h + b_hn``). ``reverse`` runs the steps from
the last to the first (the second direction of a bidirectional layer); ``h_t`` stays at
time ``t``. With ``lengths`` (B,) integers, sequence ``b`` runs its first ``lengths[b]``
steps; at a step past its end it keeps its state (the row holds the kept state and zero
gates). The layer's outputs are views of the workspace (`nn.RNN` takes them); the VJP
takes a gradient of every column.

``rnn_layer_proj(x, h0, c0, [lengths,] w_ih, w_hh, w_hr, b_ih, b_hh, mode, reverse)``: the
LSTM with a projection (``proj_size``), state ``h = W_hr (o * tanh(c))`` of width P: the
workspace's state columns are ``[0, P)``, the cell state's ``[P, P + H)``.

``rnn_layer_backward(g, ws, h0, [c0,] w_hh, [w_hr,] [lengths], mode, reverse)`` runs the
time loop backward (BPTT) and returns (T, B, K): for each step the gradient of the gate
pre-activations (the GRU's input-side and hidden-side gradients differ in the new gate,
6H for it, input side first; with a projection, then the step's gradient of ``h``, for
``W_hr``'s), then the state the step read (for ``W_hh``'s gradient), and in row 0 only
the gradients of ``h0`` (and ``c0``). No extent is T + 1 or T - 1, so the generated code
reads T from the arguments' shapes at every length.

``rnn_layer_weight_grads(back, x, ws, mode, hidden, [proj])`` takes from those rows every
weight's and bias's gradient at once (one GEMM over the sequence per weight, and the bias
sums) into one flat result: ``w_ih``'s, ``w_hh``'s, ``w_hr``'s (with a projection),
``b_ih``'s, ``b_hh``'s. The VJP of ``rnn_layer`` slices it, and takes the input's gradient
with one matrix product. The second derivative of these two ops is not written and
raises: under ``create_graph`` the VJP composes the backward from ordinary ops instead.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import ShapeError
from ..modes import bind
from .elementwise import _sigmoid_impl, gt, mul, tanh, where
from .linalg import matmul
from .reduce import sum as _sum
from .registry import OpDef, register
from .shape import concatenate, reshape, stack, transpose

MODES = ("tanh", "relu", "lstm", "gru")
_GATES = {"tanh": 1, "relu": 1, "lstm": 4, "gru": 3}
# Workspace columns per step after the state's, in units of H: LSTM c, i, f, g, o; GRU r,
# z, n, hn.
_EXTRA = {"tanh": 0, "relu": 0, "lstm": 5, "gru": 4}


# Whether ops are being recorded for a later derivative (a backward with create_graph):
# the gradient mode lives in the eager layer, above this one, which sets this query
# (`set_recording_query`); until then nothing records.
_RECORDING: Callable[[], bool] = lambda: False  # noqa: E731


def set_recording_query(query: Callable[[], bool]) -> None:
    """Tell the VJP how to ask whether the gradient it builds will be differentiated."""
    global _RECORDING
    _RECORDING = query


def gates(mode: str) -> int:
    """The number of gates of ``mode`` (rows of ``w_ih`` per hidden unit)."""
    return _GATES[mode]


def width(mode: str, hidden: int, proj: int = 0) -> int:
    """Columns of the workspace per step: the state (``proj`` wide for the LSTM with a
    projection, else ``hidden``), then the rest."""
    return (proj or hidden) + _EXTRA[mode] * hidden


def grad_width(mode: str, hidden: int, proj: int = 0) -> int:
    """Columns of ``rnn_layer_backward``'s result per step before the states': the gates'
    gradients (the GRU's twice), then with a projection the step's gradient of the
    projected state."""
    return (2 if mode == "gru" else 1) * _GATES[mode] * hidden + proj


def backward_width(mode: str, hidden: int, proj: int = 0) -> int:
    """All columns of ``rnn_layer_backward``'s result: `grad_width`'s, then the state each
    step read (P), then in row 0 only the gradients of ``h0`` (P) and ``c0`` (H, LSTM)."""
    p = proj or hidden
    return grad_width(mode, hidden, proj) + 2 * p + (hidden if mode == "lstm" else 0)


class _Args:
    """An op's inputs by name. Their order: ``x, h0, [c0,] [lengths,] w_ih, w_hh,
    [w_hr,] b_ih, b_hh`` (what the VJP reads comes first, so the ops save a prefix)."""

    __slots__ = ("x", "h0", "c0", "lens", "w_ih", "w_hh", "w_hr", "b_ih", "b_hh")
    NAMES = __slots__

    def __init__(self, mode: str, args: tuple, lengths: bool = False, proj: bool = False):
        it = iter(args)
        self.x, self.h0 = next(it), next(it)
        self.c0 = next(it) if mode == "lstm" else None
        self.lens = next(it) if lengths else None
        self.w_ih, self.w_hh = next(it), next(it)
        self.w_hr = next(it) if proj else None
        self.b_ih, self.b_hh = next(it), next(it)
        if next(it, None) is not None:
            raise TypeError("rnn_layer: too many inputs")


def input_names(mode: str, lengths: bool = False, proj: bool = False) -> tuple:
    """The input names in the op's order."""
    return tuple(k for k in _Args.NAMES if (k != "c0" or mode == "lstm") and
                 (k != "lens" or lengths) and (k != "w_hr" or proj))


def _running(lens: np.ndarray | None, t: int, batch: int) -> np.ndarray:
    """(B, 1): whether step ``t`` is one of each sequence's steps (all of them without
    lengths)."""
    if lens is None:
        return np.ones((batch, 1), bool)
    return (t < lens)[:, None]


def _steps(t_len: int, reverse: bool) -> range:
    return range(t_len - 1, -1, -1) if reverse else range(t_len)


# ------------------------------------------------------------------------- forward


def _layer_impl(*args: np.ndarray, mode: str, reverse: bool, lengths: bool = False,
                proj: bool = False) -> np.ndarray:
    a = _Args(mode, args, lengths, proj)
    x, lens, w_hr = a.x, a.lens, a.w_hr
    t_len, batch, n_in = x.shape
    p = a.h0.shape[1]  # the state's width: the projection's with w_hr, else the hidden's
    n = a.c0.shape[1] if mode == "lstm" else p
    gn = _GATES[mode] * n
    if lens is not None and lens.size and (lens.min() < 1 or lens.max() > t_len):
        raise ValueError(f"rnn_layer: every length must be in [1, {t_len}] (the input's "
                         f"steps), got {lens.tolist()}")
    # The input side of every step is one product over the whole sequence.
    gx = (x.reshape(t_len * batch, n_in) @ a.w_ih.T + a.b_ih).reshape(t_len, batch, gn)
    ws = np.zeros((t_len, batch, width(mode, n, p if proj else 0)), x.dtype)
    h, c = a.h0, a.c0
    zero = x.dtype.type(0)
    for t in _steps(t_len, reverse):
        run = _running(lens, t, batch)
        gh = h @ a.w_hh.T + a.b_hh
        row = ws[t]
        if mode == "tanh":
            h_new = np.tanh(gx[t] + gh)
        elif mode == "relu":
            h_new = np.maximum(gx[t] + gh, zero)
        elif mode == "lstm":
            pre = gx[t] + gh
            i = _sigmoid_impl(pre[:, :n])
            f = _sigmoid_impl(pre[:, n:2 * n])
            g = np.tanh(pre[:, 2 * n:3 * n])
            o = _sigmoid_impl(pre[:, 3 * n:])
            c_new = f * c + i * g
            h_new = o * np.tanh(c_new)
            if w_hr is not None:
                h_new = h_new @ w_hr.T
            # A sequence past its end keeps its state; its gate columns stay zero.
            c = np.where(run, c_new, c)
            row[:, p:p + n] = c
            row[:, p + n:] = np.where(run, np.concatenate((i, f, g, o), axis=1), zero)
        else:
            r = _sigmoid_impl(gx[t, :, :n] + gh[:, :n])
            z = _sigmoid_impl(gx[t, :, n:2 * n] + gh[:, n:2 * n])
            hn = gh[:, 2 * n:]
            new = np.tanh(gx[t, :, 2 * n:] + r * hn)
            # h' = (1 - z) * n + z * h, as PyTorch's kernel computes it.
            h_new = (h - new) * z + new
            row[:, n:] = np.where(run, np.concatenate((r, z, new, hn), axis=1), zero)
        h = np.where(run, h_new, h)
        row[:, :p] = h
    return ws


def _layer_infer(*args: Any, mode: str, reverse: bool, lengths: bool = False,
                 proj: bool = False) -> tuple:
    if mode not in MODES:
        raise ValueError(f"rnn_layer: mode must be one of {MODES}, got {mode!r}")
    if proj and mode != "lstm":
        raise ValueError(f"rnn_layer: a projection is the LSTM's only, not {mode!r}'s")
    names = input_names(mode, lengths, proj)
    if len(args) != len(names):
        raise TypeError(f"rnn_layer[{mode}] takes {len(names)} tensors ({', '.join(names)}), "
                        f"got {len(args)}")
    shapes = {k: tuple(v.shape) for k, v in zip(names, args)}
    if len(shapes["x"]) != 3 or shapes["x"][0] < 1:
        raise ShapeError(f"rnn_layer: expected input (time >= 1, batch, features), got "
                         f"{shapes['x']}")
    t_len, batch, n_in = shapes["x"]
    if len(shapes["h0"]) != 2:
        raise ShapeError(f"rnn_layer: expected h0 (batch, hidden), got {shapes['h0']}")
    p = shapes["h0"][1]
    n = shapes["c0"][1] if mode == "lstm" and len(shapes["c0"]) == 2 else p
    gn = _GATES[mode] * n
    expected = {"h0": (batch, p), "c0": (batch, n), "lens": (batch,), "w_ih": (gn, n_in),
                "w_hh": (gn, p), "w_hr": (p, n), "b_ih": (gn,), "b_hh": (gn,)}
    for k, shape in shapes.items():
        if k != "x" and shape != expected[k]:
            raise ShapeError(f"rnn_layer[{mode}]: {k} has shape {shape}, expected "
                             f"{expected[k]} for input {shapes['x']} and hidden size {n}")
    dtypes = {np.dtype(v.dtype) for k, v in zip(names, args) if k != "lens"}
    if len(dtypes) != 1 or next(iter(dtypes)).kind != "f":
        raise TypeError(f"rnn_layer: every tensor must have the same floating dtype, got "
                        f"{sorted(str(d) for d in dtypes)}")
    if lengths and np.dtype(args[names.index("lens")].dtype).kind not in "iu":
        raise TypeError(f"rnn_layer: lengths must be an integer tensor, got "
                        f"{np.dtype(args[names.index('lens')].dtype)}")
    return (t_len, batch, width(mode, n, p if proj else 0)), args[0].dtype


def _layer_vjp(ctx, g):
    mode, reverse = ctx.attrs["mode"], ctx.attrs["reverse"]
    lengths, proj = bool(ctx.attrs.get("lengths")), bool(ctx.attrs.get("proj"))
    a = _Args(mode, ctx.args, lengths, proj)
    needs = _Args(mode, ctx.needs_input_grad, lengths, proj)
    ws = ctx.out
    t_len, batch, n_in = ctx.inputs[0].shape
    p = ctx.inputs[1].shape[1]
    n = ctx.inputs[2].shape[1] if mode == "lstm" else p
    gn = _GATES[mode] * n
    states = (a.h0, a.c0) if mode == "lstm" else (a.h0,)
    if _RECORDING():
        # The gradient will be differentiated again (create_graph): the backward through
        # time as ordinary ops, one step at a time, whose own gradients exist. Otherwise
        # one op holds the loop (its gradient is not written).
        steps, d_h0, d_c0 = _composed_backward(g, ws, a.h0, a.c0, a.w_hh, a.w_hr, a.lens,
                                               mode, reverse)
        # Each step's hidden product read the state before it: h0, then h_t in time order
        # (reversed: h_{t+1}, then h0 at the last step). With lengths, a reversed
        # sequence's first step reads row t+1 past its end, which holds h0 (kept).
        first = reshape(a.h0, (1, batch, p))
        if t_len == 1:
            before = first
        elif reverse:
            before = concatenate((ws[1:, :, :p], first), axis=0)
        else:
            before = concatenate((first, ws[:t_len - 1, :, :p]), axis=0)
    else:
        back = layer_backward(g, ws, *states, a.w_hh, *((a.w_hr,) if proj else ()),
                              *((a.lens,) if lengths else ()), mode=mode, reverse=reverse,
                              lengths=lengths, proj=proj)
        k = grad_width(mode, n, p if proj else 0)
        steps, before = back, back[:, :, k:k + p]
        d_h0, d_c0 = back[0, :, k + p:k + 2 * p], back[0, :, k + 2 * p:k + 2 * p + n]
    dgx = steps[:, :, :gn]
    dgh = steps[:, :, gn:2 * gn] if mode == "gru" else dgx
    rows = t_len * batch
    grads = {}
    if needs.x:
        grads["x"] = matmul(dgx, a.w_ih)
    if needs.h0:
        grads["h0"] = d_h0
    if needs.c0:
        grads["c0"] = d_c0
    if not _RECORDING():
        # The weights' and biases' gradients from one op over the backward's rows (its
        # GEMMs and sums), sliced out of its flat result: a few view nodes, not tens.
        parts = _weight_grad_shapes(mode, n_in, n, p if proj else 0)
        flat = weight_grads(back, a.x, ws, mode=mode, hidden=n, proj=proj) if any(
            getattr(needs, key) for key, _ in parts) else None
        at = 0
        for key, shape in parts:
            size = int(np.prod(shape))
            if getattr(needs, key):
                grads[key] = reshape(flat[at:at + size], shape)
            at += size
        return tuple(grads.get(k) for k in input_names(mode, lengths, proj))
    if needs.w_ih:
        grads["w_ih"] = matmul(transpose(reshape(dgx, (rows, gn))),
                               reshape(a.x, (rows, n_in)))
    if needs.w_hh:
        grads["w_hh"] = matmul(transpose(reshape(dgh, (rows, gn))),
                               reshape(before, (rows, p)))
    if proj and needs.w_hr:
        # h = W_hr (o * tanh(c)): the projection's input from the workspace's o and c.
        unprojected = mul(ws[:, :, p + 4 * n:p + 5 * n], tanh(ws[:, :, p:p + n]))
        grads["w_hr"] = matmul(transpose(reshape(steps[:, :, gn:gn + p], (rows, p))),
                               reshape(unprojected, (rows, n)))
    if needs.b_ih:
        grads["b_ih"] = _sum(dgx, (0, 1))
    if needs.b_hh:
        grads["b_hh"] = _sum(dgh, (0, 1))
    return tuple(grads.get(k) for k in input_names(mode, lengths, proj))


def _torch_name(node: Any) -> str:
    mode = node.attrs["mode"]
    return {"lstm": "LstmBackward0", "gru": "GruBackward0"}.get(mode, "RnnBackward0")


RNN_LAYER = register(OpDef(
    "rnn_layer", _layer_impl, _layer_infer, _layer_vjp, _torch_name,
    # x, the states, the lengths (when given) and the weights the VJP reads: a prefix of
    # the inputs, as long as the shortest op (tanh, no lengths) has.
    saves=(0, 1, 2, 3, 4, 5), saves_out=True,
))

# The LSTM with a projection (``proj_size``): the same op with ``w_hr`` after ``w_hh``.
# Registered apart because its VJP reads one input more (``w_hr``) than the others have.
RNN_LAYER_PROJ = register(OpDef(
    "rnn_layer_proj", _layer_impl, _layer_infer, _layer_vjp, _torch_name,
    saves=(0, 1, 2, 3, 4, 5, 6), saves_out=True,
))


# ------------------------------------------------------------------------ backward


def _backward_impl(g: np.ndarray, ws: np.ndarray, h0: np.ndarray, *rest: np.ndarray,
                   mode: str, reverse: bool, lengths: bool = False,
                   proj: bool = False) -> np.ndarray:
    rest = list(rest)
    lens = rest.pop() if lengths else None
    w_hr = rest.pop() if proj else None
    c0, w_hh = rest if mode == "lstm" else (None, rest[0])
    t_len, batch, _ = ws.shape
    p = h0.shape[1]
    n = c0.shape[1] if mode == "lstm" else p
    gn = _GATES[mode] * n
    k_g = grad_width(mode, n, p if proj else 0)
    out = np.zeros((t_len, batch, backward_width(mode, n, p if proj else 0)), ws.dtype)
    dh = np.zeros((batch, p), ws.dtype)
    dc = np.zeros((batch, n), ws.dtype)
    one, zero = ws.dtype.type(1), ws.dtype.type(0)
    order = list(_steps(t_len, reverse))
    for k in range(t_len - 1, -1, -1):
        t = order[k]
        run = _running(lens, t, batch)
        prev = order[k - 1] if k else None  # the step whose state this one read
        # A step past a sequence's end kept the state: its h (and c) columns are the state
        # it kept, so their gradients pass on to it; its gates have none.
        dh = dh + g[t, :, :p]
        h = ws[t, :, :p]
        out[t, :, k_g:k_g + p] = h0 if prev is None else ws[prev, :, :p]
        if mode == "tanh":
            d = dh * (one - h * h)
        elif mode == "relu":
            d = np.where(h > 0, dh, zero)
        elif mode == "lstm":
            c = ws[t, :, p:p + n]
            i, f, cell, o = (ws[t, :, p + (1 + j) * n:p + (2 + j) * n] for j in range(4))
            c_prev = c0 if prev is None else ws[prev, :, p:p + n]
            gi, gf, gc, go = (g[t, :, p + (1 + j) * n:p + (2 + j) * n] for j in range(4))
            du = dh  # the gradient of o * tanh(c), the projection's input
            if w_hr is not None:
                out[t, :, gn:gn + p] = np.where(run, dh, zero)
                du = dh @ w_hr
            tc = np.tanh(c)
            dc = dc + g[t, :, p:p + n] + np.where(run, du * o * (one - tc * tc), zero)
            d = np.concatenate(((dc * cell + gi) * i * (one - i),
                                (dc * c_prev + gf) * f * (one - f),
                                (dc * i + gc) * (one - cell * cell),
                                (du * tc + go) * o * (one - o)), axis=1)
            dc = np.where(run, dc * f, dc)
        else:
            r, z, new, hn = (ws[t, :, (1 + j) * n:(2 + j) * n] for j in range(4))
            gr, gz, gnew, ghn = (g[t, :, (1 + j) * n:(2 + j) * n] for j in range(4))
            h_prev = h0 if prev is None else ws[prev, :, :n]
            dnew = (dh * (one - z) + gnew) * (one - new * new)
            dr = (dnew * hn + gr) * r * (one - r)
            dz = (dh * (h_prev - new) + gz) * z * (one - z)
            out[t, :, :gn] = np.where(run, np.concatenate((dr, dz, dnew), axis=1), zero)
            d = np.where(run, np.concatenate((dr, dz, dnew * r + ghn), axis=1), zero)
            out[t, :, gn:2 * gn] = d
            dh = np.where(run, dh * z, dh) + d @ w_hh
            continue
        d = np.where(run, d, zero)
        out[t, :, :gn] = d
        dh = np.where(run, zero, dh) + d @ w_hh
    out[0, :, k_g + p:k_g + 2 * p] = dh
    if mode == "lstm":
        out[0, :, k_g + 2 * p:k_g + 2 * p + n] = dc
    return out


def _composed_backward(g: Any, ws: Any, h0: Any, c0: Any, w_hh: Any, w_hr: Any, lens: Any,
                       mode: str, reverse: bool) -> tuple:
    """``rnn_layer_backward``'s value written with differentiable registry ops, one time
    step at a time (`_backward_impl` is the same loop on arrays): its rows 0..T-1 stacked,
    and the gradients of ``h0`` and ``c0`` (None but for the LSTM). The graph grows with
    the sequence, but its gradient, a second derivative through the recurrence, exists."""
    t_len, batch = ws.shape[0], ws.shape[1]
    p = h0.shape[1]
    n = c0.shape[1] if mode == "lstm" else p
    order = list(_steps(t_len, reverse))
    rows: list = [None] * t_len
    dh = dc = None  # zero until a step adds to them

    def plus(a: Any, b: Any) -> Any:
        return b if a is None else a + b

    def keep(run: Any, value: Any, kept: Any) -> Any:
        """``value`` for the running sequences, ``kept`` (None: zero) for the others."""
        if run is None:
            return value
        return where(run, value, 0.0 if kept is None else kept)

    for k in range(t_len - 1, -1, -1):
        t = order[k]
        run = None if lens is None else gt(reshape(lens, (batch, 1)), t)
        prev = order[k - 1] if k else None
        dh = plus(dh, g[t, :, :p])
        h = ws[t, :, :p]
        if mode == "tanh":
            d = dh * (1.0 - h * h)
        elif mode == "relu":
            d = where(gt(h, 0.0), dh, 0.0)
        elif mode == "lstm":
            c = ws[t, :, p:p + n]
            i, f, cell, o = (ws[t, :, p + (1 + j) * n:p + (2 + j) * n] for j in range(4))
            gi, gf, gc, go = (g[t, :, p + (1 + j) * n:p + (2 + j) * n] for j in range(4))
            c_prev = c0 if prev is None else ws[prev, :, p:p + n]
            du = dh
            extra = ()
            if w_hr is not None:
                extra = (keep(run, dh, None),)
                du = matmul(dh, w_hr)
            tc = tanh(c)
            dc = plus(dc, g[t, :, p:p + n]) + keep(run, du * o * (1.0 - tc * tc), None)
            d = concatenate(((dc * cell + gi) * i * (1.0 - i),
                             (dc * c_prev + gf) * f * (1.0 - f),
                             (dc * i + gc) * (1.0 - cell * cell),
                             (du * tc + go) * o * (1.0 - o)), axis=1)
            d = keep(run, d, None)
            rows[t] = concatenate((d, *extra), axis=1) if extra else d
            dc = keep(run, dc * f, dc)
            dh = matmul(d, w_hh) + keep(run, 0.0, dh)
            continue
        else:
            r, z, new, hn = (ws[t, :, (1 + j) * n:(2 + j) * n] for j in range(4))
            gr, gz, gnew, ghn = (g[t, :, (1 + j) * n:(2 + j) * n] for j in range(4))
            h_prev = h0 if prev is None else ws[prev, :, :n]
            dnew = (dh * (1.0 - z) + gnew) * (1.0 - new * new)
            dr = (dnew * hn + gr) * r * (1.0 - r)
            dz = (dh * (h_prev - new) + gz) * z * (1.0 - z)
            d_in = keep(run, concatenate((dr, dz, dnew), axis=1), None)
            d = keep(run, concatenate((dr, dz, dnew * r + ghn), axis=1), None)
            rows[t] = concatenate((d_in, d), axis=1)
            dh = keep(run, dh * z, dh) + matmul(d, w_hh)
            continue
        d = keep(run, d, None)
        rows[t] = d
        dh = matmul(d, w_hh) + keep(run, 0.0, dh)
    return stack(rows, axis=0), dh, dc


def _backward_infer(g: Any, ws: Any, h0: Any, *rest: Any, mode: str, reverse: bool,
                    lengths: bool = False, proj: bool = False) -> tuple:
    t_len, batch, _ = ws.shape
    if tuple(g.shape) != tuple(ws.shape):
        raise ShapeError(f"rnn_layer_backward: gradient {tuple(g.shape)} and workspace "
                         f"{tuple(ws.shape)} differ")
    p = h0.shape[1]
    n = rest[0].shape[1] if mode == "lstm" else p
    return (t_len, batch, backward_width(mode, n, p if proj else 0)), ws.dtype


def _backward_vjp(ctx, g):
    raise NotImplementedError(
        "a second derivative through nn.RNN, nn.LSTM or nn.GRU (rnn_layer_backward) is not "
        "supported; use the cells (nn.RNNCell, nn.LSTMCell, nn.GRUCell) in a Python loop")


RNN_LAYER_BACKWARD = register(OpDef(
    "rnn_layer_backward", _backward_impl, _backward_infer, _backward_vjp,
    "RnnLayerBackwardBackward0",
))


def _weight_grad_shapes(mode: str, n_in: int, hidden: int, proj: int = 0) -> list:
    """The parts of ``rnn_layer_weight_grads``'s flat result in order, (name, shape)."""
    gn = _GATES[mode] * hidden
    p = proj or hidden
    parts = [("w_ih", (gn, n_in)), ("w_hh", (gn, p))]
    if proj:
        parts.append(("w_hr", (p, hidden)))
    return parts + [("b_ih", (gn,)), ("b_hh", (gn,))]


def _weight_grads_impl(back: np.ndarray, x: np.ndarray, ws: np.ndarray, *, mode: str,
                       hidden: int, proj: bool = False) -> np.ndarray:
    t_len, batch, n_in = x.shape
    rows = t_len * batch
    n = hidden
    gn = _GATES[mode] * n
    p = ws.shape[2] - _EXTRA[mode] * n
    k_g = grad_width(mode, n, p if proj else 0)
    flat = back.reshape(rows, back.shape[2])
    dgx = flat[:, :gn]
    dgh = flat[:, gn:2 * gn] if mode == "gru" else dgx
    parts = [dgx.T @ x.reshape(rows, n_in), dgh.T @ flat[:, k_g:k_g + p]]
    if proj:
        w = ws.reshape(rows, ws.shape[2])
        unprojected = w[:, p + 4 * n:p + 5 * n] * np.tanh(w[:, p:p + n])
        parts.append(flat[:, gn:gn + p].T @ unprojected)
    parts += [dgx.sum(axis=0), dgh.sum(axis=0)]
    return np.concatenate([q.reshape(-1) for q in parts]).astype(x.dtype, copy=False)


def _weight_grads_infer(back: Any, x: Any, ws: Any, *, mode: str, hidden: int,
                        proj: bool = False) -> tuple:
    t_len, batch, n_in = x.shape
    p = ws.shape[2] - _EXTRA[mode] * hidden
    if tuple(back.shape[:2]) != (t_len, batch) or tuple(ws.shape[:2]) != (t_len, batch):
        raise ShapeError(f"rnn_layer_weight_grads: backward {tuple(back.shape)}, input "
                         f"{tuple(x.shape)} and workspace {tuple(ws.shape)} disagree")
    size = sum(int(np.prod(s)) for _, s in
               _weight_grad_shapes(mode, n_in, hidden, p if proj else 0))
    return (size,), x.dtype


RNN_LAYER_WEIGHT_GRADS = register(OpDef(
    "rnn_layer_weight_grads", _weight_grads_impl, _weight_grads_infer, _backward_vjp,
    "RnnLayerWeightGradsBackward0",
))


# ---------------------------------------------------------------------- functions


def rnn_layer(x: Any, h0: Any, c0: Any, w_ih: Any, w_hh: Any, b_ih: Any, b_hh: Any,
              mode: str, reverse: bool = False, lengths: Any = None,
              w_hr: Any = None) -> Any:
    """One recurrent layer and direction over the sequence ``x`` (T, B, I); returns the
    workspace (T, B, W) whose first columns are the hidden states and, for the LSTM, the
    next ``H`` the cell states. ``c0`` is the LSTM's initial cell state (None otherwise).
    ``lengths`` (B,) integers, optional: sequence ``b`` runs its first ``lengths[b]`` steps
    (reversed: the steps ``lengths[b] - 1`` down to 0); at the steps past its end it keeps
    its state, so row T - 1 (reversed: row 0) holds each sequence's final state.
    ``w_hr`` (P, H), the LSTM's projection: its state is ``h = W_hr (o * tanh(c))``."""
    if mode not in MODES:
        raise ValueError(f"rnn_layer: mode must be one of {MODES}, got {mode!r}")
    if (c0 is None) == (mode == "lstm"):
        raise TypeError("rnn_layer: c0 is the LSTM's initial cell state: give it for "
                        f"mode='lstm' and only then (mode={mode!r})")
    if w_hr is not None and mode != "lstm":
        raise ValueError(f"rnn_layer: a projection (w_hr) is the LSTM's only, not {mode!r}'s")
    inputs = (x, h0, *((c0,) if mode == "lstm" else ()), *((lengths,) if lengths is not None
              else ()), w_ih, w_hh, *((w_hr,) if w_hr is not None else ()), b_ih, b_hh)
    attrs = {"mode": mode, "reverse": bool(reverse)}
    if lengths is not None:
        attrs["lengths"] = True
    if w_hr is None:
        return bind(RNN_LAYER, *inputs, **attrs)
    return bind(RNN_LAYER_PROJ, *inputs, proj=True, **attrs)


def layer_backward(g: Any, ws: Any, *states_and_weights: Any, mode: str,
                   reverse: bool = False, lengths: bool = False, proj: bool = False) -> Any:
    """The backward through time of `rnn_layer` (see the module's docstring): its inputs
    ``g, ws, h0, [c0,] w_hh, [w_hr,] [lengths]``."""
    attrs = {"mode": mode, "reverse": bool(reverse)}
    if lengths:
        attrs["lengths"] = True
    if proj:
        attrs["proj"] = True
    return bind(RNN_LAYER_BACKWARD, g, ws, *states_and_weights, **attrs)


def weight_grads(back: Any, x: Any, ws: Any, *, mode: str, hidden: int,
                 proj: bool = False) -> Any:
    """The weights' and biases' gradients of one `rnn_layer` from its backward's result
    ``back``, its input ``x`` and its workspace ``ws``: one flat vector holding ``w_ih``'s,
    ``w_hh``'s, (with a projection) ``w_hr``'s, ``b_ih``'s and ``b_hh``'s in that order."""
    attrs = {"mode": mode, "hidden": int(hidden)}
    if proj:
        attrs["proj"] = True
    return bind(RNN_LAYER_WEIGHT_GRADS, back, x, ws, **attrs)
