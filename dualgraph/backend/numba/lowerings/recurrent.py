"""Recurrences: ``rnn_layer`` and ``rnn_layer_backward`` as one loop over time each.

The forward is one GEMM for the input side of every step (``x @ W_ih.T`` over the whole
sequence), then per step one GEMM for the hidden side into a (B, G*H) buffer and one
elementwise pass over (B, H) that applies the gates and writes the step's workspace row.
The backward runs the steps in the opposite order: one elementwise pass writing the
step's gate gradients, then one GEMM carrying the hidden-state gradient to the step
before. The generated code is the same for every sequence length (the length is a loop
extent, read from the arguments' shapes when it is large): compile time does not grow
with the sequence.
"""

from __future__ import annotations

import numpy as np

from ....ir.graph import Node
from ....ops.recurrent import gates, grad_width
from ... import kir
from . import _reshaped, ishape, lowers


def _sig(a: kir.Expr, dt: np.dtype) -> kir.Expr:
    return kir.Call("sigmoid", (a,), dt)


def _tanh(a: kir.Expr, dt: np.dtype) -> kir.Expr:
    return kir.Call("tanh", (a,), dt)


def _last(t_len: int) -> kir.Expr:
    """``T - 1`` written as an expression of ``T``, so the printer reads ``T`` from the
    arguments' shapes (the code is then the same for every length)."""
    return kir.const(t_len) - 1


def _step_index(s: kir.Expr, t_len: int, reverse: bool) -> kir.Expr:
    """The time step the loop's ``s``-th iteration runs."""
    return _last(t_len) - s if reverse else s


class _Lets:
    """Collects the `Let`s of one elementwise body, naming each scalar uniquely."""

    def __init__(self, prefix: str, dtype: np.dtype) -> None:
        self.prefix, self.dtype, self.stmts = prefix, dtype, []

    def __call__(self, name: str, value: kir.Expr, dtype: np.dtype | None = None) -> kir.Var:
        var = kir.Var(f"{self.prefix}_{name}", dtype or self.dtype)
        self.stmts.append(kir.Let(var, value))
        return var

    def store(self, buf: kir.Buffer, index: tuple, value: kir.Expr) -> None:
        self.stmts.append(kir.Store(buf, index, value))


@lowers("rnn_layer")
def _rnn_layer(node: Node, args: list, out: str) -> kir.Block:
    mode, reverse = node.attrs["mode"], bool(node.attrs["reverse"])
    lstm = mode == "lstm"
    bufs = [a.buf for a in args]
    x, h0 = bufs[0], bufs[1]
    c0 = bufs[2] if lstm else None
    w_ih, w_hh, b_ih, b_hh = bufs[-4:]
    t_len, batch, n_in = node.inputs[0].shape
    n = node.inputs[1].shape[1]
    gn = gates(mode) * n
    dt = np.dtype(node.dtype)
    res = kir.Buffer(out, ishape(node), dt)
    block = kir.Block([kir.Comment(f"rnn_layer[{mode}] as a loop over {t_len} steps: one "
                                   f"GEMM per step"), kir.Alloc(res)], res)
    rows = t_len * batch
    # The input side of every step at once; then the running state in (B, H) buffers that
    # are the GEMM's operand (and the LSTM's cell state).
    gx = kir.Buffer(f"{out}_gx", (rows, gn), dt)
    gh = kir.Buffer(f"{out}_gh", (batch, gn), dt)
    hp = kir.Buffer(f"{out}_hp", (batch, n), dt)
    block.add(kir.Alloc(gx), kir.Alloc(gh), kir.Alloc(hp))
    cp = None
    if lstm:
        cp = kir.Buffer(f"{out}_cp", (batch, n), dt)
        block.add(kir.Alloc(cp))
    if not (rows and n):
        return block
    xf = _reshaped(block, x, (rows * n_in,), f"{out}_xf")
    wif = _reshaped(block, w_ih, (gn * n_in,), f"{out}_wi")
    whf = _reshaped(block, w_hh, (gn * n,), f"{out}_wh")
    if n_in:
        block.add(kir.Gemm(rows, gn, n_in, kir.Operand(xf, n_in), kir.Operand(wif, n_in),
                           kir.Operand(gx, gn), tb=True))
    else:
        z = kir.Var(f"{out}_z")
        flat = _reshaped(block, gx, (gx.size,), f"{out}_gxf")
        block.add(kir.Loop(z, gx.size, (kir.Store(flat, (z,), kir.const(0.0, dt)),)))
    b, j = kir.Var(f"{out}_b"), kir.Var(f"{out}_j")
    init = [kir.Store(hp, (b, j), h0[(b, j)])]
    if lstm:
        init.append(kir.Store(cp, (b, j), c0[(b, j)]))
    block.add(kir.Loop(b, batch, (kir.Loop(j, n, tuple(init)),)))

    s = kir.Var(f"{out}_s")
    t = kir.Var(f"{out}_t")
    e = _Lets(f"{out}_v", dt)
    row = t * batch + b  # the row of gx for (t, b)

    def pre(k: int) -> kir.Expr:
        """Gate ``k``'s pre-activation, input side plus hidden side, biases included."""
        col = j + k * n
        return (gx[(row, col)] + b_ih[(col,)]) + (gh[(b, col)] + b_hh[(col,)])

    if mode in ("tanh", "relu"):
        a = e("a", pre(0))
        if mode == "tanh":
            h = e("h", _tanh(a, dt))
        else:
            zero = kir.const(0.0, dt)
            h = e("h", kir.Select(kir.Un("not", kir.Bin("<=", a, zero)), a, zero))
    elif lstm:
        i = e("i", _sig(pre(0), dt))
        f = e("f", _sig(pre(1), dt))
        g = e("g", _tanh(pre(2), dt))
        o = e("o", _sig(pre(3), dt))
        c = e("c", f * cp[(b, j)] + i * g)
        h = e("h", o * _tanh(c, dt))
        e.store(cp, (b, j), c)
        for k, v in enumerate((c, i, f, g, o)):
            e.store(res, (t, b, j + (k + 1) * n), v)
    else:
        r = e("r", _sig(pre(0), dt))
        z = e("z", _sig(pre(1), dt))
        hn = e("hn", gh[(b, j + 2 * n)] + b_hh[(j + 2 * n,)])
        new = e("n", _tanh((gx[(row, j + 2 * n)] + b_ih[(j + 2 * n,)]) + r * hn, dt))
        h = e("h", (hp[(b, j)] - new) * z + new)
        for k, v in enumerate((r, z, new, hn)):
            e.store(res, (t, b, j + (k + 1) * n), v)
    e.store(res, (t, b, j), h)
    e.store(hp, (b, j), h)
    body = (
        kir.Let(t, _step_index(s, t_len, reverse)),
        kir.Gemm(batch, gn, n, kir.Operand(hp, n), kir.Operand(whf, n), kir.Operand(gh, gn),
                 tb=True),
        kir.Loop(b, batch, (kir.Loop(j, n, tuple(e.stmts)),)),
    )
    block.add(kir.Loop(s, t_len, body))
    return block


@lowers("rnn_layer_backward")
def _rnn_layer_backward(node: Node, args: list, out: str) -> kir.Block:
    mode, reverse = node.attrs["mode"], bool(node.attrs["reverse"])
    lstm, gru = mode == "lstm", mode == "gru"
    bufs = [a.buf for a in args]
    g, ws, h0 = bufs[:3]
    c0 = bufs[3] if lstm else None
    w_hh = bufs[-1]
    t_len, batch, _ = node.inputs[1].shape
    n = node.inputs[2].shape[1]
    gn = gates(mode) * n
    k_w = grad_width(mode, n)
    dt = np.dtype(node.dtype)
    res = kir.Buffer(out, ishape(node), dt)
    block = kir.Block([kir.Comment(f"rnn_layer_backward[{mode}] as a loop over {t_len} "
                                   f"steps: one GEMM per step"), kir.Alloc(res, 0)], res)
    dh = kir.Buffer(f"{out}_dh", (batch, n), dt)
    block.add(kir.Alloc(dh, 0))
    dc = None
    if lstm:
        dc = kir.Buffer(f"{out}_dc", (batch, n), dt)
        block.add(kir.Alloc(dc, 0))
    if not (batch and n):
        return block
    whf = _reshaped(block, w_hh, (gn * n,), f"{out}_wh")
    b, j = kir.Var(f"{out}_b"), kir.Var(f"{out}_j")
    s, t, p = kir.Var(f"{out}_s"), kir.Var(f"{out}_t"), kir.Var(f"{out}_p")
    e = _Lets(f"{out}_v", dt)
    one = kir.const(1.0, dt)
    # Steps run backward: iteration s is forward step T-1-s; the step before it (whose
    # state it read) is p, clamped into range where it is the first step, which reads the
    # initial state instead.
    first = kir.Bin("==", t, _last(t_len) if reverse else kir.const(0))

    def col(k: int) -> kir.Expr:
        return j + k * n

    def prev(buf0: kir.Buffer, k: int) -> kir.Expr:
        return kir.Select(first, buf0[(b, j)], ws[(p, b, col(k))])

    d_h = e("dh", dh[(b, j)] + g[(t, b, j)])
    h = e("h", ws[(t, b, j)])
    if mode == "tanh":
        e.store(res, (t, b, j), d_h * (one - h * h))
    elif mode == "relu":
        e.store(res, (t, b, j), kir.Select(kir.Bin(">", h, kir.const(0.0, dt)), d_h,
                                           kir.const(0.0, dt)))
    elif lstm:
        c = e("c", ws[(t, b, col(1))])
        i, f, cell, o = (e(name, ws[(t, b, col(2 + k))]) for k, name in
                         enumerate(("i", "f", "g", "o")))
        tc = e("tc", _tanh(c, dt))
        d_c = e("dc", dc[(b, j)] + g[(t, b, col(1))] + d_h * o * (one - tc * tc))
        c_prev = e("cp", prev(c0, 1))
        e.store(res, (t, b, col(0)), (d_c * cell + g[(t, b, col(2))]) * i * (one - i))
        e.store(res, (t, b, col(1)), (d_c * c_prev + g[(t, b, col(3))]) * f * (one - f))
        e.store(res, (t, b, col(2)), (d_c * i + g[(t, b, col(4))]) * (one - cell * cell))
        e.store(res, (t, b, col(3)), (d_h * tc + g[(t, b, col(5))]) * o * (one - o))
        e.store(dc, (b, j), d_c * f)
    else:
        r, z, new, hn = (e(name, ws[(t, b, col(1 + k))]) for k, name in
                         enumerate(("r", "z", "n", "hn")))
        h_prev = e("hp", prev(h0, 0))
        dnew = e("dn", (d_h * (one - z) + g[(t, b, col(3))]) * (one - new * new))
        dr = e("dr", (dnew * hn + g[(t, b, col(1))]) * r * (one - r))
        dz = e("dz", (d_h * (h_prev - new) + g[(t, b, col(2))]) * z * (one - z))
        for k, v in enumerate((dr, dz, dnew, dr, dz, dnew * r + g[(t, b, col(4))])):
            e.store(res, (t, b, col(k)), v)
        # The direct path h' = ... + z * h; the GEMM below adds the gates' path.
        e.store(dh, (b, j), d_h * z)
    off = gn if gru else 0
    clamp = (kir.Call("min", (t + 1, _last(t_len)), kir.INDEX) if reverse else
             kir.Call("max", (t - 1, kir.const(0)), kir.INDEX))
    body = (
        kir.Let(t, _step_index(_last(t_len) - s, t_len, reverse)),
        kir.Let(p, clamp),
        kir.Loop(b, batch, (kir.Loop(j, n, tuple(e.stmts)),)),
        kir.Gemm(batch, n, gn, kir.Operand(res, k_w, offset=t * (batch * k_w) + off),
                 kir.Operand(whf, n), kir.Operand(dh, n), beta=1.0 if gru else 0.0),
    )
    block.add(kir.Loop(s, t_len, body))
    last = [kir.Store(res, (t_len, b, j), dh[(b, j)])]
    if lstm:
        last.append(kir.Store(res, (t_len, b, j + n), dc[(b, j)]))
    block.add(kir.Loop(b, batch, (kir.Loop(j, n, tuple(last)),)))
    return block
