"""Random programs for the differential tests: one generator, shared by the fuzz tests
(tests/reliability/test_fuzz.py: every mode, float32 and float64) and the property tests
(tests/static/test_properties.py: the interpreter, float64, tight tolerances).

Hypothesis builds small straight-line programs (`Program`) over every registered op:
broadcasting shapes, repeated inputs (``x * x``, the same tensor passed twice), dead
statements, duplicated subexpressions, and identities and constants for the passes to
rewrite. Each program is Python source, executed as such, so a failing case prints exactly
what ran.
"""

from __future__ import annotations

import functools
import itertools
import linecache
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from hypothesis import strategies as st

import dualgraph as dg
from dualgraph.modes import bind
from dualgraph.nn import functional as F
from dualgraph.ops import OPS
from dualgraph.ops import random as RND
from dualgraph.ops.elementwise import threshold_backward
from dualgraph.ops.shape import astype, normalize_index


def scatter_into(g: Any, shape: tuple, index: tuple) -> Any:
    """``zeros(shape)`` with ``g`` written at ``index``: the registry's ``scatter`` op (the
    backward of ``getitem``), which has no public spelling of its own."""
    return bind(OPS["scatter"], g, shape=shape, index=normalize_index(index, shape))


# What the generated source may name.
# Random ops from a fixed key (a captured tensor): every mode draws the same numbers from it.
KEY = dg.tensor(np.int64(20240611))


def dropout_fixed(x: Any, p: float, stream: int) -> Any:
    return RND.dropout(x, KEY, p, stream)


def randn_fixed(shape: tuple, dtype: Any, stream: int) -> Any:
    return RND.randn(KEY, shape, dtype, stream)


def rand_fixed(shape: tuple, dtype: Any, stream: int) -> Any:
    return RND.rand(KEY, shape, dtype, stream)


# State changes written as helpers, so each is one expression of a generated program: an
# in-place op on a fresh value (its history is rebased), and a value computed under no_grad
# (a constant for autodiff, in every mode).
def inplace_add(x: Any, y: Any) -> Any:
    z = x * 1
    z += y
    return z


def inplace_scale(x: Any, c: float) -> Any:
    return (x * 1).mul_(c)


def no_grad_scale(x: Any, y: Any) -> Any:
    with dg.no_grad():
        c = y * 0.5
    return x * c


def write_through_view(x: Any, index: tuple, scale: float, transposed: bool) -> Any:
    """A copy of ``x`` with ``x[index]`` (of ``x.T`` when ``transposed``) scaled in place
    through a view and then added to a sibling view: a write through a view
    (``view_scatter``), read back through the base and another alias."""
    y = x * 1
    base = y.T if transposed else y
    base[index].mul_(scale)
    base[index].add_(base[index] * 0.5)
    return y


# ---- pooling and padding. Any value, seen as a (1, 1, N, 1) plane, goes through
# every pooling/padding primitive (`pool_all`) and every backward op bound directly
# (`pool_transposes`: they have no public spelling, as `scatter_into`).
def _plane(x: Any) -> tuple[Any, int]:
    n = math.prod(x.shape)
    return x.reshape(1, 1, n, 1), n


def pool_all(x: Any) -> Any:
    p, _ = _plane(x)
    terms = [F.max_pool2d(p, (2, 1), 1, (1, 0)), F.avg_pool2d(p, (2, 1), 1, (1, 0)),
             F.adaptive_max_pool2d(p, (p.shape[2] + 1, 1)),
             F.adaptive_avg_pool2d(p, (p.shape[2] + 1, 1)),
             F.pad(p, (0, 0, 1, 0), mode="replicate"), F.pad(p, (0, 0, 0, 1), value=0.5),
             F.pad(p.unfold(2, 1, 1)[..., 0], (0, 0, 1, 0), mode="circular")]
    return functools.reduce(lambda a, b: a + b, terms) * 0.125


def pool_transposes(x: Any) -> Any:
    p, n = _plane(x)
    pool = dict(kernel_size=(2, 1), stride=(1, 1), padding=(0, 0), ceil_mode=False)
    idx = np.arange(n, dtype=np.int64)[::-1].reshape(n, 1).copy()
    scattered = bind(OPS["pool_scatter"], p, idx, size=(n, 1), source="max_pool2d")
    avg = bind(OPS["avg_pool2d_backward"], p, size=(n + 1, 1), count_include_pad=True,
               divisor_override=None, **pool)
    adaptive = bind(OPS["adaptive_avg_pool2d_backward"], p, size=(n + 1, 1), output_size=(n, 1))
    padded = bind(OPS["pad_index_backward"], p.reshape(1, 1, 1, n), pad=((-1, 0),),
                  mode="replicate", size=(n + 1,))
    unfolded = bind(OPS["unfold_backward"], p, dimension=2, size=1, step=1, length=n)
    return (scattered.mean() + avg + adaptive + padded.reshape(1, 1, n + 1, 1)
            + unfolded.mean()) * 0.2


def _const(values: Any, like: Any) -> Any:
    return dg.tensor(np.asarray(values, dtype=like.dtype))


def conv_norm_all(x: Any) -> Any:
    """Convolution, im2col/col2im, layer norm, GELU and its backward op on a value (smooth;
    bounded by ~2)."""
    p, n = _plane(x)
    w = _const([[[[0.5], [-0.25]]]], x)
    conv = F.conv2d(p, w, padding=(1, 0))  # (1, 1, n + 1, 1)
    cols = F.unfold(p, (2, 1), padding=(1, 0))  # (1, 2, n + 1)
    folded = F.fold(cols, (n, 1), (2, 1), padding=(1, 0))  # (1, 1, n, 1)
    normed = F.layer_norm(x.reshape(1, n), (n,), eps=0.5)  # a big eps: smooth near constant
    # GELU and its backward op applied to values (tanh keeps them bounded).
    t = dg.tanh(x.reshape(1, n))
    back = bind(OPS["gelu_backward"], t, t) + F.gelu(t)
    return (conv[:, :, :n].reshape(n) + folded.reshape(n) * 0.25
            + normed.reshape(n) * 0.25 + cols.sum() * 0.0625 / n + softmax_loss_all(x)
            + back.reshape(n) * 0.25) * 0.4


def recurrent_all(x: Any) -> Any:
    """An LSTM (reversed) and a GRU layer over the value read as a sequence of scalars, and
    the LSTM's backward through time bound directly on detached values (its own gradient
    raises by design); bounded by about 2."""
    from dualgraph.ops.recurrent import layer_backward, rnn_layer

    n = math.prod(x.shape)
    seq = x.reshape(n, 1, 1)
    h0 = _const([[0.25, -0.5]], x)
    w4 = _const(np.linspace(-0.6, 0.6, 8).reshape(8, 1), x)
    u4 = _const(np.linspace(0.5, -0.5, 16).reshape(8, 2), x)
    b4 = _const(np.linspace(-0.2, 0.3, 8), x)
    ws = rnn_layer(seq, h0, h0 * 0.5, w4, u4, b4, b4 * 0.5, mode="lstm", reverse=True)
    wg = rnn_layer(seq, h0, None, w4[:6], u4[:6], b4[:6], b4[2:], mode="gru")
    back = layer_backward(*(v.detach() for v in (ws, ws, h0, h0, u4)), mode="lstm")
    return ((ws[:, 0, :2].sum(-1) + wg[:, 0, :2].sum(-1)) * 0.5
            + back.mean() * 0.1).reshape(x.shape)


def index_shape_all(x: Any) -> Any:
    """Advanced indexing (read and write), diagonal, diag_embed, flip and the smooth scans
    of a value, reshaped back to its flat length."""
    n = math.prod(x.shape)
    flat = x.reshape(n)
    idx = dg.tensor(np.arange(n, dtype=np.int64)[::-1].copy())
    picked = flat[idx]  # index
    put = dg.index_put(flat, (idx[:1],), flat[:1] * 0.5)  # index_put
    diag = dg.diag_embed(flat).diagonal()  # diag_scatter, then diagonal
    flipped = dg.flip(flat, [0])
    scans = (dg.cumsum(dg.tanh(flat), 0) / n + dg.cumprod(dg.tanh(flat) * 0.9, 0)
             + dg.logcumsumexp(dg.tanh(flat), 0) * 0.25)
    return (picked + put + diag + flipped + scans) * 0.2


def softmax_loss_all(x: Any) -> Any:
    """softmax, log_softmax and nll_loss on a value, and their backward ops applied to it
    (smooth; bounded by ~3)."""
    n = math.prod(x.shape)
    row = dg.tanh(x.reshape(1, n))
    target = dg.tensor(np.array([n - 1], dtype=np.int64))
    logp = F.log_softmax(row, 1)
    probs = F.softmax(row, 1)
    nll = F.nll_loss(logp, target)
    back = (bind(OPS["log_softmax_backward"], row, logp, axis=1)
            + bind(OPS["softmax_backward"], row, probs, axis=1))
    grad = bind(OPS["nll_loss_backward"], nll * 0.5, target, 1.0, shape=(1, n),
                ignore_index=-100, reduction="mean")
    return ((logp * 0.25 + probs + back * 0.25 + grad).reshape(n) + nll * 0.25) * 0.5


def order_stats_all(p: Any) -> Any:
    """Sorting, cumulative max/min, searchsorted and histc of a parameter (piecewise:
    parameters have the same values in every mode, so ties and steps agree)."""
    n = math.prod(p.shape)
    flat = p.reshape(n)
    edges = _const(np.linspace(-2.0, 2.0, 5), p)
    ranks = astype(dg.searchsorted(edges, flat), p.dtype) + astype(dg.argsort(flat), p.dtype)
    hist = dg.histc(flat, bins=4, min=-2, max=2)
    moved = bind(OPS["scatter_add_axis"], flat * 0.5,
                 dg.tensor(np.arange(n, dtype=np.int64)[::-1].copy()), axis=0, size=n)
    bits = dg.flatten(astype(flat.view(dg.int32 if p.dtype == np.float32 else dg.int64) & 1,
                             p.dtype))
    return (dg.sort(flat).values + dg.cummax(flat, 0).values + dg.cummin(flat, 0).values
            + ranks * (0.5 / n) + hist.sum() / n + moved + bits) * 0.25


def special_all(p: Any) -> Any:
    """The special functions, fmod/copysign and a 2x2 matrix's det, inverse and
    decompositions of a parameter (piecewise parts on parameters only, so steps agree in
    every mode)."""
    n = math.prod(p.shape)
    t = dg.tanh(p.reshape(n))
    pos = t * t + 1.5
    m = dg.eye(2, dtype=p.dtype) * (t.mean() + 2.0) + 0.25
    return (dg.copysign(t, t - 0.1) + dg.erfc(t) + dg.erfinv(t * 0.9) + dg.fmod(t * 3.0, 0.75)
            + dg.lgamma(pos) * 0.5 + dg.polygamma(1, pos) * 0.5 + dg.digamma(pos) * 0.5
            + dg.linalg.det(m) * 0.125 + dg.linalg.inv(m).sum() * 0.125
            + decompositions(m) * 0.0625) * 0.25


def decompositions(m: Any) -> Any:
    """Sign-free values of the decompositions of a symmetric positive-definite 2x2 matrix
    with distinct eigenvalues."""
    L = dg.linalg
    low = L.cholesky_ex(m).L
    qr = L.qr(m)
    return (L.eigh(m).eigenvalues.sum() + L.svdvals(m).sum() + (qr.Q @ qr.R).sum()
            + L.solve_triangular(low, m, upper=False).sum() + L.pinv(m).sum()
            + L.matrix_exp(m * 0.25).sum())


class Softsign(dg.autograd.Function):
    """A user-defined autograd Function (the ``custom_function`` op): ``x / (1 + |x|)``."""

    @staticmethod
    def forward(ctx: Any, x: Any) -> Any:
        ctx.save_for_backward(x)
        return x / (dg.abs(x) + 1.0)

    @staticmethod
    def backward(ctx: Any, g: Any) -> Any:
        (x,) = ctx.saved_tensors
        d = dg.abs(x) + 1.0
        return g / (d * d)


NAMESPACE = {"dg": dg, "F": F, "astype": astype, "scatter_into": scatter_into,
             "threshold_backward": threshold_backward, "softsign_fn": Softsign.apply,
             "dropout_fixed": dropout_fixed, "randn_fixed": randn_fixed,
             "rand_fixed": rand_fixed, "inplace_add": inplace_add,
             "inplace_scale": inplace_scale, "no_grad_scale": no_grad_scale,
             "write_through_view": write_through_view, "pool_all": pool_all,
             "pool_transposes": pool_transposes, "conv_norm_all": conv_norm_all,
             "index_shape_all": index_shape_all, "order_stats_all": order_stats_all,
             "softmax_loss_all": softmax_loss_all, "special_all": special_all,
             "recurrent_all": recurrent_all}


# ------------------------------------------------------------------------- programs


@dataclass(eq=False)
class Var:
    name: str
    shape: tuple
    dtype: np.dtype
    bound: float = 2.0  # |value| never exceeds this (floats), so nothing overflows

    @property
    def is_float(self) -> bool:
        return self.dtype.kind == "f"


@dataclass
class Program:
    """A straight-line program: parameters, one assignment per statement, outputs.

    ``arg_of[i]`` is the distinct input array parameter ``i`` receives: two parameters
    mapped to one array are the same tensor passed twice.
    """

    dtype: np.dtype
    params: list[Var] = field(default_factory=list)
    arg_of: list[int] = field(default_factory=list)
    lines: list[tuple[Var, str]] = field(default_factory=list)
    outputs: list[Var] = field(default_factory=list)
    seed: int = 0

    def source(self) -> str:
        args = ", ".join(p.name for p in self.params)
        body = [f"    {v.name} = {expr}" for v, expr in self.lines]
        ret = ", ".join(v.name for v in self.outputs)
        return "\n".join([f"def program({args}):", *body, f"    return ({ret},)"]) + "\n"

    def function(self) -> Callable:
        """The program, compiled from its source (registered with linecache so traced
        nodes and tracebacks show its lines)."""
        src = self.source()
        filename = f"<fuzz-program-{abs(hash(src)):x}>"
        linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
        ns = dict(NAMESPACE)
        exec(compile(src, filename, "exec"), ns)  # noqa: S102 - generated by this test
        return ns["program"]

    def arrays(self) -> list[np.ndarray]:
        """One array per distinct input, uniform in [-2, 2]."""
        rng = np.random.default_rng(self.seed)
        first = {}
        for p, k in zip(self.params, self.arg_of):
            first.setdefault(k, p)
        return [rng.uniform(-2.0, 2.0, first[k].shape).astype(first[k].dtype)
                for k in sorted(first)]

    def call(self, fn: Callable, leaves: list) -> tuple:
        return fn(*[leaves[k] for k in self.arg_of])

    def report(self) -> str:
        shapes = ", ".join(f"{p.name}: {p.dtype}{list(p.shape)}" for p in self.params)
        alias = "" if len(set(self.arg_of)) == len(self.arg_of) else (
            f"\n# argument i gets input array arg_of[i] = {self.arg_of} (same tensor twice)")
        return f"# seed {self.seed}; {shapes}{alias}\n{self.source()}"


class Builder:
    """Grows a program statement by statement; each expression is evaluated eagerly on
    zeros to learn its shape and dtype (so shape rules live in one place: the registry)."""

    def __init__(self, dtype: np.dtype) -> None:
        self.prog = Program(np.dtype(dtype))
        self.vars: list[Var] = []
        self.env: dict[str, Any] = {}
        self._names = itertools.count()

    def param(self, shape: tuple, alias_of: int | None = None) -> Var:
        v = Var(f"x{len(self.prog.params)}", tuple(shape), self.prog.dtype)
        k = alias_of if alias_of is not None else max(self.prog.arg_of, default=-1) + 1
        self.prog.params.append(v)
        self.prog.arg_of.append(k)
        self.vars.append(v)
        self.env[v.name] = dg.tensor(np.zeros(shape, v.dtype))
        return v

    def emit(self, expr: str, bound: float) -> Var:
        value = eval(expr, dict(NAMESPACE), self.env)  # noqa: S307 - generated here
        v = Var(f"v{next(self._names)}", tuple(value.shape), value.dtype, bound)
        self.prog.lines.append((v, expr))
        self.vars.append(v)
        self.env[v.name] = value
        return v

    def floats(self, pred: Callable[[Var], bool] = lambda v: True) -> list[Var]:
        return [v for v in self.vars if v.is_float and pred(v)]


def broadcasts(a: tuple, b: tuple) -> bool:
    try:
        np.broadcast_shapes(a, b)
    except ValueError:
        return False
    return True


# Each generator draws one statement (or returns None when nothing fits). Bounds: every
# float value stays within `bound`, so exp and pow never overflow and finite differences
# stay accurate; domains are kept by construction (log/sqrt of ``a * a + 0.5``).
MAX_BOUND = 60.0


def _pick(draw, cands: list[Var]) -> Var | None:
    return draw(st.sampled_from(cands)) if cands else None


def gen_unary(draw, b: Builder) -> Var | None:
    a = _pick(draw, b.floats())
    if a is None:
        return None
    n = a.name
    rows = [
        (f"dg.tanh({n})", 1.0), (f"dg.sigmoid({n})", 1.0), (f"dg.relu({n})", a.bound),
        (f"dg.abs({n})", a.bound), (f"abs({n})", a.bound), (f"dg.sin({n})", 1.0),
        (f"{n}.cos()", 1.0), (f"-{n}", a.bound), (f"{n}.detach()", a.bound),
        (f"dg.log({n} * {n} + 0.5)", max(0.7, math.log(a.bound ** 2 + 0.5))),
        (f"dg.sqrt({n} * {n} + 0.5)", math.sqrt(a.bound ** 2 + 0.5)),
        (f"astype({n}, dg.float64)", a.bound),
        (f"{n}.clamp(-0.5, 0.5)", 0.5), (f"dg.maximum({n}, 0.25)", max(a.bound, 0.25)),
        (f"dg.minimum({n}, -0.5)", max(a.bound, 0.5)),
        (f"softsign_fn({n})", 1.0),
    ]
    if a.bound <= 7:
        rows.insert(0, (f"{n} ** 2", a.bound ** 2))
    if a.bound <= 3:  # first: Hypothesis favours early rows, and these need small inputs
        rows[:0] = [(f"dg.exp({n})", math.exp(a.bound)), (f"2.0 ** {n}", 2.0 ** a.bound),
                    (f"{n} ** 3.0", a.bound ** 3)]
    expr, bound = draw(st.sampled_from(rows))
    return b.emit(expr, bound)


def gen_binary(draw, b: Builder) -> Var | None:
    x = _pick(draw, b.floats())
    if x is None:
        return None
    y = _pick(draw, b.floats(lambda v: broadcasts(v.shape, x.shape)))  # may be x itself
    p, q = x.name, y.name
    rows = [
        (f"{p} + {q}", x.bound + y.bound), (f"{p} - {q}", x.bound + y.bound),
        (f"{p} * {q}", x.bound * y.bound), (f"{p} / ({q} * {q} + 0.5)", 2 * x.bound),
        (f"dg.maximum({p}, {q})", max(x.bound, y.bound)),
        (f"dg.minimum({p}, {q})", max(x.bound, y.bound)),
        (f"{p} * 2.5", 2.5 * x.bound), (f"1.5 - {p}", 1.5 + x.bound),
        (f"{p} / 4.0", x.bound / 4), (f"0.5 + {p}", 0.5 + x.bound),
        (f"dg.where({p} > {q}, {p}, {q})", max(x.bound, y.bound)),
        # ReLU's backward op, bound directly (no public spelling); its saved output kept
        # above the threshold, so the selection never jumps under a finite difference.
        (f"threshold_backward({p}, {q} * {q} + 0.5, 0.25)", x.bound),
    ]
    if x.bound <= 3 and y.bound <= 2:
        base = x.bound ** 2 + 0.5
        rows.append((f"({p} * {p} + 0.5) ** {q}", max(base, 2.0) ** y.bound))
    expr, bound = draw(st.sampled_from([r for r in rows if r[1] <= MAX_BOUND] or rows[:2]))
    return b.emit(expr, bound)


def gen_compare(draw, b: Builder) -> Var | None:
    x = _pick(draw, b.floats())
    if x is None:
        return None
    y = _pick(draw, b.floats(lambda v: broadcasts(v.shape, x.shape)))
    op = draw(st.sampled_from(["<", "<=", ">", ">=", "==", "!="]))
    other = draw(st.sampled_from([y.name, "0.5"]))
    return b.emit(f"{x.name} {op} {other}", 1.0)


def gen_where(draw, b: Builder) -> Var | None:
    conds = [v for v in b.vars if v.dtype == np.bool_]
    c = _pick(draw, conds)
    if c is None:
        return None
    x = _pick(draw, b.floats(lambda v: broadcasts(v.shape, c.shape)))
    if x is None:
        return None
    y = _pick(draw, b.floats(lambda v: broadcasts(v.shape, np.broadcast_shapes(c.shape,
                                                                                 x.shape))))
    rows = [(f"dg.where({c.name}, {x.name}, {y.name})", max(x.bound, y.bound)),
            (f"dg.where({c.name}, {x.name}, 0.0)", x.bound),
            (f"{x.name} * astype({c.name}, {x.name}.dtype)", x.bound)]
    expr, bound = draw(st.sampled_from(rows))
    return b.emit(expr, bound)


def gen_reduce(draw, b: Builder) -> Var | None:
    x = _pick(draw, b.floats())
    if x is None:
        return None
    n, r = x.name, len(x.shape)
    size = math.prod(x.shape)
    kind = draw(st.sampled_from(["sum", "mean", "max", "min"]))
    # max(dim)/min(dim) (or axis=) with one int dim is PyTorch's (values, indices) named
    # tuple.
    values = ".values" if kind in ("max", "min") else ""
    if r == 0:
        call = draw(st.sampled_from([f"{n}.{kind}()", f"dg.{kind}({n}, dim=0){values}"]))
    else:
        axes = draw(st.lists(st.integers(-r, r - 1), min_size=1, max_size=r, unique_by=lambda
                             a: a % r))
        axis = axes[0] if len(axes) == 1 else tuple(axes)
        keep = draw(st.booleans())
        call = draw(st.sampled_from([
            f"{n}.{kind}()",
            f"{n}.{kind}(axis={axis!r}, keepdims={keep})" + (values if isinstance(axis, int)
                                                             else ""),
            f"dg.{kind}({n}, dim={axis!r})" + (values if isinstance(axis, int) else ""),
        ]))
    bound = x.bound * size if kind == "sum" else x.bound
    if bound > MAX_BOUND:
        call, bound = f"{n}.mean()", x.bound
    return b.emit(call, bound)


def gen_matmul(draw, b: Builder) -> Var | None:
    x = _pick(draw, b.floats(lambda v: 1 <= len(v.shape) <= 3))
    if x is None:
        return None
    n, k = x.shape[-1], draw(st.integers(1, 3))
    form = draw(st.sampled_from(["new", "vector", "self", "linear"]))
    if form == "self" and len(x.shape) == 2:
        expr, bound = f"{x.name} @ {x.name}.T", x.bound ** 2 * n  # a repeated input
    elif form == "linear" and len(x.shape) == 2:
        w, bias = b.param((k, n)), b.param((k,))
        expr, bound = f"F.linear({x.name}, {w.name}, {bias.name})", 2 * x.bound * n + 2
    else:
        w = b.param((n,) if form == "vector" else (n, k))
        expr, bound = f"dg.matmul({x.name}, {w.name})", 2 * x.bound * n
    if bound > MAX_BOUND:
        return None
    return b.emit(expr, bound)


def gen_shape(draw, b: Builder) -> Var | None:
    x = _pick(draw, b.vars)
    if x is None:
        return None
    n, s, r = x.name, x.shape, len(x.shape)
    rows = [f"{n}.reshape(-1)", f"{n}.reshape({tuple(reversed(s))!r})", f"{n}.unsqueeze(0)",
            f"{n}.expand(2, *{s!r})", f"{n}[None]", f"{n}[..., None]",
            f"dg.stack([{n}, {n}], axis={draw(st.integers(-r - 1, r))})"]
    if r >= 1:
        rows += [f"{n}[0]", f"{n}[-1]", f"{n}[::-1]",
                 f"dg.concatenate([{n}, {n}], axis={draw(st.integers(-r, r - 1))})"]
        if s[-1] >= 2:  # never a zero-size result (max of nothing has no value)
            rows.append(f"{n}[..., 1:]")
        ones = [i for i, d in enumerate(s) if d == 1]
        if ones:
            big = tuple(3 if i == ones[0] else d for i, d in enumerate(s))
            rows.append(f"{n}.broadcast_to({big!r})")
    if r >= 2:
        perm = tuple(draw(st.permutations(range(r))))
        rows += [f"{n}.T", f"{n}.transpose{perm!r}", f"{n}[:, 0]"]
        if s[0] >= 2:
            rows.append(f"{n}[1:, None, ::2]")
    if x.is_float:
        rows += [f"scatter_into({n}, (2, *{s!r}), (1,))"]
        if r >= 1:
            rows.append(f"scatter_into({n}, ({s[0] + 1}, *{s[1:]!r}), (slice(1, None),))")
    return b.emit(draw(st.sampled_from(rows)), x.bound)


def gen_view_write(draw, b: Builder) -> Var | None:
    """An in-place write through a view (of a transpose, for 2-D and up)."""
    x = _pick(draw, b.floats(lambda v: len(v.shape) >= 1))
    if x is None:
        return None
    s = x.shape[::-1] if len(x.shape) >= 2 else x.shape
    index = draw(st.sampled_from([(0,), (slice(None, None, 2),), (slice(-1, None),)]))
    if s[0] == 0:
        return None
    # scale 0.5, then + half of itself: |value| only shrinks, within x's bound
    return b.emit(f"write_through_view({x.name}, {index!r}, 0.5, {len(x.shape) >= 2})",
                  x.bound)


def gen_combine(draw, b: Builder) -> Var | None:
    """Two different values of one shape, concatenated or stacked."""
    x = _pick(draw, b.floats())
    if x is None:
        return None
    y = _pick(draw, b.floats(lambda v: v.shape == x.shape))
    r = len(x.shape)
    rows = [f"dg.stack([{x.name}, {y.name}], {draw(st.integers(-r - 1, r))})"]
    if r >= 1:
        rows.append(f"dg.cat([{y.name}, {x.name}], dim={draw(st.integers(-r, r - 1))})")
    return b.emit(draw(st.sampled_from(rows)), max(x.bound, y.bound))


def gen_duplicate(draw, b: Builder) -> Var | None:
    """The same expression again under a new name: work for CSE."""
    if not b.prog.lines:
        return None
    v, expr = draw(st.sampled_from(b.prog.lines))
    return b.emit(expr, v.bound)


def gen_rewrite(draw, b: Builder) -> Var | None:
    """Work for simplify and constant folding: identities and a constant subexpression.
    (No cast to float32 and back: its rounding defeats the finite-difference check.)"""
    x = _pick(draw, b.floats())
    if x is None:
        return None
    n = x.name
    rows = [(f"({n} * 1 + 0) / 1", x.bound), (f"-(-{n}) ** 1 - 0", x.bound),
            (f"{n} + dg.exp(dg.tensor(0.25)) * 0.5", x.bound + 0.65)]
    expr, bound = draw(st.sampled_from(rows))
    return b.emit(expr, bound)


def gen_random(draw, b: Builder) -> Var | None:
    """A random op from the fixed key: dropout of a value, or draws shaped like one."""
    x = _pick(draw, b.floats())
    if x is None:
        return None
    stream = draw(st.integers(0, 3))
    dt = f"dg.{x.dtype.name}"
    rows = [(f"dropout_fixed({x.name}, 0.25, {stream})", x.bound / 0.75),
            (f"{x.name} * rand_fixed({x.shape!r}, {dt}, {stream})", x.bound),
            # |randn| <= 8.6 for 53-bit uniforms: bounded like every generated value.
            (f"{x.name} + randn_fixed({x.shape!r}, {dt}, {stream})", x.bound + 9.0)]
    expr, bound = draw(st.sampled_from([r for r in rows if r[1] <= MAX_BOUND] or rows[:1]))
    return b.emit(expr, bound)


def gen_state(draw, b: Builder) -> Var | None:
    """In-place ops and no_grad blocks (helpers above)."""
    x = _pick(draw, b.floats())
    if x is None:
        return None
    y = _pick(draw, b.floats(lambda v: broadcasts(v.shape, x.shape)
                             and np.broadcast_shapes(v.shape, x.shape) == x.shape))
    rows = [(f"inplace_scale({x.name}, 1.5)", 1.5 * x.bound),
            (f"inplace_add({x.name}, {y.name})", x.bound + y.bound),
            (f"no_grad_scale({x.name}, {y.name})", x.bound * y.bound * 0.5)]
    expr, bound = draw(st.sampled_from([r for r in rows if r[1] <= MAX_BOUND] or rows[:1]))
    return b.emit(expr, bound)


# ------------------------------------------------------------------------ math ops
# Smooth functions take any float value, mapped into their domain; step functions
# (rounding, sign, fmod, %, //, integer casts for the bitwise ops) take only parameters,
# whose values are the same in every mode (a computed value could differ by an ulp and
# land on the other side of a step).


def gen_math_unary(draw, b: Builder) -> Var | None:
    # Each row chains several ops, so few rows reach every op within the coverage test's
    # examples.
    a = _pick(draw, b.floats())
    if a is None:
        return None
    n, bd = a.name, a.bound
    rows = [
        (f"dg.erf(dg.tan(dg.tanh({n})))", 1.0),
        (f"dg.expm1(dg.asin(dg.tanh({n}) * 0.9))", 2.1),
        (f"dg.acos(dg.tanh({n}) * 0.9) + dg.atan({n})", 4.3),
        (f"dg.sinh(dg.tanh({n})) * dg.tanh({n}).cosh()", 1.9),
        (f"dg.asinh({n}) + dg.atanh(dg.tanh({n}) * 0.9)", math.asinh(bd) + 1.5),
        (f"dg.acosh({n} * {n} + 1.5) + dg.log1p({n} * {n})",
         math.acosh(bd ** 2 + 1.5) + math.log1p(bd ** 2)),
        (f"dg.log2({n} * {n} + 0.5) - {n}.mul({n}).add(0.5).log10()",
         max(1.0, math.log2(bd ** 2 + 0.5)) + max(0.5, math.log10(bd ** 2 + 0.5))),
        (f"dg.tanh({n}).prod({0 if a.shape else ''}) + dg.prod(dg.tanh({n}))", 2.0),
    ]
    expr, bound = draw(st.sampled_from(rows))
    return b.emit(expr, bound)


def gen_math_steps(draw, b: Builder) -> Var | None:
    p = _pick(draw, [v for v in b.prog.params if v.is_float])
    if p is None:
        return None
    q = _pick(draw, b.floats(lambda v: broadcasts(v.shape, p.shape)))
    n = p.name
    rows = [
        (f"dg.sign({n}) * {q.name} + dg.floor({n})", q.bound + 2.0),
        (f"{n}.ceil() - dg.round({n} * 2.0) + dg.trunc({n})", 8.0),
        (f"dg.copysign({q.name}, {n}) + dg.fmod({n}, 0.75)", q.bound + 0.75),
        (f"{n} % 0.75 + {n} // 0.75 + dg.atan2({q.name}, {n})", 7.0),
    ]
    expr, bound = draw(st.sampled_from(rows))
    return b.emit(expr, bound)


def gen_bitwise(draw, b: Builder) -> Var | None:
    p = _pick(draw, [v for v in b.prog.params if v.is_float])
    if p is None:
        return None
    q = _pick(draw, [v for v in b.prog.params if v.is_float and broadcasts(v.shape, p.shape)])
    k, dt = f"astype({p.name} * 4.0, dg.int64)", f"{p.name}.dtype"
    rows = [
        (f"astype(({k} & 5) | 2, {dt})", 7.0), (f"astype(({k} ^ 3) << 1, {dt})", 24.0),
        (f"astype(~{k} >> 1, {dt})", 5.0),
        (f"(({p.name} > 0) & ({q.name} < 0.5)) | ~({p.name} > 0.5)", 1.0),
        (f"({p.name} > 0) ^ ({q.name} < 0.5)", 1.0),
    ]
    expr, bound = draw(st.sampled_from(rows))
    return b.emit(expr, bound)


def gen_pool(draw, b: Builder) -> Var | None:
    a = _pick(draw, b.floats())
    if a is None:
        return None
    expr = draw(st.sampled_from([f"pool_all({a.name})", f"pool_transposes({a.name})"]))
    return b.emit(expr, a.bound)


def gen_layers(draw, b: Builder) -> Var | None:
    """Convolution, norms, indexing, shape ops, scans and recurrences on a value (flat
    results), or the order statistics of a parameter."""
    if draw(st.booleans()):
        a = _pick(draw, b.floats())
        if a is None:
            return None
        expr = draw(st.sampled_from([f"conv_norm_all({a.name})", f"index_shape_all({a.name})",
                                     f"recurrent_all({a.name})"]))
        return b.emit(expr, 2.0 * a.bound + 4.0 if "index" in expr else a.bound + 2.0)
    p = _pick(draw, [v for v in b.prog.params if v.is_float])
    if p is None:
        return None
    if draw(st.booleans()):
        return b.emit(f"special_all({p.name})", 2.0)
    return b.emit(f"order_stats_all({p.name})", p.bound + 2.0)


def gen_math(draw, b: Builder) -> Var | None:
    """One statement of the math, bitwise, pooling or layer ops (one slot in GENERATORS, so
    the elementwise, reduction and shape ops keep their share)."""
    return draw(st.sampled_from([gen_math_unary, gen_math_unary, gen_math_steps, gen_bitwise,
                                 gen_pool, gen_layers]))(draw, b)


GENERATORS = (gen_unary, gen_unary, gen_binary, gen_binary, gen_compare, gen_where,
              gen_reduce, gen_matmul, gen_shape, gen_combine, gen_duplicate, gen_rewrite,
              gen_math, gen_random, gen_state, gen_view_write)


@st.composite
def programs(draw, max_statements: int = 8,
             dtypes: tuple = (np.float32, np.float64)) -> Program:
    """A random `Program` of 1 to ``max_statements`` statements over inputs of one of
    ``dtypes``."""
    b = Builder(draw(st.sampled_from(dtypes)))
    full = tuple(draw(st.lists(st.integers(1, 3), max_size=3)))
    for _ in range(draw(st.integers(1, 3))):
        # Broadcast-compatible with `full`: a suffix of it with some dims set to 1.
        suffix = full[len(full) - draw(st.integers(0, len(full))):]
        shape = tuple(1 if draw(st.booleans()) else d for d in suffix)
        b.param(shape)
    if len(b.prog.params) >= 2 and draw(st.booleans()):
        same = [i for i, p in enumerate(b.prog.params[1:], 1)
                if p.shape == b.prog.params[0].shape]
        if same:  # the same tensor passed for two parameters
            b.prog.arg_of[same[0]] = 0
            b.prog.arg_of = _renumber(b.prog.arg_of)
    for _ in range(draw(st.integers(1, max_statements))):
        draw(st.sampled_from(GENERATORS))(draw, b)
    stmts = [v for v, _ in b.prog.lines]
    floats = [v for v in stmts if v.is_float] or b.floats()
    outs = [floats[-1]]
    if len(floats) > 1 and draw(st.booleans()):
        outs.insert(0, draw(st.sampled_from(floats[:-1])))
    bools = [v for v in stmts if not v.is_float]
    if bools and draw(st.booleans()):
        outs.append(draw(st.sampled_from(bools)))
    b.prog.outputs = list({id(v): v for v in outs}.values())  # anything else is dead code
    b.prog.seed = draw(st.integers(0, 2 ** 32 - 1))
    return b.prog


def _renumber(arg_of: list[int]) -> list[int]:
    order = {k: i for i, k in enumerate(dict.fromkeys(arg_of))}
    return [order[k] for k in arg_of]


# ------------------------------------------------------------------------ running


def weights_for(outputs: tuple, seed: int) -> list:
    """Fixed random cotangents: one per output (None for bool outputs)."""
    rng = np.random.default_rng(seed + 1)
    return [rng.standard_normal(o.shape).astype(o.dtype) if o.dtype.kind == "f" else None
            for o in outputs]


def weighted_loss(outputs: tuple, weights: list) -> Any:
    terms = [(o * w).sum() for o, w in zip(outputs, weights)
             if w is not None and o.requires_grad]
    return functools.reduce(lambda a, c: a + c, terms) if terms else None


def eager_run(prog: Program, fn: Callable, arrays: list) -> tuple[tuple, list, list]:
    """Eager outputs, and each leaf's gradient of the weighted loss (None where unused)."""
    leaves = [dg.tensor(a.copy(), requires_grad=True) for a in arrays]
    outs = prog.call(fn, leaves)
    weights = weights_for(outs, prog.seed)
    loss = weighted_loss(outs, weights)
    if loss is not None:
        loss.backward()
    return outs, weights, [t.grad.numpy() if t.grad is not None else None for t in leaves]


def grads_by_leaf(prog: Program, per_param: tuple, wrt: list[int], arrays: list) -> list:
    """Gradients per parameter summed per distinct input array (aliased parameters)."""
    out = [np.zeros_like(a) for a in arrays]
    for i, g in zip(wrt, per_param):
        out[prog.arg_of[i]] = out[prog.arg_of[i]] + np.asarray(g)
    return out

