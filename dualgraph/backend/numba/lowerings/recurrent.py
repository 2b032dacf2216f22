"""Recurrences: ``rnn_layer`` (and ``rnn_layer_proj``, the LSTM with a projection: one
more GEMM per step) and ``rnn_layer_backward`` as one loop over time each.

The forward is one GEMM for the input side of every step (``x @ W_ih.T`` over the whole
sequence), then per step one GEMM for the hidden side into a (B, G*H) buffer and one
elementwise pass over (B, H) that applies the gates and writes the step's workspace row.
The backward runs the steps in the opposite order: one elementwise pass writing the
step's gate gradients, then one GEMM carrying the hidden-state gradient to the step
before. With lengths, a sequence past its end keeps its state (a select per element).
The generated code is the same for every sequence length (the length is a loop extent,
read from the arguments' shapes when it is large, and no size is T + 1 or a multiple of T
that is no argument's): compile time does not grow with the sequence.
"""

from __future__ import annotations

import numpy as np

from ....ir.graph import Node
from ....ops.recurrent import backward_width, gates, grad_width, input_names
from ... import kir
from ..blas import HAVE_CBLAS
from ..recurrent_kernels import MODES
from . import _reshaped, ishape, lowers

# The time loops as calls into C functions compiled once (`recurrent_kernels`), when
# NumPy's BLAS is reachable from them; else (and for comparing the two) as loops written
# into the kernel.
CALL_C = HAVE_CBLAS


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


def _inputs(node: Node, args: list) -> dict:
    """The op's input buffers by name (see `ops.recurrent` for their order)."""
    mode = node.attrs["mode"]
    names = input_names(mode, bool(node.attrs.get("lengths")), bool(node.attrs.get("proj")))
    return dict(zip(names, (a.buf for a in args)))


_C_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))


def _c_call(fn: str, node: Node, res: kir.Buffer, bufs: list, optional: tuple, lens_at: int,
            out: str) -> kir.Block:
    """The op as one call of its C function (`recurrent_kernels`): the absent inputs (at
    ``optional``: c0, lengths, w_hr) stand in as one-element buffers, the lengths (at
    ``lens_at``) as int64 (the function reads them so)."""
    mode = node.attrs["mode"]
    block = kir.Block([kir.Comment(f"{fn}[{mode}]: the time loop in a C function"),
                       kir.Alloc(res)], res)
    args = list(bufs)
    for k in optional:
        if args[k] is None and k != lens_at:
            args[k] = bufs[2 if fn == "rnn_backward" else 1]  # h0: never read in its place
        elif args[k] is None:
            ph = kir.Buffer(f"{out}_nolens", (1,), np.dtype(np.int64))
            block.add(kir.Alloc(ph))  # never read
            args[k] = ph
    lens = args[lens_at]
    if np.dtype(lens.dtype) != np.int64:
        i = kir.Var(f"{out}_i")
        wide = kir.Buffer(f"{out}_lens", lens.shape, np.dtype(np.int64))
        block.add(kir.Alloc(wide), kir.Loop(i, lens.shape[0], (
            kir.Store(wide, (i,), kir.Cast(lens[(i,)], np.dtype(np.int64))),)))
        args[lens_at] = wide
    flags = (bool(node.attrs["reverse"]), bool(node.attrs.get("lengths")),
             bool(node.attrs.get("proj")), bool(MODES[mode] & 1), bool(MODES[mode] & 2))
    block.add(kir.LibCall(fn, (*flags, *args), (res,)))
    return block


@lowers("rnn_layer", "rnn_layer_proj")
def _rnn_layer(node: Node, args: list, out: str) -> kir.Block:
    mode, reverse = node.attrs["mode"], bool(node.attrs["reverse"])
    lstm = mode == "lstm"
    a = _inputs(node, args)
    x, h0, c0, lens, w_hr = a["x"], a["h0"], a.get("c0"), a.get("lens"), a.get("w_hr")
    w_ih, w_hh, b_ih, b_hh = a["w_ih"], a["w_hh"], a["b_ih"], a["b_hh"]
    t_len, batch, n_in = node.inputs[0].shape
    p = node.inputs[1].shape[1]  # the state's width (the projection's with w_hr)
    n = node.inputs[2].shape[1] if lstm else p
    gn = gates(mode) * n
    dt = np.dtype(node.dtype)
    res = kir.Buffer(out, ishape(node), dt)
    if CALL_C and dt in _C_DTYPES:
        return _c_call("rnn_forward", node, res, [x, h0, c0, lens, w_ih, w_hh, w_hr, b_ih,
                                                  b_hh], (2, 3, 6), 3, out)
    block = kir.Block([kir.Comment(f"rnn_layer[{mode}] as a loop over time: one GEMM per "
                                   f"step"), kir.Alloc(res)], res)
    rows = t_len * batch
    # The input side of every step at once; then the running state in (B, P) buffers that
    # are the GEMM's operand (and the LSTM's cell state).
    gx = kir.Buffer(f"{out}_gx", (rows, gn), dt)
    gh = kir.Buffer(f"{out}_gh", (batch, gn), dt)
    hp = kir.Buffer(f"{out}_hp", (batch, p), dt)
    block.add(kir.Alloc(gx), kir.Alloc(gh), kir.Alloc(hp))
    cp = hu = hq = None
    if lstm:
        cp = kir.Buffer(f"{out}_cp", (batch, n), dt)
        block.add(kir.Alloc(cp))
    if w_hr is not None:
        # The projection's input o * tanh(c) and its product with W_hr.
        hu = kir.Buffer(f"{out}_hu", (batch, n), dt)
        hq = kir.Buffer(f"{out}_hq", (batch, p), dt)
        block.add(kir.Alloc(hu), kir.Alloc(hq))
    if not (rows and n):
        return block
    # (T * B, I), not flat: the printer writes T * B from the arguments' shapes.
    xf = _reshaped(block, x, (rows, n_in), f"{out}_xf")
    wif = _reshaped(block, w_ih, (gn * n_in,), f"{out}_wi")
    whf = _reshaped(block, w_hh, (gn * p,), f"{out}_wh")
    if n_in:
        block.add(kir.Gemm(rows, gn, n_in, kir.Operand(xf, n_in), kir.Operand(wif, n_in),
                           kir.Operand(gx, gn), tb=True))
    else:
        z = kir.Var(f"{out}_z")
        flat = _reshaped(block, gx, (gx.size,), f"{out}_gxf")
        block.add(kir.Loop(z, gx.size, (kir.Store(flat, (z,), kir.const(0.0, dt)),)))
    b, j, q = kir.Var(f"{out}_b"), kir.Var(f"{out}_j"), kir.Var(f"{out}_q")
    block.add(kir.Loop(b, batch, (kir.Loop(q, p, (kir.Store(hp, (b, q), h0[(b, q)]),)),)))
    if lstm:
        block.add(kir.Loop(b, batch, (kir.Loop(j, n, (kir.Store(cp, (b, j), c0[(b, j)]),)),)))

    s = kir.Var(f"{out}_s")
    t = kir.Var(f"{out}_t")
    e = _Lets(f"{out}_v", dt)
    row = t * batch + b  # the row of gx for (t, b)
    zero = kir.const(0.0, dt)
    # With lengths, a sequence past its end keeps its state (h and c) and writes zero
    # gates; ``keep`` picks between the step's value and the kept one.
    is_running = None if lens is None else kir.Bin("<", t, lens[(b,)])
    running = None if lens is None else e("run", is_running, np.dtype(bool))

    def keep(value: kir.Expr, kept: kir.Expr) -> kir.Expr:
        return value if running is None else kir.Select(running, value, kept)

    def pre(k: int) -> kir.Expr:
        """Gate ``k``'s pre-activation, input side plus hidden side, biases included."""
        col = j + k * n
        return (gx[(row, col)] + b_ih[(col,)]) + (gh[(b, col)] + b_hh[(col,)])

    h_old = e("ho", hp[(b, j)]) if w_hr is None else None
    if mode in ("tanh", "relu"):
        a_ = e("a", pre(0))
        if mode == "tanh":
            h = e("h", _tanh(a_, dt))
        else:
            h = e("h", kir.Select(kir.Un("not", kir.Bin("<=", a_, zero)), a_, zero))
    elif lstm:
        i = e("i", _sig(pre(0), dt))
        f = e("f", _sig(pre(1), dt))
        g = e("g", _tanh(pre(2), dt))
        o = e("o", _sig(pre(3), dt))
        c_old = e("co", cp[(b, j)])
        c = e("c", f * c_old + i * g)
        h = e("h", o * _tanh(c, dt))
        if running is not None:
            c = e("ck", keep(c, c_old))
        e.store(cp, (b, j), c)
        e.store(res, (t, b, j + p), c)
        for k, v in enumerate((i, f, g, o)):
            e.store(res, (t, b, j + p + (k + 1) * n), keep(v, zero))
    else:
        r = e("r", _sig(pre(0), dt))
        z = e("z", _sig(pre(1), dt))
        hn = e("hn", gh[(b, j + 2 * n)] + b_hh[(j + 2 * n,)])
        new = e("n", _tanh((gx[(row, j + 2 * n)] + b_ih[(j + 2 * n,)]) + r * hn, dt))
        h = e("h", (h_old - new) * z + new)
        for k, v in enumerate((r, z, new, hn)):
            e.store(res, (t, b, j + (k + 1) * n), keep(v, zero))
    body = [
        kir.Let(t, _step_index(s, t_len, reverse)),
        kir.Gemm(batch, gn, p, kir.Operand(hp, p), kir.Operand(whf, p), kir.Operand(gh, gn),
                 tb=True),
    ]
    if w_hr is None:
        if running is not None:
            h = e("hk", keep(h, h_old))
        e.store(res, (t, b, j), h)
        e.store(hp, (b, j), h)
        body.append(kir.Loop(b, batch, (kir.Loop(j, n, tuple(e.stmts)),)))
    else:
        # h = W_hr (o * tanh(c)): the elementwise pass writes o * tanh(c), one more GEMM
        # projects it, and a pass over (B, P) takes the new state (or keeps the old).
        e.store(hu, (b, j), h)
        body.append(kir.Loop(b, batch, (kir.Loop(j, n, tuple(e.stmts)),)))
        whr = _reshaped(block, w_hr, (p * n,), f"{out}_wr")
        body.append(kir.Gemm(batch, p, n, kir.Operand(hu, n), kir.Operand(whr, n),
                             kir.Operand(hq, p), tb=True))
        hv = kir.Var(f"{out}_vh", dt)
        value = hq[(b, q)] if lens is None else \
            kir.Select(is_running, hq[(b, q)], hp[(b, q)])
        body.append(kir.Loop(b, batch, (kir.Loop(q, p, (
            kir.Let(hv, value), kir.Store(res, (t, b, q), hv), kir.Store(hp, (b, q), hv),
        )),)))
    block.add(kir.Loop(s, t_len, tuple(body)))
    return block


@lowers("rnn_layer_backward")
def _rnn_layer_backward(node: Node, args: list, out: str) -> kir.Block:
    mode, reverse = node.attrs["mode"], bool(node.attrs["reverse"])
    lstm, gru = mode == "lstm", mode == "gru"
    bufs = [a.buf for a in args]
    g, ws, h0 = bufs[:3]
    c0 = bufs[3] if lstm else None
    rest = bufs[4 if lstm else 3:]
    w_hh = rest.pop(0)
    w_hr = rest.pop(0) if node.attrs.get("proj") else None
    lens = rest.pop(0) if node.attrs.get("lengths") else None
    t_len, batch, _ = node.inputs[1].shape
    p = node.inputs[2].shape[1]
    n = node.inputs[3].shape[1] if lstm else p
    gn = gates(mode) * n
    k_g = grad_width(mode, n, p if w_hr is not None else 0)
    k_w = backward_width(mode, n, p if w_hr is not None else 0)
    dt = np.dtype(node.dtype)
    res = kir.Buffer(out, ishape(node), dt)
    if CALL_C and dt in _C_DTYPES:
        return _c_call("rnn_backward", node, res, [g, ws, h0, c0, w_hh, w_hr, lens], (3, 5, 6),
                       6, out)
    block = kir.Block([kir.Comment(f"rnn_layer_backward[{mode}] as a loop over time: one "
                                   f"GEMM per step"), kir.Alloc(res, 0)], res)
    dh = kir.Buffer(f"{out}_dh", (batch, p), dt)
    block.add(kir.Alloc(dh, 0))
    dc = du = None
    if lstm:
        dc = kir.Buffer(f"{out}_dc", (batch, n), dt)
        block.add(kir.Alloc(dc, 0))
    if w_hr is not None:
        du = kir.Buffer(f"{out}_du", (batch, n), dt)  # the gradient of o * tanh(c)
        block.add(kir.Alloc(du))
    if not (batch and n):
        return block
    whf = _reshaped(block, w_hh, (gn * p,), f"{out}_wh")
    b, j, q = kir.Var(f"{out}_b"), kir.Var(f"{out}_j"), kir.Var(f"{out}_q")
    s, t, pv = kir.Var(f"{out}_s"), kir.Var(f"{out}_t"), kir.Var(f"{out}_p")
    e = _Lets(f"{out}_v", dt)
    one = kir.const(1.0, dt)
    # Steps run backward: iteration s is forward step T-1-s; the step before it (whose
    # state it read) is pv, clamped into range where it is the first step, which reads the
    # initial state instead.
    first = kir.Bin("==", t, _last(t_len) if reverse else kir.const(0))

    def col(k: int) -> kir.Expr:
        return j + k * n

    def prev(buf0: kir.Buffer, k: kir.Expr) -> kir.Expr:
        return kir.Select(first, buf0[(b, j)], ws[(pv, b, k)])

    zero = kir.const(0.0, dt)
    # With lengths, a step past a sequence's end kept the state: the gradients of its h
    # (and c) columns pass on to that state unchanged and its gates get none.
    is_running = None if lens is None else kir.Bin("<", t, lens[(b,)])
    running = None if lens is None else e("run", is_running, np.dtype(bool))

    def keep(value: kir.Expr, kept: kir.Expr) -> kir.Expr:
        return value if running is None else kir.Select(running, value, kept)

    # Step t's rows of the result, (B, K), as the GEMMs' operand: a view per step, so no
    # size in the code is a multiple of T but the arguments' (T is read from them).
    rt = kir.Buffer(f"{out}_rt", (batch, k_w), dt, kir.VIEW)
    pre_pass = []  # with a projection: the pass over (B, P) and the GEMM before the gates
    if w_hr is not None:
        # dh (B, P) is the projected state's gradient: record it (for W_hr's), keep it in
        # dh for a finished sequence (else zero: the GEMM below adds the gates' path),
        # and take o * tanh(c)'s gradient, dh @ W_hr.
        dq = kir.Var(f"{out}_vq", dt)
        d_full = dq if lens is None else kir.Select(is_running, dq, zero)
        d_kept = zero if lens is None else kir.Select(is_running, zero, dq)
        pre_pass = [
            kir.Loop(b, batch, (kir.Loop(q, p, (
                kir.Let(dq, dh[(b, q)] + g[(t, b, q)]),
                kir.Store(res, (t, b, q + gn), d_full),
                kir.Store(dh, (b, q), d_kept),
            )),)),
            kir.Gemm(batch, n, p, kir.Operand(rt, k_w, offset=gn),
                     kir.Operand(_reshaped(block, w_hr, (p * n,), f"{out}_wr"), n),
                     kir.Operand(du, n)),
        ]
        d_h = e("dh", du[(b, j)])
    else:
        d_h = e("dh", dh[(b, j)] + g[(t, b, j)])
    if mode == "tanh":
        h = e("h", ws[(t, b, j)])
        e.store(res, (t, b, j), keep(d_h * (one - h * h), zero))
    elif mode == "relu":
        h = e("h", ws[(t, b, j)])
        e.store(res, (t, b, j), keep(kir.Select(kir.Bin(">", h, zero), d_h, zero), zero))
    elif lstm:
        c = e("c", ws[(t, b, j + p)])
        i, f, cell, o = (e(name, ws[(t, b, j + p + (k + 1) * n)]) for k, name in
                         enumerate(("i", "f", "g", "o")))
        gc = [g[(t, b, j + p + k * n)] for k in range(5)]
        tc = e("tc", _tanh(c, dt))
        d_c = e("dc", dc[(b, j)] + gc[0] + keep(d_h * o * (one - tc * tc), zero))
        c_prev = e("cp", prev(c0, j + p))
        e.store(res, (t, b, col(0)), keep((d_c * cell + gc[1]) * i * (one - i), zero))
        e.store(res, (t, b, col(1)), keep((d_c * c_prev + gc[2]) * f * (one - f), zero))
        e.store(res, (t, b, col(2)), keep((d_c * i + gc[3]) * (one - cell * cell), zero))
        e.store(res, (t, b, col(3)), keep((d_h * tc + gc[4]) * o * (one - o), zero))
        e.store(dc, (b, j), keep(d_c * f, d_c))
    else:
        r, z, new, hn = (e(name, ws[(t, b, col(1 + k))]) for k, name in
                         enumerate(("r", "z", "n", "hn")))
        h_prev = e("hp", prev(h0, j))
        dnew = e("dn", (d_h * (one - z) + g[(t, b, col(3))]) * (one - new * new))
        dr = e("dr", (dnew * hn + g[(t, b, col(1))]) * r * (one - r))
        dz = e("dz", (d_h * (h_prev - new) + g[(t, b, col(2))]) * z * (one - z))
        for k, v in enumerate((dr, dz, dnew, dr, dz, dnew * r + g[(t, b, col(4))])):
            e.store(res, (t, b, col(k)), keep(v, zero))
        # The direct path h' = ... + z * h; the GEMM below adds the gates' path.
        e.store(dh, (b, j), keep(d_h * z, d_h))
    if running is not None and not gru and w_hr is None:
        # The GEMM below adds to dh: a running sequence's dh is the gates' path alone.
        e.store(dh, (b, j), keep(zero, d_h))
    off = gn if gru else 0
    clamp = (kir.Call("min", (t + 1, _last(t_len)), kir.INDEX) if reverse else
             kir.Call("max", (t - 1, kir.const(0)), kir.INDEX))
    body = (
        kir.Let(t, _step_index(_last(t_len) - s, t_len, reverse)),
        kir.Let(pv, clamp),
        kir.View(rt, res, "slice", (t,)),
        # The state the step read, for W_hh's gradient.
        kir.Loop(b, batch, (kir.Loop(q, p, (kir.Store(res, (t, b, q + k_g), kir.Select(
            first, h0[(b, q)], ws[(pv, b, q)])),)),)),
        *pre_pass,
        kir.Loop(b, batch, (kir.Loop(j, n, tuple(e.stmts)),)),
        kir.Gemm(batch, p, gn, kir.Operand(rt, k_w, offset=off),
                 kir.Operand(whf, p), kir.Operand(dh, p),
                 beta=1.0 if gru or running is not None or w_hr is not None else 0.0),
    )
    block.add(kir.Loop(s, t_len, body))
    last = [kir.Loop(q, p, (kir.Store(res, (0, b, q + k_g + p), dh[(b, q)]),))]
    if lstm:
        last.append(kir.Loop(j, n, (kir.Store(res, (0, b, j + k_g + 2 * p), dc[(b, j)]),)))
    block.add(kir.Loop(b, batch, tuple(last)))
    return block


@lowers("rnn_layer_weight_grads")
def _rnn_layer_weight_grads(node: Node, args: list, out: str) -> kir.Block:
    """Three GEMMs over the backward's T * B rows (two, without a projection), each
    reading a transposed strided view of the gate gradients, and the two bias sums as
    one loop nest."""
    mode, n = node.attrs["mode"], node.attrs["hidden"]
    proj = bool(node.attrs.get("proj"))
    back, x, ws = (a.buf for a in args)
    t_len, batch, n_in = node.inputs[1].shape
    k_w = node.inputs[0].shape[2]
    w_cols = node.inputs[2].shape[2]
    gn = gates(mode) * n
    p = w_cols - {"tanh": 0, "relu": 0, "lstm": 5, "gru": 4}[mode] * n
    k_g = grad_width(mode, n, p if proj else 0)
    off = gn if mode == "gru" else 0  # the hidden side's gate gradients
    dt = np.dtype(node.dtype)
    res = kir.Buffer(out, ishape(node), dt)
    if CALL_C and dt in _C_DTYPES:
        m = MODES[mode]
        block = kir.Block([kir.Comment(f"rnn_layer_weight_grads[{mode}]: in a C function"),
                           kir.Alloc(res)], res)
        return block.add(kir.LibCall("rnn_weight_grads", (
            False, False, proj, bool(m & 1), bool(m & 2), back, x, ws, n), (res,)))
    block = kir.Block([kir.Comment(f"rnn_layer_weight_grads[{mode}]: GEMMs over the "
                                   f"sequence"), kir.Alloc(res, 0)], res)
    rows = t_len * batch
    if not (rows and n):
        return block
    bf = _reshaped(block, back, (rows, k_w), f"{out}_bk")

    def cols(buf: kir.Buffer, lo: int, width: int, name: str,
             transposed: bool = False) -> kir.Operand:
        """Columns [lo, lo + width) of the (rows, K) matrix ``buf`` (transposed: as a
        (width, rows) matrix), a strided view the target reads in place: no flattened
        size, which would be a multiple of T, is written in the code."""
        view = kir.Buffer(f"{out}_{name}", (rows, width), dt, kir.VIEW)
        block.add(kir.View(view, buf, "slice", ((None, None, None), (lo, lo + width, 1))))
        if not transposed:
            return kir.Operand(view, None)
        tr = kir.Buffer(f"{out}_{name}t", (width, rows), dt, kir.VIEW)
        block.add(kir.View(tr, view, "transpose", (1, 0)))
        return kir.Operand(tr, None)

    r, j = kir.Var(f"{out}_r"), kir.Var(f"{out}_j")
    d_x = cols(bf, 0, gn, "dx", True)
    # Each product into its own matrix, then copied into the flat result: an operand at
    # an offset of the flat result would print its size, which can equal T * B.
    products = []
    if n_in:
        products.append((d_x, kir.Operand(_reshaped(block, x, (rows, n_in), f"{out}_xf"),
                                          n_in), (gn, n_in)))
    products.append((cols(bf, off, gn, "dh", True) if off else d_x, cols(bf, k_g, p, "hb"),
                     (gn, p)))
    if proj:
        # The projection's input o * tanh(c), from the workspace, for W_hr's gradient.
        wf = _reshaped(block, ws, (rows, w_cols), f"{out}_ws")
        un = kir.Buffer(f"{out}_un", (rows, n), dt)
        block.add(kir.Alloc(un))
        block.add(kir.Loop(r, rows, (kir.Loop(j, n, (kir.Store(un, (r, j), wf[(
            r, j + p + 4 * n)] * _tanh(wf[(r, j + p)], dt)),)),)))
        products.append((cols(bf, gn, p, "dq", True), kir.Operand(un, n), (p, n)))
    at = 0
    for k, (a_op, b_op, (m, w)) in enumerate(products):  # W_ih's is empty without inputs
        mat = kir.Buffer(f"{out}_m{k}", (m, w), dt)
        block.add(kir.Alloc(mat), kir.Gemm(m, w, rows, a_op, b_op, kir.Operand(mat, w)))
        i = kir.Var(f"{out}_i")
        block.add(kir.Loop(i, m, (kir.Loop(j, w, (
            kir.Store(res, (i * w + j + at,), mat[(i, j)]),)),)))
        at += m * w
    block.add(kir.Loop(r, rows, (kir.Loop(j, gn, (
        kir.Store(res, (j + at,), res[(j + at,)] + bf[(r, j)]),
        kir.Store(res, (j + (at + gn),), res[(j + (at + gn),)] + bf[(r, j + off)]),
    )),)))
    return block
