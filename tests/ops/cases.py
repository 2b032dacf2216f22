"""The op case table: small programs through the public API, one or more per registry op.

Each `OpCase` names the registry op it exercises (the op of its result's tape node), a
function calling the public dualgraph API, the inputs to feed it and a NumPy reference for
the forward. ``tests/ops/test_ops.py`` checks every case forward, gradient, infer rule and
tape node, and fails when an op in ``dg.ops.OPS`` has no case; a compiled-vs-eager test can
run the same table.

Inputs are drawn per case from a domain (`Input.kind`): ``pos`` for ``log``/``sqrt``/
denominators, ``sep`` and ``grid`` for ops with kinks or ties (``relu``, ``abs``, ``max``,
``maximum``): their values are distinct, at least 0.25 apart and from each other, so a
finite-difference step never crosses a kink. Ties are tested on purpose elsewhere.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import dualgraph as dg
from dualgraph.modes import bind
from dualgraph.nn import functional as F
from dualgraph.ops import OPS
from dualgraph.ops import activation as ACT
from dualgraph.ops import loss as LOSS
from dualgraph.ops import norm as NORM
from dualgraph.ops import random as RND
from dualgraph.ops import softmax as SM
from dualgraph.ops.conv import conv2d_input, conv2d_weight
from dualgraph.ops.elementwise import threshold_backward
from dualgraph.ops.linalg import addmm
from dualgraph.ops.shape import astype, normalize_index

FLOAT_DTYPES = (np.float32, np.float64)


@dataclass(frozen=True)
class Input:
    """One input of a case: its shape, value domain and (for mixed precision) fixed dtype.

    Kinds: ``real`` uniform in [-2, 2]; ``pos`` uniform in [0.5, 2]; ``sep`` distinct values
    on a 0.5 grid shifted by 0.25 (never 0, no ties); ``grid`` the same grid unshifted (so
    ``sep`` and ``grid`` values are at least 0.25 apart); ``coarse`` small integers as floats
    (many ties, for comparisons); ``mask`` booleans; ``ints`` int64 in [-3, 3]; ``labels``
    int64 classes in [0, 3).
    """

    shape: tuple[int, ...]
    kind: str = "real"
    dtype: Any = None  # None: the float dtype of the run

    def make(self, rng: np.random.Generator, dtype: Any) -> np.ndarray:
        dtype = np.dtype(self.dtype or dtype)
        n = math.prod(self.shape)
        if self.kind == "real":
            a = rng.uniform(-2.0, 2.0, n)
        elif self.kind == "pos":
            a = rng.uniform(0.5, 2.0, n)
        elif self.kind in ("sep", "grid"):
            a = (rng.permutation(n) - n // 2) * 0.5 + (0.25 if self.kind == "sep" else 0.0)
        elif self.kind == "coarse":
            a = rng.integers(-2, 3, n)
        elif self.kind == "mask":
            return (rng.random(n) < 0.5).reshape(self.shape)
        elif self.kind == "ints":
            return rng.integers(-3, 4, n).reshape(self.shape)
        elif self.kind == "labels":
            return rng.integers(0, 3, n).reshape(self.shape)
        else:
            raise ValueError(f"unknown input kind {self.kind!r}")
        return a.astype(dtype).reshape(self.shape)


def real(*shape: int) -> Input:
    return Input(shape, "real")


def pos(*shape: int) -> Input:
    return Input(shape, "pos")


def sep(*shape: int) -> Input:
    return Input(shape, "sep")


def grid(*shape: int) -> Input:
    return Input(shape, "grid")


def coarse(*shape: int) -> Input:
    return Input(shape, "coarse")


def mask(*shape: int) -> Input:
    return Input(shape, "mask")


def ints(*shape: int) -> Input:
    return Input(shape, "ints")


def labels(*shape: int) -> Input:
    return Input(shape, "labels")


def f64(inp: Input) -> Input:
    """``inp`` always float64, whatever the run's dtype (mixed-precision cases)."""
    return Input(inp.shape, inp.kind, np.float64)


@dataclass(frozen=True, eq=False)
class OpCase:
    op: str  # the registry op the case exercises: its result's tape node
    label: str
    fn: Callable[..., Any]  # public dualgraph API, called with tensors
    inputs: tuple[Input, ...]
    ref: Callable[..., Any] | None = None  # NumPy forward; None: fn itself on NumPy arrays
    node: str | None = None  # grad_fn.name() where API.md A3 fixes it exactly
    grad: bool = True  # has a gradient to check (floating inputs, differentiable op)
    gradcheck: dict = field(default_factory=dict)  # extra gradcheck arguments

    @property
    def id(self) -> str:
        return f"{self.op}-{self.label}"

    def arrays(self, rng: np.random.Generator, dtype: Any) -> list[np.ndarray]:
        return [inp.make(rng, dtype) for inp in self.inputs]

    def reference(self, *arrays: np.ndarray) -> np.ndarray:
        return np.asarray((self.ref or self.fn)(*arrays))


def case(op: str, label: str, fn: Callable, *inputs: Input, **kwargs: Any) -> OpCase:
    return OpCase(op, label, fn, inputs, **kwargs)


# ------------------------------------------------------------------------ helpers


def _leaf(x: Any) -> Any:
    """``x`` itself when it requires grad, else a fresh leaf that does (forward tests and
    finite differences call the cases with plain tensors)."""
    return x if x.requires_grad else x.detach().requires_grad_(True)


def getitem_grad(x: Any) -> Any:
    """d/dx of ``sum(x[1:, None, 0] ** 2)``: getitem's VJP is a scatter into zeros."""
    x = _leaf(x)
    (g,) = dg.grad((x[1:, None, 0] ** 2).sum(), [x], create_graph=True)
    return g


def getitem_grad_ref(x: np.ndarray) -> np.ndarray:
    out = np.zeros_like(x)
    out[1:, 0] = 2 * x[1:, 0]
    return out


SCATTER_INDEX = normalize_index((slice(1, None), None, 0), (3, 4))  # x[1:, None, 0]


def scatter(g: Any) -> Any:
    return bind(OPS["scatter"], g, shape=(3, 4), index=SCATTER_INDEX)


def scatter_ref(g: np.ndarray) -> np.ndarray:
    out = np.zeros((3, 4), g.dtype)
    out[1:, None, 0] = g
    return out


# A view of a (3, 4) base through a transpose then a slice: view_scatter writes into it.
VIEW_CHAIN = (("transpose", (("axes", (1, 0)),)),
              ("getitem", (("index", normalize_index((slice(1, 3), 0), (4, 3))),)))
RESHAPE_CHAIN = (("reshape", (("shape", (2, 6)),)),
                 ("getitem", (("index", normalize_index((1, slice(None, None, 2)), (2, 6))),)))


def view_scatter(base: Any, value: Any) -> Any:
    return bind(OPS["view_scatter"], base, value, chain=VIEW_CHAIN)


def view_scatter_ref(base: np.ndarray, value: np.ndarray) -> np.ndarray:
    out = base.copy()
    out.T[1:3, 0] = value
    return out


def view_scatter_reshape(base: Any, value: Any) -> Any:
    return bind(OPS["view_scatter"], base, value, chain=RESHAPE_CHAIN)


def view_scatter_reshape_ref(base: np.ndarray, value: np.ndarray) -> np.ndarray:
    out = base.copy()
    out.reshape(2, 6)[1, ::2] = value
    return out


def view_scatter_fill(base: Any) -> Any:
    return bind(OPS["view_scatter"], base, 2.5, chain=VIEW_CHAIN)


def view_scatter_fill_ref(base: np.ndarray) -> np.ndarray:
    out = base.copy()
    out.T[1:3, 0] = 2.5
    return out


def sigmoid_ref(x: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-x))


def relu_ref(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, 0)


def to_f64(x: Any) -> Any:
    return astype(x, dg.float64)  # binds even when x is float64 (the method would not)


def to_f32(x: Any) -> Any:
    return astype(x, dg.float32)


# Random ops: an independent reference of the counter-based generator (SplitMix64 on Python
# ints, element i from counter i; randn by Box-Muller from counters 2i and 2i + 1).
_M64 = (1 << 64) - 1
_GAMMA = 0x9E3779B97F4A7C15


def _sm_mix(z: int) -> int:
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _M64
    return z ^ (z >> 31)


def sm_words(key: Any, stream: int, n: int) -> list[int]:
    base = _sm_mix((int(key) + stream * _GAMMA) & _M64)
    return [_sm_mix((base + (i + 1) * _GAMMA) & _M64) for i in range(n)]


def rand_ref(x: np.ndarray, key: np.ndarray) -> np.ndarray:
    words = sm_words(key, 1, x.size)
    if x.dtype == np.float32:
        vals = [(w >> 40) * 2.0 ** -24 for w in words]
    else:
        vals = [(w >> 11) * 2.0 ** -53 for w in words]
    return np.array(vals).astype(x.dtype).reshape(x.shape)


def randn_ref(x: np.ndarray, key: np.ndarray) -> np.ndarray:
    w = sm_words(key, 2, 2 * x.size)
    vals = [math.sqrt(-2.0 * math.log(1.0 - (w[2 * i] >> 11) * 2.0 ** -53))
            * math.cos(2.0 * math.pi * ((w[2 * i + 1] >> 11) * 2.0 ** -53))
            for i in range(x.size)]
    return np.array(vals).astype(x.dtype).reshape(x.shape)


def dropout_ref(x: np.ndarray, key: np.ndarray) -> np.ndarray:
    keep = np.array([(w >> 11) * 2.0 ** -53 >= 0.4 for w in sm_words(key, 3, x.size)])
    return x * np.where(keep, x.dtype.type(1 / 0.6), x.dtype.type(0)).reshape(x.shape)


def key() -> Input:
    """A random op's key: a 0-d int64 (the "ints" domain, negative keys included)."""
    return Input((), "ints")


# Casting a float64 input to float32 rounds: finite differences need a wide step (the
# function is linear, so the step adds no truncation error).
ROUNDED = {"eps": 0.1, "atol": 1e-4}


# ---------------------------------------------------------------------- the table

CASES: list[OpCase] = [
    # Arithmetic: broadcasting, Python literals, reflected forms, 0-d, mixed precision.
    case("add", "bcast", lambda x, y: x + y, real(2, 3), real(3), node="AddBackward0"),
    case("add", "bcast_both", lambda x, y: x + y, real(2, 1), real(1, 3), node="AddBackward0"),
    case("add", "literal", lambda x: x + 1.5, real(2, 3), node="AddBackward0"),
    case("add", "reflected", lambda x: 1.5 + x, real(3), node="AddBackward0"),
    case("add", "ndarray", lambda x: np.linspace(-1, 1, 3).astype(x.dtype) + x, real(2, 3)),
    case("add", "0d", lambda x, y: x + y, real(), real(), node="AddBackward0"),
    case("add", "mixed_f64", lambda x, y: x + y, real(2, 3), f64(real(3))),
    case("sub", "bcast", lambda x, y: x - y, real(3), real(2, 3), node="SubBackward0"),
    case("sub", "reflected", lambda x: 1.5 - x, real(2, 3), node="SubBackward0"),
    case("mul", "bcast", lambda x, y: x * y, real(2, 3, 4), real(3, 1), node="MulBackward0"),
    case("mul", "literal", lambda x: x * 2.5, real(2, 3), node="MulBackward0"),
    case("mul", "0d_by_vector", lambda x, y: x * y, real(), real(4), node="MulBackward0"),
    case("mul", "same_input", lambda x: x * x, real(2, 3), node="MulBackward0"),
    case("div", "bcast", lambda x, y: x / y, real(2, 3), pos(3), node="DivBackward0"),
    case("div", "reflected", lambda x: 1.0 / x, pos(2, 3), node="DivBackward0"),
    case("div", "literal", lambda x: x / 4.0, real(5), node="DivBackward0"),
    case("div", "mixed_f64", lambda x, y: x / y, f64(real(3)), pos(2, 3)),
    # Integer inputs to float-valued ops give float32, PyTorch's default (NumPy: float64).
    case("div", "ints_give_f32", lambda k, j: k / (j * j + 1), ints(2, 3), ints(3), grad=False,
         ref=lambda k, j: (k / (j * j + 1)).astype(np.float32)),
    case("mul", "int_by_float_literal", lambda k: k * 2.5, ints(4), grad=False,
         ref=lambda k: (k * 2.5).astype(np.float32)),
    case("pow", "tensors", lambda x, y: x ** y, pos(2, 3), real(3), node="PowBackward0"),
    case("pow", "square", lambda x: x ** 2, real(2, 3), node="PowBackward0"),
    case("pow", "cube", lambda x: x ** 3.0, real(2, 3), node="PowBackward0"),
    case("pow", "half", lambda x: x ** 0.5, pos(4), node="PowBackward0"),
    case("pow", "zero", lambda x: x ** 0, real(3), node="PowBackward0"),
    case("pow", "literal_base", lambda x: 2.0 ** x, real(2, 3), node="PowBackward0"),
    case("pow", "method_0d_exponent", lambda x, y: x.pow(y), pos(3), real(), ref=np.power),
    case("neg", "2d", lambda x: -x, real(2, 3), node="NegBackward0"),
    case("neg", "method_0d", lambda x: x.neg(), real(), ref=np.negative, node="NegBackward0"),
    # Unary functions, as functions, methods and nn modules.
    case("exp", "fn", dg.exp, real(2, 3), ref=np.exp, node="ExpBackward0"),
    case("exp", "method_0d", lambda x: x.exp(), real(), ref=np.exp, node="ExpBackward0"),
    case("exp", "ints_give_f32", dg.exp, ints(2, 3), grad=False,
         ref=lambda k: np.exp(k).astype(np.float32)),
    case("log", "fn", dg.log, pos(2, 3), ref=np.log, node="LogBackward0"),
    case("log", "method", lambda x: x.log(), pos(4), ref=np.log, node="LogBackward0"),
    case("tanh", "fn", dg.tanh, real(2, 3), ref=np.tanh, node="TanhBackward0"),
    case("tanh", "module", dg.nn.Tanh(), real(4), ref=np.tanh, node="TanhBackward0"),
    case("sigmoid", "fn", dg.sigmoid, real(2, 3), ref=sigmoid_ref, node="SigmoidBackward0"),
    case("sigmoid", "functional_0d", F.sigmoid, real(), ref=sigmoid_ref, node="SigmoidBackward0"),
    case("relu", "fn", dg.relu, sep(2, 3), ref=relu_ref, node="ReluBackward0"),
    case("relu", "functional", F.relu, sep(5), ref=relu_ref, node="ReluBackward0"),
    case("relu", "module", dg.nn.ReLU(), sep(2, 2), ref=relu_ref, node="ReluBackward0"),
    case("threshold_backward", "fn", lambda g, y: threshold_backward(g, y, 0.0),
         real(2, 3), sep(2, 3), ref=lambda g, y: np.where(y > 0, g, 0).astype(g.dtype),
         node="ThresholdBackwardBackward0"),
    case("threshold_backward", "bcast", lambda g, y: threshold_backward(g, y, 0.5),
         real(3), sep(2, 3), ref=lambda g, y: np.where(y > 0.5, g, 0).astype(g.dtype)),
    case("sqrt", "fn", dg.sqrt, pos(2, 3), ref=np.sqrt),
    case("sqrt", "method_0d", lambda x: x.sqrt(), pos(), ref=np.sqrt),
    case("abs", "fn", dg.abs, sep(2, 3), ref=np.abs),
    case("abs", "builtin", lambda x: abs(x), sep(4)),
    case("sin", "fn", dg.sin, real(2, 3), ref=np.sin),
    case("sin", "method", lambda x: x.sin(), real(4), ref=np.sin),
    case("cos", "fn", dg.cos, real(2, 3), ref=np.cos),
    case("cos", "method_0d", lambda x: x.cos(), real(), ref=np.cos),
    # Selection (sep/grid inputs keep x and y at least 0.25 apart: no ties here).
    case("maximum", "bcast", dg.maximum, sep(2, 3), grid(3), ref=np.maximum),
    case("maximum", "literal", lambda x: dg.maximum(x, 0.0), sep(2, 3),
         ref=lambda x: np.maximum(x, 0.0)),
    case("where", "clamp_min", lambda x: x.clamp(min=-0.5), sep(6),
         ref=lambda x: np.maximum(x, -0.5)),
    case("minimum", "bcast", dg.minimum, grid(2, 1), sep(2, 3), ref=np.minimum),
    case("where", "clamp", lambda x: x.clamp(-0.5, 0.5), sep(2, 3),
         ref=lambda x: np.clip(x, -0.5, 0.5)),
    case("where", "bcast", dg.where, mask(2, 3), real(2, 3), real(3), ref=np.where),
    case("where", "literal", lambda c, x: dg.where(c, x, 0.0), mask(4), real(4),
         ref=lambda c, x: np.where(c, x, 0.0)),
    case("where", "compare_cond", lambda x, y: dg.where(x > y, x, y), real(2, 3), real(3),
         ref=lambda x, y: np.where(x > y, x, y)),
    case("where", "mixed_f64", dg.where, mask(3), real(3), f64(real(2, 3)), ref=np.where),
    case("where", "small_branches", dg.where, mask(2, 3), real(3), real(1), ref=np.where),
    # Comparisons: bool results, never differentiable. Coarse inputs have many ties.
    case("stop_gradient", "fn", dg.ops.shape.stop_gradient, real(2, 3), ref=lambda x: x,
         grad=False),
    case("lt", "bcast", lambda x, y: x < y, coarse(2, 3), coarse(3), grad=False),
    case("lt", "literal", lambda x: x < 0.5, real(4), grad=False),
    case("le", "bcast", lambda x, y: x <= y, coarse(2, 3), coarse(3), grad=False),
    case("le", "0d", lambda x, y: x <= y, coarse(), coarse(), grad=False),
    case("gt", "bcast", lambda x, y: x > y, coarse(2, 3), coarse(2, 1), grad=False),
    case("gt", "reflected", lambda x: 0.0 < x, real(2, 3), grad=False),
    case("ge", "bcast", lambda x, y: x >= y, coarse(3), coarse(2, 3), grad=False),
    case("ge", "mixed_f64", lambda x, y: x >= y, coarse(3), f64(coarse(3)), grad=False),
    case("eq", "bcast", lambda x, y: x == y, coarse(2, 3), coarse(3), grad=False),
    case("eq", "literal", lambda x: x == 1.0, coarse(6), grad=False),
    case("ne", "bcast", lambda x, y: x != y, coarse(2, 3), coarse(3), grad=False),
    case("ne", "ints", lambda k, j: k != j, ints(4), ints(4), grad=False),
    # Shape ops.
    case("reshape", "2d", lambda x: x.reshape(3, 2), real(2, 3)),
    case("reshape", "minus_one", lambda x: x.reshape(-1), real(2, 3)),
    case("reshape", "fn_tuple", lambda x: dg.reshape(x, (2, 1, 3)), real(6),
         ref=lambda x: np.reshape(x, (2, 1, 3))),
    case("reshape", "0d", lambda x: x.reshape(1, 1), real()),
    case("reshape", "unsqueeze", lambda x: x.unsqueeze(-1), real(2, 3),
         ref=lambda x: np.expand_dims(x, -1)),
    case("reshape", "squeeze", lambda x: x.squeeze(1), real(2, 1, 3),
         ref=lambda x: np.squeeze(x, 1)),
    case("transpose", "T", lambda x: x.T, real(2, 3)),
    case("transpose", "axes", lambda x: x.transpose(2, 0, 1), real(2, 3, 4)),
    case("transpose", "negative_axes", lambda x: x.permute(-1, 0, -2), real(2, 3, 4),
         ref=lambda x: x.transpose(-1, 0, -2)),
    case("transpose", "fn_reverse", dg.transpose, real(2, 3, 4), ref=np.transpose),
    case("broadcast_to", "expand", lambda x: x.expand(2, 3), real(3),
         ref=lambda x: np.broadcast_to(x, (2, 3))),
    case("broadcast_to", "lead_and_inner", lambda x: x.broadcast_to((3, 2, 4)), real(2, 1),
         ref=lambda x: np.broadcast_to(x, (3, 2, 4))),
    case("broadcast_to", "0d", lambda x: x.expand(2, 2), real(),
         ref=lambda x: np.broadcast_to(x, (2, 2))),
    case("getitem", "slice_none_int", lambda x: x[1:, None, 0], real(3, 4)),
    case("getitem", "int", lambda x: x[1], real(3, 4)),
    case("getitem", "negative_ints", lambda x: x[-1, -2], real(3, 4)),
    case("getitem", "ellipsis", lambda x: x[..., 1:3], real(2, 3, 4)),
    case("getitem", "step", lambda x: x[::2, 1], real(4, 3)),
    case("getitem", "reverse", lambda x: x[::-1], real(4)),
    case("getitem", "0d_newaxis", lambda x: x[None], real()),
    case("getitem", "trailing_newaxis", lambda x: x[..., None], real(2, 3)),
    case("getitem", "negative_step_bounds", lambda x: x[3:0:-2, ::2], real(4, 3)),
    case("scatter", "bind", scatter, real(2, 1), ref=scatter_ref),
    case("scatter", "getitem_grad", getitem_grad, real(3, 4), ref=getitem_grad_ref),
    case("view_scatter", "transposed_slice", view_scatter, real(3, 4), real(2),
         ref=view_scatter_ref),
    case("view_scatter", "reshaped_strided", view_scatter_reshape, real(3, 4), real(3),
         ref=view_scatter_reshape_ref),
    case("view_scatter", "literal", view_scatter_fill, real(3, 4), ref=view_scatter_fill_ref),
    case("concatenate", "axis0", lambda x, y: dg.concatenate([x, y]), real(2, 3), real(1, 3),
         ref=lambda x, y: np.concatenate([x, y])),
    case("concatenate", "cat_dim_neg", lambda x, y, z: dg.cat([x, y, z], dim=-1),
         real(2, 1), real(2, 3), real(2, 2), ref=lambda x, y, z: np.concatenate([x, y, z], -1)),
    case("concatenate", "mixed_f64", lambda x, y: dg.concatenate([x, y], 1), real(2, 2),
         f64(real(2, 1)), ref=lambda x, y: np.concatenate([x, y], 1)),
    case("stack", "axis0", lambda x, y: dg.stack([x, y]), real(3), real(3),
         ref=lambda x, y: np.stack([x, y])),
    case("stack", "neg_axis", lambda x, y: dg.stack([x, y], axis=-1), real(2, 3), real(2, 3),
         ref=lambda x, y: np.stack([x, y], -1)),
    case("stack", "0d", lambda x, y, z: dg.stack([x, y, z]), real(), real(), real(),
         ref=lambda x, y, z: np.stack([x, y, z])),
    # to_f32 first: the float64 compiled run keeps each op's first row, and a cast to the
    # input's own dtype is simplified away before lowering.
    case("astype", "to_f32", to_f32, real(2, 3), ref=lambda x: x.astype(np.float32),
         gradcheck=ROUNDED),
    case("astype", "to_f64", to_f64, real(2, 3), ref=lambda x: x.astype(np.float64)),
    case("astype", "int_to_float", lambda k: k.float(), ints(2, 3), grad=False,
         ref=lambda k: k.astype(np.float32)),
    # Matrix products: every rank combination NumPy's matmul accepts, and addmm.
    case("matmul", "mm", lambda a, b: a @ b, real(2, 3), real(3, 4), node="MmBackward0"),
    case("matmul", "mm_transposed", lambda a, b: a.T @ b, real(3, 2), real(3, 4),
         node="MmBackward0"),
    case("matmul", "dot", lambda a, b: a @ b, real(3), real(3)),
    case("matmul", "mv", lambda a, b: a @ b, real(2, 3), real(3)),
    case("matmul", "vm", lambda a, b: a @ b, real(3), real(3, 2)),
    case("matmul", "bmm", lambda a, b: a @ b, real(2, 2, 3), real(2, 3, 2)),
    case("matmul", "batch_bcast", dg.matmul, real(1, 2, 3), real(2, 3, 2), ref=np.matmul),
    case("matmul", "batched_by_matrix", lambda a, b: a @ b, real(2, 2, 3), real(3, 2)),
    case("matmul", "matrix_by_batched", lambda a, b: a @ b, real(2, 3), real(2, 3, 2)),
    case("matmul", "vector_by_batched", lambda a, b: a @ b, real(3), real(2, 3, 2)),
    case("matmul", "batched_by_vector", lambda a, b: a @ b, real(2, 2, 3), real(3)),
    case("matmul", "4d_by_3d", lambda a, b: a @ b, real(2, 1, 2, 3), real(3, 3, 2)),
    case("matmul", "mixed_f64", lambda a, b: a @ b, real(2, 3), f64(real(3, 2))),
    case("addmm", "fn", addmm, real(3), real(2, 4), real(4, 3),
         ref=lambda b, x, w: b + x @ w, node="AddmmBackward0"),
    case("addmm", "linear", F.linear, real(2, 4), real(3, 4), real(3),
         ref=lambda x, w, b: x @ w.T + b, node="AddmmBackward0"),
    case("addmm", "full_bias", addmm, real(2, 3), real(2, 4), real(4, 3),
         ref=lambda b, x, w: b + x @ w, node="AddmmBackward0"),
    case("addmm", "column_bias", addmm, real(2, 1), real(2, 4), real(4, 3),
         ref=lambda b, x, w: b + x @ w, node="AddmmBackward0"),
    case("addmm", "0d_bias", addmm, real(), real(2, 4), real(4, 3),
         ref=lambda b, x, w: b + x @ w, node="AddmmBackward0"),
    # Reductions: full and over axes, keepdims, axis tuples, negative axes, dim=, 0-d.
    case("sum", "all", lambda x: x.sum(), real(2, 3), node="SumBackward0"),
    case("sum", "all_keepdims", lambda x: x.sum(keepdims=True), real(2, 3), node="SumBackward0"),
    case("sum", "axis", lambda x: x.sum(axis=1), real(2, 3), node="SumBackward1"),
    case("sum", "axes_keepdims", lambda x: x.sum(axis=(0, 2), keepdims=True), real(2, 3, 4),
         node="SumBackward1"),
    case("sum", "dim_negative", lambda x: dg.sum(x, dim=-1), real(2, 3, 4),
         ref=lambda x: np.sum(x, axis=-1), node="SumBackward1"),
    case("sum", "0d", lambda x: x.sum(), real(), node="SumBackward0"),
    case("sum", "0d_dim0", lambda x: x.sum(dim=0), real(), ref=lambda x: x, node="SumBackward1"),
    case("sum", "ints", lambda k: k.sum(axis=0), ints(2, 3), grad=False),
    case("sum", "bools_give_int64", lambda m: m.sum(), mask(2, 3), grad=False),
    case("mean", "all", lambda x: x.mean(), real(2, 3), node="MeanBackward0"),
    case("mean", "axis_keepdims", lambda x: x.mean(axis=0, keepdims=True), real(2, 3),
         node="MeanBackward1"),
    case("mean", "axes_negative", lambda x: x.mean(axis=(-1, 0)), real(2, 3, 4),
         node="MeanBackward1"),
    case("mean", "fn_dim", lambda x: dg.mean(x, dim=1), real(2, 3),
         ref=lambda x: np.mean(x, axis=1), node="MeanBackward1"),
    case("mean", "0d", lambda x: x.mean(), real(), node="MeanBackward0"),
    case("max", "all", lambda x: x.max(), sep(2, 3)),
    case("max", "amax_dim", lambda x: x.amax(dim=1), sep(2, 3), ref=lambda x: x.max(axis=1)),
    case("max", "axes_keepdims", lambda x: x.max(axis=(0, -1), keepdims=True), sep(2, 3, 4)),
    case("max", "fn_dims", lambda x: dg.max(x, dim=(0,)), sep(3, 2),
         ref=lambda x: np.max(x, axis=0)),
    case("max", "0d", lambda x: x.max(), sep()),
    case("max", "0d_dim_negative", lambda x: x.amax(dim=-1), sep(), ref=lambda x: x),
    case("max", "ints", lambda k: k.amax(dim=1), ints(2, 3), grad=False,
         ref=lambda k: k.max(axis=1)),
    case("min", "all", lambda x: x.min(), sep(2, 3)),
    case("min", "amin_dims_keepdim", lambda x: dg.amin(x, dim=(0, -1), keepdim=True),
         sep(2, 3, 4), ref=lambda x: np.min(x, axis=(0, 2), keepdims=True)),
    case("min", "ints", lambda k: k.amin(dim=0), ints(2, 3), grad=False,
         ref=lambda k: k.min(axis=0)),
    # max(dim)/min(dim) values: a gather of x at the arg index (its gradient a scatter-add).
    case("gather_axis", "max_dim_keepdim", lambda x: x.max(dim=1, keepdim=True).values,
         sep(2, 3), ref=lambda x: x.max(axis=1, keepdims=True)),
    case("gather_axis", "min_dim_keepdim", lambda x: x.min(0, keepdim=True)[0],
         sep(3, 2), ref=lambda x: x.min(axis=0, keepdims=True)),
    case("argmax", "all", lambda x: dg.argmax(x), sep(2, 3), grad=False,
         ref=lambda x: np.argmax(x)),
    case("argmax", "dim_keepdim", lambda x: x.argmax(dim=-1, keepdim=True), coarse(3, 4),
         grad=False, ref=lambda x: np.argmax(x, axis=-1, keepdims=True)),
    case("argmax", "max_dim_indices", lambda x: x.max(dim=0, keepdim=True).indices,
         sep(3, 2), grad=False, ref=lambda x: np.argmax(x, axis=0, keepdims=True)),
    case("argmin", "dim", lambda x: dg.argmin(x, dim=0), coarse(3, 4), grad=False,
         ref=lambda x: np.argmin(x, axis=0)),
    case("argmin", "ints", lambda k: k.argmin(), ints(2, 3), grad=False,
         ref=lambda k: np.argmin(k)),
    # Random ops from a given key (x gives the shape and dtype): no gradient for draws;
    # dropout's gradient is the same mask, so finite differences check it exactly.
    case("rand", "key", lambda x, k: RND.rand(k, x.shape, x.dtype, 1), real(3, 4), key(),
         ref=rand_ref, grad=False),
    case("randn", "key", lambda x, k: RND.randn(k, x.shape, x.dtype, 2), real(3, 4), key(),
         ref=randn_ref, grad=False),
    case("dropout", "key", lambda x, k: RND.dropout(x, k, 0.4, 3), real(4, 5), key(),
         ref=dropout_ref, node="MulBackward0"),
]


def _softmax_ref(x: np.ndarray, axis: int) -> np.ndarray:
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


# Compositions of primitives (no op of their own): forward, gradient and infer checks only.
COMPOSITES: list[OpCase] = [
    case("softmax", "last", lambda x: F.softmax(x, dim=-1), real(2, 3),
         ref=lambda x: _softmax_ref(x, -1)),
    case("log_softmax", "first", lambda x: x.log_softmax(0), real(3, 2),
         ref=lambda x: np.log(_softmax_ref(x, 0))),
    case("mse_loss", "mean", F.mse_loss, real(2, 3), real(2, 3),
         ref=lambda x, y: ((x - y) ** 2).mean()),
    case("cross_entropy", "mean", F.cross_entropy, real(4, 3), labels(4),
         ref=lambda x, k: -np.log(_softmax_ref(x, 1))[np.arange(4), k].mean()),
    case("bce_with_logits", "sum", lambda x, y: F.binary_cross_entropy_with_logits(
        x, y, reduction="sum"), real(2, 3), Input((2, 3), "mask"),
         ref=lambda x, y: (np.logaddexp(0, x) - x * y).sum()),
]


# ============================================================================ math
# Math primitives (dualgraph/ops/elementwise.py). Inputs are mapped into each function's domain
# inside the case (asin on x * 0.4); rounding ops and sign take `sep` values (never on an
# integer or a half), so finite differences see their zero gradient.
def _erf_ref(x: np.ndarray) -> np.ndarray:
    from scipy.special import erf

    return erf(x)


CASES += [
    case("tan", "fn", lambda x: dg.tan(x * 0.5), real(2, 3), ref=lambda x: np.tan(x * 0.5),
         node="TanBackward0"),
    case("tan", "method_0d", lambda x: x.tan(), real(), ref=np.tan),
    case("asin", "fn", lambda x: dg.asin(x * 0.4), real(2, 3),
         ref=lambda x: np.arcsin(x * 0.4), node="AsinBackward0"),
    case("acos", "method", lambda x: (x * 0.4).acos(), real(4), ref=lambda x: np.arccos(x * 0.4)),
    case("atan", "fn", dg.atan, real(2, 3), ref=np.arctan),
    case("sinh", "fn", dg.sinh, real(2, 3), ref=np.sinh),
    case("cosh", "method", lambda x: x.cosh(), real(4), ref=np.cosh),
    case("asinh", "fn", dg.asinh, real(2, 3), ref=np.arcsinh),
    case("acosh", "fn", lambda x: dg.acosh(x + 1.0), pos(2, 3), ref=lambda x: np.arccosh(x + 1.0)),
    case("atanh", "fn", lambda x: dg.atanh(x * 0.4), real(2, 3), ref=lambda x: np.arctanh(x * 0.4)),
    case("erf", "fn", dg.erf, real(2, 3), ref=_erf_ref, node="ErfBackward0"),
    case("erf", "ints_give_f32", dg.erf, ints(4), grad=False,
         ref=lambda k: _erf_ref(k).astype(np.float32)),
    case("log2", "fn", dg.log2, pos(2, 3), ref=np.log2),
    case("log10", "method", lambda x: x.log10(), pos(4), ref=np.log10),
    case("log1p", "fn", dg.log1p, pos(2, 3), ref=np.log1p, node="Log1PBackward0"),
    case("expm1", "fn", dg.expm1, real(2, 3), ref=np.expm1),
    case("sign", "fn", dg.sign, sep(2, 3), ref=np.sign, node="SignBackward0"),
    case("sign", "ints", dg.sign, ints(5), grad=False, ref=np.sign),
    case("floor", "fn", dg.floor, sep(2, 3), ref=np.floor),
    case("floor", "ints_unchanged", dg.floor, ints(4), grad=False, ref=lambda k: k),
    case("ceil", "method", lambda x: x.ceil(), sep(2, 3), ref=np.ceil),
    case("round", "fn", dg.round, sep(2, 3), ref=np.round),
    case("round", "halves_to_even", lambda x: dg.round(x * 0.0 + np.array([0.5, 1.5, -2.5])),
         real(3), ref=lambda x: np.round(x * 0.0 + np.array([0.5, 1.5, -2.5]))),
    case("trunc", "fn", dg.trunc, sep(2, 3), ref=np.trunc),
    # NumPy's cast to float16 rounds to nearest even, as the emulated format must. Its
    # gradient is the incoming one rounded, not a derivative (checked in test_autocast):
    # finite differences check it in float64's own format, where rounding is the identity.
    case("reduce_precision", "float64_format",
         lambda x: dg.ops.precision.reduce_precision(x, 52, 11), real(2, 3), ref=lambda x: x,
         node="ToCopyBackward0"),
    case("copysign", "bcast", dg.copysign, real(2, 3), sep(3), ref=np.copysign,
         node="CopysignBackward0"),
    case("copysign", "literal", lambda x: x.copysign(-1.0), real(4),
         ref=lambda x: np.copysign(x, -1.0)),
    case("fmod", "bcast", dg.fmod, real(2, 3), pos(3), ref=np.fmod),
    case("fmod", "ints", lambda k: dg.fmod(k, -2), ints(2, 3), grad=False,
         ref=lambda k: np.fmod(k, -2)),
    case("fmod", "negative_divisor", lambda x, y: dg.fmod(x, -y), real(2, 3), pos(3),
         ref=lambda x, y: np.fmod(x, -y)),
    case("remainder", "operator", lambda x, y: x % y, real(2, 3), pos(3), ref=np.remainder),
    case("remainder", "negative_divisor", lambda x, y: x % -y, real(2, 3), pos(3),
         ref=lambda x, y: np.remainder(x, -y)),
    case("remainder", "ints", lambda k: k % 3, ints(2, 3), grad=False,
         ref=lambda k: np.remainder(k, 3)),
    case("remainder", "reflected", lambda x: 2.5 % x, pos(4), ref=lambda x: np.remainder(2.5, x)),
    case("floor_divide", "operator", lambda x, y: x // y, sep(2, 3), pos(3),
         ref=np.floor_divide),
    case("floor_divide", "ints", lambda k: k // 2, ints(2, 3), grad=False,
         ref=lambda k: np.floor_divide(k, 2)),
    case("floor_divide", "div_floor", lambda x, y: dg.div(x, y, rounding_mode="floor"),
         sep(4), pos(4), ref=np.floor_divide),
    case("atan2", "fn", dg.atan2, real(2, 3), real(3), ref=np.arctan2),
    case("atan2", "method", lambda x, y: x.atan2(y), real(4), pos(4), ref=np.arctan2),
    case("bitwise_and", "operator", lambda k, j: k & j, ints(2, 3), ints(3), grad=False,
         ref=np.bitwise_and),
    case("bitwise_and", "bools", lambda a, b: a & b, mask(4), mask(4), grad=False),
    case("bitwise_or", "operator", lambda k, j: k | j, ints(2, 3), ints(3), grad=False,
         ref=np.bitwise_or),
    case("bitwise_or", "literal", lambda k: k | 1, ints(4), grad=False,
         ref=lambda k: np.bitwise_or(k, 1)),
    case("bitwise_xor", "operator", lambda k, j: k ^ j, ints(2, 3), ints(3), grad=False,
         ref=np.bitwise_xor),
    case("bitwise_not", "operator", lambda k: ~k, ints(2, 3), grad=False, ref=np.invert),
    case("bitwise_not", "bools", lambda a: ~a, mask(4), grad=False, ref=np.invert),
    case("left_shift", "operator", lambda k: k << 2, ints(2, 3), grad=False,
         ref=lambda k: np.left_shift(k, 2)),
    case("right_shift", "operator", lambda k: k >> 1, ints(2, 3), grad=False,
         ref=lambda k: np.right_shift(k, 1)),
    case("gcd", "fn", dg.gcd, ints(2, 3), ints(3), grad=False, ref=np.gcd),
    case("lcm", "method", lambda k, j: k.lcm(j), ints(2, 3), ints(3), grad=False,
         ref=np.lcm),
    case("nextafter", "fn", dg.nextafter, real(2, 3), real(3), ref=np.nextafter,
         node="NextafterBackward0"),
]


def _lerp_ref(a: np.ndarray, b: np.ndarray, w: Any) -> np.ndarray:
    return a + w * (b - a)


def _gelu_ref(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1 + _erf_ref(x / math.sqrt(2)))


def _softplus_ref(x: np.ndarray, beta: float = 1.0, threshold: float = 20.0) -> np.ndarray:
    return np.where(x * beta > threshold, x, np.log1p(np.exp(x * beta)) / beta)


def _var_ref(x: np.ndarray, axis: Any, ddof: int) -> np.ndarray:
    return np.var(x, axis=axis, ddof=ddof)


COMPOSITES += [
    case("exp2", "fn", dg.exp2, real(2, 3), ref=np.exp2),
    case("rsqrt", "method", lambda x: x.rsqrt(), pos(2, 3), ref=lambda x: 1 / np.sqrt(x)),
    case("square", "fn", dg.square, real(2, 3), ref=np.square),
    case("reciprocal", "fn", dg.reciprocal, pos(2, 3), ref=np.reciprocal),
    case("frac", "method", lambda x: x.frac(), sep(2, 3), ref=lambda x: x - np.trunc(x)),
    case("add", "alpha", lambda x, y: dg.add(x, y, alpha=2.0), real(2, 3), real(3),
         ref=lambda x, y: x + 2.0 * y),
    case("sub", "alpha_method", lambda x, y: x.sub(y, alpha=0.5), real(2, 3), real(3),
         ref=lambda x, y: x - 0.5 * y),
    case("mul", "fn", dg.mul, real(2, 3), real(3), ref=np.multiply),
    case("div", "fn_trunc", lambda x, y: dg.div(x, y, rounding_mode="trunc"), sep(2, 3),
         pos(3), ref=lambda x, y: np.trunc(x / y)),
    case("div_trunc", "ints", lambda k: dg.div(k, -2, rounding_mode="trunc"), ints(2, 3),
         grad=False, ref=lambda k: np.fix(k / -2).astype(np.int64)),
    case("pow", "fn", dg.pow, pos(2, 3), real(3), ref=np.power),
    case("lerp", "scalar_weight", lambda a, b: dg.lerp(a, b, 0.75), real(2, 3), real(3),
         ref=lambda a, b: _lerp_ref(a, b, 0.75)),
    case("lerp", "tensor_weight", lambda a, b, w: a.lerp(b, w), real(2, 3), real(3), real(3),
         ref=_lerp_ref),
    case("logaddexp", "fn", dg.logaddexp, real(2, 3), real(3), ref=np.logaddexp),
    case("isnan", "fn", lambda x: dg.isnan(dg.log(x)), real(2, 3), grad=False,
         ref=lambda x: np.isnan(np.log(x))),
    case("isinf", "fn", lambda x: dg.isinf(1.0 / dg.floor(x)), sep(2, 3), grad=False,
         ref=lambda x: np.isinf(1.0 / np.floor(x))),
    case("isfinite", "fn", lambda x: (dg.log(x) / dg.floor(x)).isfinite(), real(2, 3),
         grad=False, ref=lambda x: np.isfinite(np.log(x) / np.floor(x))),
    case("isclose", "fn", lambda x, y: dg.isclose(x, x + y * 1e-6), real(2, 3), real(3),
         grad=False, ref=lambda x, y: np.isclose(x, x + y * 1e-6)),
    case("logical_and", "fn", lambda x, y: dg.logical_and(dg.floor(x), y > 0), sep(2, 3),
         real(3), grad=False, ref=lambda x, y: np.logical_and(np.floor(x), y > 0)),
    case("logical_or", "fn", lambda k, j: dg.logical_or(k, j), ints(2, 3), ints(3), grad=False,
         ref=np.logical_or),
    case("logical_xor", "fn", lambda k, j: dg.logical_xor(k, j), ints(2, 3), ints(3),
         grad=False, ref=np.logical_xor),
    case("logical_not", "fn", lambda k: dg.logical_not(k), ints(2, 3), grad=False,
         ref=np.logical_not),
    case("var", "all", lambda x: x.var(), real(2, 3), ref=lambda x: _var_ref(x, None, 1)),
    case("var", "dim_correction0", lambda x: dg.var(x, 1, correction=0, keepdim=True),
         real(2, 3), ref=lambda x: np.var(x, axis=1, keepdims=True)),
    case("std", "unbiased_false", lambda x: x.std(0, unbiased=False), real(3, 2),
         ref=lambda x: np.std(x, axis=0)),
    case("std", "dims", lambda x: dg.std(x, dim=(0, 2)), real(2, 3, 2),
         ref=lambda x: np.std(x, axis=(0, 2), ddof=1)),
    case("var_mean", "dim", lambda x: dg.stack(list(dg.var_mean(x, 1))), real(2, 3),
         ref=lambda x: np.stack([np.var(x, 1, ddof=1), np.mean(x, 1)])),
    case("std_mean", "all", lambda x: dg.stack(list(dg.std_mean(x))), real(2, 3),
         ref=lambda x: np.stack([np.std(x, ddof=1), np.mean(x)])),
    case("logsumexp", "dim", lambda x: dg.logsumexp(x, 1), real(2, 3),
         ref=lambda x: np.log(np.exp(x).sum(1))),
    case("logsumexp", "keepdim", lambda x: x.logsumexp(0, keepdim=True), real(3, 2),
         ref=lambda x: np.log(np.exp(x).sum(0, keepdims=True))),
    case("any", "dim", lambda x: dg.any(dg.floor(x), 1), sep(2, 3), grad=False,
         ref=lambda x: np.floor(x).any(1)),
    case("all", "all", lambda x: (x > -1.5).all(), real(2, 3), grad=False,
         ref=lambda x: (x > -1.5).all()),
    case("amax", "dim", lambda x: x.amax(1), sep(2, 3), ref=lambda x: x.max(1)),
    case("amin", "dims_keepdim", lambda x: dg.amin(x, (0, 1), keepdim=True), sep(2, 3),
         ref=lambda x: x.min((0, 1), keepdims=True)),
    # Activations (nn.functional and modules), on `sep` values: away from every kink.
    case("gelu_tanh", "module", dg.nn.GELU("tanh"), real(2, 3),
         ref=lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))),
    case("silu", "module", dg.nn.SiLU(), real(2, 3), ref=lambda x: x * sigmoid_ref(x)),
    case("elu", "fn", lambda x: F.elu(x, 0.5), sep(2, 3),
         ref=lambda x: np.where(x > 0, x, 0.5 * np.expm1(x))),
    case("celu", "module", dg.nn.CELU(0.5), sep(2, 3),
         ref=lambda x: np.where(x > 0, x, 0.5 * np.expm1(x / 0.5))),
    case("selu", "fn", F.selu, sep(2, 3),
         ref=lambda x: 1.0507009873554805 * np.where(x > 0, x, 1.6732632423543772 * np.expm1(x))),
    case("softplus", "beta_threshold", lambda x: F.softplus(x, 2.0, 1.0), sep(2, 3),
         ref=lambda x: _softplus_ref(x, 2.0, 1.0)),
    case("softsign", "module", dg.nn.Softsign(), real(2, 3), ref=lambda x: x / (1 + np.abs(x))),
    case("hardtanh", "fn", lambda x: F.hardtanh(x, -0.6, 0.9), sep(2, 3),
         ref=lambda x: np.clip(x, -0.6, 0.9)),
    case("relu6", "module", dg.nn.ReLU6(), Input((2, 3), "sep"), ref=lambda x: np.clip(x, 0, 6)),
    case("hardsigmoid", "fn", lambda x: F.hardsigmoid(x * 3.0), sep(2, 3),
         ref=lambda x: np.clip(x * 3.0 / 6 + 0.5, 0, 1)),
    case("hardswish", "module", lambda x: dg.nn.Hardswish()(x * 3.0), sep(2, 3),
         ref=lambda x: x * 3.0 * np.clip(x * 3.0 + 3, 0, 6) / 6),
    case("leaky_relu", "module", dg.nn.LeakyReLU(0.2), sep(2, 3),
         ref=lambda x: np.where(x > 0, x, 0.2 * x)),
    case("mish", "fn", F.mish, real(2, 3), ref=lambda x: x * np.tanh(np.log1p(np.exp(x)))),
    case("logsigmoid", "module", dg.nn.LogSigmoid(), real(2, 3),
         ref=lambda x: np.log(sigmoid_ref(x))),
    case("softmin", "module", dg.nn.Softmin(1), real(2, 3), ref=lambda x: _softmax_ref(-x, 1)),
    case("softmax", "module", dg.nn.Softmax(0), real(3, 2), ref=lambda x: _softmax_ref(x, 0)),
    case("log_softmax", "module", dg.nn.LogSoftmax(-1), real(2, 3),
         ref=lambda x: np.log(_softmax_ref(x, -1))),
    case("normalize", "p2", F.normalize, real(2, 3),
         ref=lambda x: x / np.linalg.norm(x, axis=1, keepdims=True)),
    case("normalize", "p1_dim0", lambda x: F.normalize(x, 1, 0), real(2, 3),
         ref=lambda x: x / np.abs(x).sum(0, keepdims=True)),
]


CASES += [
    case("prod", "all", lambda x: x.prod(), real(2, 3), node="ProdBackward0"),
    case("prod", "dim", lambda x: dg.prod(x, 1), real(2, 3), ref=lambda x: np.prod(x, 1),
         node="ProdBackward1"),
    case("prod", "dims_keepdim", lambda x: dg.prod(x, (0, 2), keepdim=True), real(2, 3, 2),
         ref=lambda x: np.prod(x, (0, 2), keepdims=True)),
    case("prod", "ints_give_int64", lambda k: k.prod(0), ints(2, 3), grad=False,
         ref=lambda k: np.prod(k, 0)),
]


# ---- normalisation and modules


def _norm_ref(x: np.ndarray, axes: tuple, eps: float = 1e-5) -> np.ndarray:
    mean = x.mean(axes, keepdims=True)
    return (x - mean) / np.sqrt(x.var(axes, keepdims=True) + eps)


def _bn_eval_ref(x, rm, rv, w, b):
    return (x - rm[:, None]) / np.sqrt(rv[:, None] + 1e-5) * w[:, None] + b[:, None]


CASES += [
    case("layer_norm", "affine", lambda x, w, b: F.layer_norm(x, (4,), w, b),
         real(3, 4), real(4), real(4), node="NativeLayerNormBackward0",
         ref=lambda x, w, b: _norm_ref(x, (1,)) * w + b),
    case("layer_norm", "two_dims", lambda x: F.layer_norm(x, (2, 3)), real(2, 2, 3),
         ref=lambda x: _norm_ref(x, (1, 2))),
    case("layer_norm", "bias_only_eps", lambda x, b: F.layer_norm(x, 4, None, b, eps=0.1),
         real(2, 4), real(4), ref=lambda x, b: _norm_ref(x, (1,), 0.1) + b),
    case("layer_norm", "module", dg.nn.LayerNorm(3, elementwise_affine=False), real(2, 3),
         ref=lambda x: _norm_ref(x, (1,))),
]


def _ln_grad_ref(g: np.ndarray, x: np.ndarray, w: Any, axes: tuple) -> np.ndarray:
    xhat, a = _norm_ref(x, axes), g * w
    inner = a - a.mean(axes, keepdims=True) - xhat * (a * xhat).mean(axes, keepdims=True)
    return inner / np.sqrt(x.var(axes, keepdims=True) + 1e-5)


CASES += [
    case("layer_norm_backward", "weight",
         lambda g, x, w: bind(NORM.LAYER_NORM_BACKWARD, g, x, w, ndim=1, eps=1e-5),
         real(3, 4), real(3, 4), real(4), ref=lambda g, x, w: _ln_grad_ref(g, x, w, (1,)),
         node="NativeLayerNormBackwardBackward0"),
    case("layer_norm_backward", "two_dims_no_weight",
         lambda g, x: bind(NORM.LAYER_NORM_BACKWARD, g, x, 1.0, ndim=2, eps=1e-5),
         real(2, 2, 3), real(2, 2, 3), ref=lambda g, x: _ln_grad_ref(g, x, 1.0, (1, 2))),
    case("layer_norm_weight_grad", "two_dims",
         lambda g, x: bind(NORM.LAYER_NORM_WEIGHT_GRAD, g, x, ndim=2, eps=1e-5),
         real(2, 2, 3), real(2, 2, 3), ref=lambda g, x: (g * _norm_ref(x, (1, 2))).sum(0),
         node="LayerNormWeightGradBackward0"),
]

# Exact GELU and its backward are primitives (ops/activation.py); the tanh form is a
# composition (with the activations in COMPOSITES).
CASES += [
    case("gelu", "exact", F.gelu, real(2, 3), ref=_gelu_ref, node="GeluBackward0"),
    case("gelu_backward", "fn", ACT.gelu_backward, real(2, 3), real(2, 3),
         ref=lambda g, x: g * (0.5 * (1 + _erf_ref(x / math.sqrt(2)))
                               + x * np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)),
         node="GeluBackwardBackward0"),
]

def _bn_grad_ref(g: np.ndarray, x: np.ndarray, w: Any) -> np.ndarray:
    return _ln_grad_ref(g, x, w[:, None], (0, 2))


def _bn_stats_ref(x: np.ndarray) -> np.ndarray:
    return np.stack([x.mean((0, 2)), x.var((0, 2))])


# Training batch norm and its gradients are primitives (ops/norm.py).
CASES += [
    case("batch_norm", "train", lambda x, w, b: F.batch_norm(x, None, None, w, b, True),
         real(4, 2, 3), real(2), real(2), node="NativeBatchNormBackward0",
         ref=lambda x, w, b: _norm_ref(x, (0, 2)) * w[:, None] + b[:, None]),
    case("batch_norm", "no_affine_2d", lambda x: F.batch_norm(x, None, None, training=True),
         real(5, 3), ref=lambda x: _norm_ref(x, (0,))),
    case("batch_norm_backward", "weight",
         lambda g, x, w: bind(NORM.BATCH_NORM_BACKWARD, g, x, w, eps=1e-5),
         real(4, 2, 3), real(4, 2, 3), real(2), ref=_bn_grad_ref,
         node="NativeBatchNormBackwardBackward0"),
    case("batch_norm_param_grads", "3d",
         lambda g, x: bind(NORM.BATCH_NORM_PARAM_GRADS, g, x, eps=1e-5),
         real(4, 2, 3), real(4, 2, 3), node="BatchNormParamGradsBackward0",
         ref=lambda g, x: np.stack([(g * _norm_ref(x, (0, 2))).sum((0, 2)), g.sum((0, 2))])),
    case("batch_norm_stats", "3d", lambda x: bind(NORM.BATCH_NORM_STATS, x), real(4, 2, 3),
         ref=_bn_stats_ref, node="BatchNormStatsBackward0"),
]

COMPOSITES += [
    case("batch_norm_eval", "running", lambda x, rm, rv, w, b: F.batch_norm(x, rm, rv, w, b),
         real(3, 2, 2), real(2), pos(2), real(2), real(2), ref=_bn_eval_ref),
    case("group_norm", "affine", lambda x, w, b: F.group_norm(x, 2, w, b),
         real(2, 4, 3), real(4), real(4),
         ref=lambda x, w, b: _norm_ref(x.reshape(2, 2, 6), (2,)).reshape(2, 4, 3)
         * w[:, None] + b[:, None]),
    case("instance_norm", "plain", F.instance_norm, real(2, 3, 4),
         ref=lambda x: _norm_ref(x, (2,))),
]

# ---- convolution. References are direct loops over output positions (no im2col)
# computed in float64, so they share nothing with the kernels they check.
def _conv_ref(x: np.ndarray, w: np.ndarray, b: Any = None, stride: tuple = (1, 1),
              pads: tuple = ((0, 0), (0, 0)), dil: tuple = (1, 1), groups: int = 1) -> np.ndarray:
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0)) + pads)
    n, _, h, wd = xp.shape
    o, cg, kh, kw = w.shape
    oh = (h - dil[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (wd - dil[1] * (kw - 1) - 1) // stride[1] + 1
    out = np.zeros((n, o, oh, ow))
    for k in range(o):
        g = k // (o // groups)
        for i in range(oh):
            for j in range(ow):
                patch = xp[:, g * cg:(g + 1) * cg,
                           i * stride[0]:i * stride[0] + dil[0] * (kh - 1) + 1:dil[0],
                           j * stride[1]:j * stride[1] + dil[1] * (kw - 1) + 1:dil[1]]
                out[:, k, i, j] = (patch * w[k]).sum((1, 2, 3))
    if b is not None:
        out += b.reshape(o, 1, 1)
    return out.astype(x.dtype)


def _conv_weight_ref(x: np.ndarray, g: np.ndarray, k: tuple, stride: tuple = (1, 1),
                     pads: tuple = ((0, 0), (0, 0)), dil: tuple = (1, 1),
                     groups: int = 1) -> np.ndarray:
    # Each weight element is the sum of the output gradient times the input elements it met.
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0)) + pads)
    _, o, oh, ow = g.shape
    cg = x.shape[1] // groups
    out = np.zeros((o, cg, *k))
    for m in range(o):
        c0 = m // (o // groups) * cg
        for a in range(k[0]):
            for b in range(k[1]):
                patch = xp[:, c0:c0 + cg,
                           a * dil[0]:a * dil[0] + stride[0] * (oh - 1) + 1:stride[0],
                           b * dil[1]:b * dil[1] + stride[1] * (ow - 1) + 1:stride[1]]
                out[m, :, a, b] = (patch * g[:, m, None]).sum((0, 2, 3))
    return out.astype(x.dtype)


def _conv_input_ref(g: np.ndarray, w: np.ndarray, size: tuple, stride: tuple = (1, 1),
                    pads: tuple = ((0, 0), (0, 0)), dil: tuple = (1, 1),
                    groups: int = 1) -> np.ndarray:
    # Each output gradient element times the weights, added where its window read.
    n, o, oh, ow = g.shape
    _, cg, kh, kw = w.shape
    out = np.zeros((n, cg * groups, size[0] + sum(pads[0]), size[1] + sum(pads[1])))
    for m in range(o):
        c0 = m // (o // groups) * cg
        for i in range(oh):
            for j in range(ow):
                for a in range(kh):
                    for b in range(kw):
                        out[:, c0:c0 + cg, i * stride[0] + a * dil[0],
                            j * stride[1] + b * dil[1]] += g[:, m, i, j, None] * w[m, :, a, b]
    return out[:, :, pads[0][0]:pads[0][0] + size[0],
               pads[1][0]:pads[1][0] + size[1]].astype(g.dtype)


def _unfold_ref(x: np.ndarray, k: tuple, dil: tuple, pad: tuple, stride: tuple) -> np.ndarray:
    xp = np.pad(x, ((0, 0), (0, 0), (pad[0], pad[0]), (pad[1], pad[1])))
    n, c, h, w = xp.shape
    oh = (h - dil[0] * (k[0] - 1) - 1) // stride[0] + 1
    ow = (w - dil[1] * (k[1] - 1) - 1) // stride[1] + 1
    out = np.zeros((n, c, k[0], k[1], oh, ow), x.dtype)
    for i in range(oh):
        for j in range(ow):
            for a in range(k[0]):
                for b in range(k[1]):
                    out[:, :, a, b, i, j] = xp[:, :, i * stride[0] + a * dil[0],
                                               j * stride[1] + b * dil[1]]
    return out.reshape(n, c * k[0] * k[1], oh * ow)


def _fold_ref(cols: np.ndarray, size: tuple, k: tuple, dil: tuple, pad: tuple,
              stride: tuple) -> np.ndarray:
    # The adjoint of _unfold_ref: every column entry added back where it was read from.
    n, ck, _ = cols.shape
    c = ck // (k[0] * k[1])
    out = np.zeros((n, c, size[0] + 2 * pad[0], size[1] + 2 * pad[1]), cols.dtype)
    oh = (size[0] + 2 * pad[0] - dil[0] * (k[0] - 1) - 1) // stride[0] + 1
    ow = (size[1] + 2 * pad[1] - dil[1] * (k[1] - 1) - 1) // stride[1] + 1
    c6 = cols.reshape(n, c, k[0], k[1], oh, ow)
    for i in range(oh):
        for j in range(ow):
            for a in range(k[0]):
                for b in range(k[1]):
                    out[:, :, i * stride[0] + a * dil[0], j * stride[1] + b * dil[1]] += \
                        c6[:, :, a, b, i, j]
    return out[:, :, pad[0]:pad[0] + size[0], pad[1]:pad[1] + size[1]]


def _conv_transpose_ref(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """conv_transpose2d(x, w, stride=2, padding=1, output_padding=1, groups=2), by
    scattering each input pixel times its kernel into the output."""
    n, cin, h, wd = x.shape
    _, cog, kh, kw = w.shape
    full = np.zeros((n, 2 * cog, (h - 1) * 2 + kh + 1, (wd - 1) * 2 + kw + 1))
    for c in range(cin):
        g = c // (cin // 2)
        for i in range(h):
            for j in range(wd):
                full[:, g * cog:(g + 1) * cog, 2 * i:2 * i + kh, 2 * j:2 * j + kw] += \
                    x[:, c, i, j, None, None, None] * w[c]
    oh, ow = (h - 1) * 2 - 2 + kh + 1, (wd - 1) * 2 - 2 + kw + 1
    return full[:, :, 1:1 + oh, 1:1 + ow].astype(x.dtype)


CASES += [
    case("conv2d", "bias_stride_padding", lambda x, w, b: F.conv2d(x, w, b, stride=2, padding=1),
         real(2, 3, 5, 4), real(4, 3, 2, 2), real(4),
         ref=lambda x, w, b: _conv_ref(x, w, b, (2, 2), ((1, 1), (1, 1))),
         node="ConvolutionBackward0"),
    case("conv2d", "groups_dilation_same",
         lambda x, w: F.conv2d(x, w, padding="same", dilation=(2, 1), groups=2),
         real(1, 4, 5, 5), real(4, 2, 2, 3),
         ref=lambda x, w: _conv_ref(x, w, None, (1, 1), ((1, 1), (1, 1)), (2, 1), 2)),
    case("conv2d_weight", "padding",
         lambda x, g: conv2d_weight(x, g, (3, 2), padding=((1, 1), (0, 1))),
         real(2, 3, 5, 4), real(2, 4, 5, 4),
         ref=lambda x, g: _conv_weight_ref(x, g, (3, 2), pads=((1, 1), (0, 1))),
         node="ConvolutionBackwardBackward0"),
    case("conv2d_weight", "groups_stride_dilation",
         lambda x, g: conv2d_weight(x, g, (3, 2), (2, 1), ((1, 1), (2, 2)), (1, 2), 2),
         real(2, 4, 5, 6), real(2, 6, 3, 8),
         ref=lambda x, g: _conv_weight_ref(x, g, (3, 2), (2, 1), ((1, 1), (2, 2)), (1, 2),
                                           2)),
    case("conv2d_input", "padding",
         lambda g, w: conv2d_input(g, w, (5, 4), padding=((1, 1), (0, 1))),
         real(2, 4, 5, 4), real(4, 3, 3, 2),
         ref=lambda g, w: _conv_input_ref(g, w, (5, 4), pads=((1, 1), (0, 1))),
         node="ConvolutionBackwardBackward0"),
    case("conv2d_input", "groups_stride_dilation",
         lambda g, w: conv2d_input(g, w, (5, 6), (2, 1), ((1, 1), (2, 2)), (1, 2), 2),
         real(2, 6, 3, 8), real(6, 2, 3, 2),
         ref=lambda g, w: _conv_input_ref(g, w, (5, 6), (2, 1), ((1, 1), (2, 2)), (1, 2), 2)),
    case("im2col", "unfold", lambda x: F.unfold(x, (2, 3), (1, 2), 1, (2, 1)),
         real(2, 2, 4, 5), ref=lambda x: _unfold_ref(x, (2, 3), (1, 2), (1, 1), (2, 1)),
         node="Im2ColBackward0"),
    case("col2im", "fold", lambda c: F.fold(c, (4, 5), 2, padding=(0, 1), stride=(1, 2)),
         real(2, 8, 9), ref=lambda c: _fold_ref(c, (4, 5), (2, 2), (1, 1), (0, 1), (1, 2)),
         node="Col2ImBackward0"),
    case("conv2d_input", "conv_transpose2d",
         lambda x, w: F.conv_transpose2d(x, w, stride=2, padding=1, output_padding=1, groups=2),
         real(1, 4, 3, 2), real(4, 2, 3, 2), ref=_conv_transpose_ref,
         node="ConvolutionBackwardBackward0"),
]
COMPOSITES += [
    case("conv2d", "unbatched", lambda x, w: F.conv2d(x, w, stride=(1, 2))[1:],
         real(2, 4, 5), real(3, 2, 2, 2),
         ref=lambda x, w: _conv_ref(x[None], w, None, (1, 2))[0, 1:]),
    case("conv1d", "stride_padding", lambda x, w, b: F.conv1d(x, w, b, stride=2, padding=2),
         real(2, 3, 7), real(4, 3, 3), real(4),
         ref=lambda x, w, b: _conv_ref(x[:, :, None], w[:, :, None], b, (1, 2),
                                       ((0, 0), (2, 2)))[:, :, 0]),
]

# ---- indexing (dualgraph/ops/index.py): `index` and `index_put` through every
# public spelling that binds them. Index arrays are fixed, in range, and (for writes that
# replace) without repeats, where finite differences could not see the overwritten copy.
_I3 = np.array([2, 0, 2])
_COLS = np.array([[0], [3]])
_PICK = np.array([[0, 2, 2], [1, 0, 1]])
_MASK = np.array([True, False, True])
_SC = np.array([[0, 2], [2, 1]])  # scatter: no repeats within a row


def _setitem(x: Any, v: Any) -> Any:
    y = x * 1.0
    y[dg.tensor([3, 0])] = v
    return y


def _setitem_ref(x: np.ndarray, v: np.ndarray) -> np.ndarray:
    y = x.copy()
    y[[3, 0]] = v
    return y


def _setitem_view(x: Any, v: Any) -> Any:
    y = x * 1.0
    y[1][[2, 0]] = v  # through a basic-index view: the write reaches y
    return y


def _setitem_view_ref(x: np.ndarray, v: np.ndarray) -> np.ndarray:
    y = x.copy()
    y[1][[2, 0]] = v
    return y


def _scatter_src_ref(x: np.ndarray, s: np.ndarray) -> np.ndarray:
    out = x.copy()
    for i in range(2):
        for j in range(2):
            out[i, _SC[i, j]] = s[i, j]
    return out


def _scatter_add_ref(x: np.ndarray, s: np.ndarray) -> np.ndarray:
    out = x.copy()
    for i in range(2):
        for j in range(3):
            out[i, _PICK[i, j]] += s[i, j]
    return out


def _index_add_ref(x: np.ndarray, s: np.ndarray) -> np.ndarray:
    out = x.copy()
    np.add.at(out, (slice(None), _I3), 2.0 * s)
    return out


def _index_grad(x: Any) -> Any:
    """d/dx of ``sum(x[idx] ** 2)``: index's VJP is an accumulating index_put."""
    x = _leaf(x)
    (g,) = dg.grad((x[dg.tensor(_I3)] ** 2).sum(), [x], create_graph=True)
    return g


def _index_grad_ref(x: np.ndarray) -> np.ndarray:
    out = np.zeros_like(x)
    np.add.at(out, _I3, 2 * x[_I3])
    return out


CASES += [
    case("index", "int_tensor_repeats", lambda x: x[dg.tensor(_I3)], real(3, 4),
         ref=lambda x: x[_I3], node="IndexBackward0"),
    case("index", "list_negative", lambda x: x[:, [-1, 0]], real(3, 4),
         ref=lambda x: x[:, [-1, 0]]),
    case("index", "int_then_array", lambda x: x[1, :, _COLS], real(2, 3, 4),
         ref=lambda x: x[1][:, _COLS]),
    case("index", "separated_first", lambda x: x[_COLS // 3, :, _COLS[:, 0]], real(2, 3, 4),
         ref=lambda x: x[_COLS // 3, :, _COLS[:, 0]]),
    case("index", "bool_mask_array", lambda x: x[_MASK], real(3, 2), ref=lambda x: x[_MASK]),
    case("gather_axis", "gather", lambda x: x.gather(1, dg.tensor(_PICK)), real(2, 4),
         ref=lambda x: np.take_along_axis(x, _PICK, 1), node="GatherBackward0"),
    case("gather_axis", "gather_index_smaller_outside_dim", lambda x: x.gather(1, dg.tensor(_PICK)),
         real(3, 4), ref=lambda x: np.take_along_axis(x[:2], _PICK, 1), node="GatherBackward0"),
    case("gather_axis", "take_along_dim", lambda x: dg.take_along_dim(x, dg.tensor(_COLS), 1),
         real(2, 4), ref=lambda x: np.take_along_axis(x, _COLS, 1)),
    case("index", "index_select", lambda x: dg.index_select(x, -1, dg.tensor(_I3)),
         real(2, 3), ref=lambda x: x[:, _I3], node="IndexSelectBackward0"),
    case("index", "embedding", lambda w: F.embedding(dg.tensor(_PICK), w), real(3, 2),
         ref=lambda w: w[_PICK], node="EmbeddingBackward0"),
    case("index", "masked_select", lambda x: x.masked_select(dg.tensor(_MASK)), real(2, 3),
         ref=lambda x: x[:, _MASK].reshape(-1), node="MaskedSelectBackward0"),
    case("index_put", "setitem", _setitem, real(4, 3), real(2, 3), ref=_setitem_ref,
         node="IndexPutBackward0"),
    case("index_put", "accumulate", lambda x, v: dg.index_put(x, (dg.tensor(_I3),), v, True),
         real(3, 2), real(2), ref=lambda x, v: x + np.array([[1], [0], [2]], x.dtype) * v),
    case("index_put", "scatter", lambda x, s: x.scatter(1, dg.tensor(_SC), s),
         real(2, 4), real(3, 3), ref=lambda x, s: _scatter_src_ref(x, s[:2, :2]),
         node="ScatterBackward0"),
    case("index_put", "scatter_add", lambda x, s: dg.scatter_add(x, 1, dg.tensor(_PICK), s),
         real(2, 4), real(2, 3), ref=_scatter_add_ref, node="ScatterAddBackward0"),
    case("index_put", "index_add_alpha", lambda x, s: x.index_add(1, dg.tensor(_I3), s, alpha=2),
         real(2, 3), real(2, 3), ref=_index_add_ref, node="IndexAddBackward0"),
    case("index_put", "index_fill", lambda x: x.index_fill(0, dg.tensor([1]), -1.5), real(3, 2),
         ref=lambda x: np.where(np.arange(3)[:, None] == 1, -1.5, x), node="IndexFillBackward0"),
    case("index_put", "index_grad", _index_grad, real(3, 2), ref=_index_grad_ref),
]
COMPOSITES += [
    case("setitem", "through_view", _setitem_view, real(2, 3), real(2), ref=_setitem_view_ref),
    case("masked_fill", "scalar", lambda x: x.masked_fill(dg.tensor(_MASK), 0.5), real(2, 3),
         ref=lambda x: np.where(_MASK, np.float32(0.5).astype(x.dtype), x)),
    case("one_hot", "classes", lambda k: F.one_hot(dg.tensor(_PICK), 4).astype(k.dtype) * k,
         real(1), ref=lambda k: np.eye(4, dtype=k.dtype)[_PICK] * k),
]
# ---- scans and sorting (dualgraph/ops/scan.py)
def _rev_cumsum_ref(x: np.ndarray, axis: int) -> np.ndarray:
    return np.flip(np.cumsum(np.flip(x, axis), axis), axis)


def _stable_order(x: np.ndarray, axis: int, descending: bool = False) -> np.ndarray:
    return np.argsort(-x if descending else x, axis=axis, kind="stable")


def _cummax_ref(x: np.ndarray) -> np.ndarray:
    return np.maximum.accumulate(x, axis=1)


def _argcum_ref(x: np.ndarray, better: Callable) -> np.ndarray:
    out = np.zeros(x.shape, np.int64)
    for i in range(x.shape[0]):
        at = 0
        for j in range(x.shape[1]):
            if better(x[i, j], x[i, at]):
                at = j
            out[i, j] = at
    return out


def scatter_add_axis(g: Any) -> Any:
    idx = np.array([[2, 0, 2], [1, 1, 3]])
    return bind(OPS["scatter_add_axis"], g, dg.tensor(idx), axis=1, size=4)


def scatter_add_axis_ref(g: np.ndarray) -> np.ndarray:
    out = np.zeros((2, 4), g.dtype)
    np.add.at(out, (np.array([[0], [1]]), np.array([[2, 0, 2], [1, 1, 3]])), g)
    return out


CASES += [
    case("cumsum", "dim1", lambda x: dg.cumsum(x, 1), real(2, 3),
         ref=lambda x: np.cumsum(x, 1), node="CumsumBackward0"),
    case("cumsum", "method_neg_dim", lambda x: x.cumsum(-3), real(2, 3, 2),
         ref=lambda x: np.cumsum(x, 0)),
    case("cumsum", "ints_give_int64", lambda k: k.cumsum(0), ints(3, 2), grad=False,
         ref=lambda k: np.cumsum(k, 0)),
    case("cumsum", "reverse_grad", lambda x: _leaf_grad(lambda t: (t.cumsum(1) ** 2).sum(), x),
         real(2, 3), ref=lambda x: 2 * _rev_cumsum_ref(np.cumsum(x, 1), 1)),
    case("cumprod", "dim1", lambda x: dg.cumprod(x, 1), real(2, 4),
         ref=lambda x: np.cumprod(x, 1), node="CumprodBackward0"),
    case("cumprod", "with_zeros", lambda x: (x * dg.tensor([1.0, 0.0, 1.0, 0.0])).cumprod(1),
         real(3, 4), ref=lambda x: np.cumprod(x * np.array([1.0, 0.0, 1.0, 0.0], x.dtype), 1)),
    case("logcumsumexp", "dim0", lambda x: dg.logcumsumexp(x, 0), real(3, 2),
         ref=lambda x: np.logaddexp.accumulate(x, 0), node="LogcumsumexpBackward0"),
    case("logcumsumexp", "large", lambda x: (x * 100.0).logcumsumexp(-1), real(2, 3),
         ref=lambda x: np.logaddexp.accumulate(x * 100.0, -1)),
    case("argsort", "ascending", lambda x: x.argsort(), coarse(3, 4), grad=False,
         ref=lambda x: _stable_order(x, -1)),
    case("argsort", "descending_dim0", lambda x: dg.argsort(x, 0, descending=True), coarse(4, 3),
         grad=False, ref=lambda x: _stable_order(x, 0, True)),
    case("gather_axis", "sort_values", lambda x: dg.sort(x, 1).values, sep(3, 4),
         ref=lambda x: np.sort(x, 1), node="SortBackward0"),
    case("gather_axis", "sort_descending", lambda x: x.sort(0, descending=True)[0], sep(3, 2),
         ref=lambda x: -np.sort(-x, 0)),
    case("gather_axis", "topk", lambda x: dg.topk(x, 2).values, sep(3, 4),
         ref=lambda x: -np.sort(-x, -1)[:, :2], node="TopkBackward0"),
    case("gather_axis", "topk_smallest_dim0", lambda x: x.topk(2, 0, largest=False).values,
         sep(3, 4), ref=lambda x: np.sort(x, 0)[:2]),
    case("gather_axis", "msort", lambda x: dg.msort(x), sep(3, 2), ref=lambda x: np.sort(x, 0)),
    case("gather_axis", "kthvalue", lambda x: dg.kthvalue(x, 2, 1).values, sep(3, 4),
         ref=lambda x: np.sort(x, 1)[:, 1], node="KthvalueBackward0"),
    case("gather_axis", "kthvalue_keepdim", lambda x: x.kthvalue(3, 0, keepdim=True).values,
         sep(3, 2), ref=lambda x: np.sort(x, 0)[2:3]),
    case("gather_axis", "median_all", lambda x: x.median(), sep(2, 3),
         ref=lambda x: np.sort(x.ravel())[2], node="MedianBackward0"),
    case("gather_axis", "median_dim", lambda x: dg.median(x, 1).values, sep(3, 4),
         ref=lambda x: np.sort(x, 1)[:, 1], node="MedianBackward1"),
    case("gather_axis", "nanmedian_dim_keepdim", lambda x: x.nanmedian(0, True).values,
         sep(3, 2), ref=lambda x: np.sort(x, 0)[1:2], node="NanmedianBackward1"),
    case("gather_axis", "cummax", lambda x: dg.cummax(x, 1).values, sep(2, 4),
         ref=_cummax_ref, node="CummaxBackward0"),
    case("gather_axis", "cummin_dim0", lambda x: x.cummin(0).values, sep(3, 2),
         ref=lambda x: np.minimum.accumulate(x, 0), node="CumminBackward0"),
    case("scatter_add_axis", "repeated", scatter_add_axis, real(2, 3),
         ref=scatter_add_axis_ref, node="ScatterAddBackward0"),
    case("argcummax", "ties", lambda x: dg.cummax(x, 1).indices, coarse(3, 5), grad=False,
         ref=lambda x: _argcum_ref(x, lambda a, b: a >= b)),
    case("argcummin", "ties", lambda x: x.cummin(1)[1], coarse(3, 5), grad=False,
         ref=lambda x: _argcum_ref(x, lambda a, b: a <= b)),
    case("searchsorted", "left_right", lambda x: dg.stack([
        dg.searchsorted(dg.tensor([-1.0, 0.0, 0.0, 1.0]), x),
        dg.searchsorted(dg.tensor([-1.0, 0.0, 0.0, 1.0]), x, right=True)]),
        coarse(2, 3), grad=False,
        ref=lambda x: np.stack([np.searchsorted([-1.0, 0.0, 0.0, 1.0], x),
                                np.searchsorted([-1.0, 0.0, 0.0, 1.0], x, "right")])),
    case("searchsorted", "bucketize", lambda x: dg.bucketize(x, dg.tensor([-1.0, 0.5])),
         real(2, 3), grad=False, ref=lambda x: np.searchsorted([-1.0, 0.5], x)),
    case("histc", "range", lambda x: dg.histc(x, 4, -1, 1), real(3, 4), grad=False,
         ref=lambda x: np.histogram(x, 4, (-1, 1))[0].astype(x.dtype)),
    case("histc", "data_range", lambda x: x.histc(bins=5), real(3, 4), grad=False,
         ref=lambda x: np.histogram(x, 5)[0].astype(x.dtype)),
]


def _leaf_grad(f: Callable, x: Any) -> Any:
    """The gradient of ``f`` at ``x``, kept on the tape (its node is the VJP's last op)."""
    x = _leaf(x)
    (g,) = dg.grad(f(x), [x], create_graph=True)
    return g


COMPOSITES += [
    case("count_nonzero", "dim", lambda x: dg.count_nonzero(dg.floor(x), 1), sep(3, 4),
         grad=False, ref=lambda x: np.count_nonzero(np.floor(x), 1)),
    case("count_nonzero", "all_method", lambda k: k.count_nonzero(), ints(3, 4), grad=False,
         ref=lambda k: np.asarray(np.count_nonzero(k), np.int64)),
]
# ---- pooling and padding (dualgraph/ops/pool.py). References are naive loops
# over PyTorch's window definitions, written independently of the kernels.
def _pool_ref(x: np.ndarray, k: int, s: int, p: int, fn: str) -> np.ndarray:
    """2-D pooling of the last two dims, square kernel, PyTorch's windows (no ceil mode);
    ``fn``: "max" (values), "argmax" (flat H*W index) or "avg" (padding counted)."""
    h, w = x.shape[-2:]
    oh, ow = (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
    out = np.zeros(x.shape[:-2] + (oh, ow), np.int64 if fn == "argmax" else x.dtype)
    for i in range(oh):
        for j in range(ow):
            rows = [r for r in range(i * s - p, i * s - p + k) if 0 <= r < h]
            cols = [c for c in range(j * s - p, j * s - p + k) if 0 <= c < w]
            win = x[..., rows[0]:rows[-1] + 1, cols[0]:cols[-1] + 1]
            flat = win.reshape(win.shape[:-2] + (-1,))
            if fn == "max":
                out[..., i, j] = flat.max(-1)
            elif fn == "avg":
                out[..., i, j] = flat.sum(-1) / (min(i * s - p + k, h + p) - (i * s - p)) / (
                    min(j * s - p + k, w + p) - (j * s - p))
            else:
                a = flat.argmax(-1)
                out[..., i, j] = (rows[0] + a // len(cols)) * w + cols[0] + a % len(cols)
    return out


def _adaptive_ref(x: np.ndarray, oh: int, ow: int, fn: str) -> np.ndarray:
    h, w = x.shape[-2:]
    out = np.zeros(x.shape[:-2] + (oh, ow), np.int64 if fn == "argmax" else x.dtype)
    for i in range(oh):
        r0, r1 = (i * h) // oh, -(-((i + 1) * h) // oh)
        for j in range(ow):
            c0, c1 = (j * w) // ow, -(-((j + 1) * w) // ow)
            flat = x[..., r0:r1, c0:c1].reshape(x.shape[:-2] + (-1,))
            if fn == "avg":
                out[..., i, j] = flat.mean(-1)
            elif fn == "max":
                out[..., i, j] = flat.max(-1)
            else:
                a = flat.argmax(-1)
                out[..., i, j] = (r0 + a // (c1 - c0)) * w + c0 + a % (c1 - c0)
    return out


def _transpose_ref(fn: Callable, in_shape: tuple) -> Callable:
    """The reference of a linear op's transpose: ``g`` times the transpose of the op's
    matrix, built by applying ``fn`` (NumPy) to each unit input."""
    def ref(g: np.ndarray) -> np.ndarray:
        n = math.prod(in_shape)
        cols = [np.asarray(fn(np.eye(n, dtype=g.dtype)[i].reshape(in_shape))).ravel()
                for i in range(n)]
        return (np.stack(cols) @ g.ravel()).reshape(in_shape).astype(g.dtype)

    return ref


_POOL_IDX = np.array([[[[0, 3], [9, 15]], [[5, 5], [10, 12]]]], np.int64)  # ties: 5 twice


def _pool_scatter_ref(g: np.ndarray) -> np.ndarray:
    out = np.zeros((1, 2, 16), g.dtype)
    for c in range(2):
        np.add.at(out[0, c], _POOL_IDX[0, c].ravel(), g[0, c].ravel())
    return out.reshape(1, 2, 4, 4)


_AVG_ATTRS = dict(kernel_size=(3, 3), stride=(2, 2), padding=(1, 1), ceil_mode=False,
                  count_include_pad=True, divisor_override=None)
_PAD_MODES = {"reflect": "reflect", "replicate": "edge", "circular": "wrap"}


def _pad_ref(pad: tuple, mode: str, value: float = 0.0) -> Callable:
    def ref(x: np.ndarray) -> np.ndarray:
        k = len(pad) // 2
        pairs = [(pad[2 * i], pad[2 * i + 1]) for i in reversed(range(k))]
        pairs = [(0, 0)] * (x.ndim - k) + pairs
        crop = tuple(slice(max(-b, 0), n - max(-a, 0)) for n, (b, a) in zip(x.shape, pairs))
        widths = [(max(b, 0), max(a, 0)) for b, a in pairs]
        if mode == "constant":
            return np.pad(x[crop], widths, constant_values=value)
        return np.pad(x[crop], widths, mode=_PAD_MODES[mode])

    return ref


def _lerp_corners(x: np.ndarray, n: int, axis: int) -> np.ndarray:
    """Linear resampling of ``axis`` to ``n`` points, the end points kept (align_corners)."""
    m = x.shape[axis]
    at = np.linspace(0, m - 1, n)
    out = np.apply_along_axis(lambda r: np.interp(at, np.arange(m), r), axis, x)
    return out.astype(x.dtype)


def _windows_ref(x: np.ndarray, dim: int, size: int, step: int) -> np.ndarray:
    w = np.lib.stride_tricks.sliding_window_view(x, size, axis=dim)
    return np.ascontiguousarray(w[(slice(None),) * dim + (slice(None, None, step),)])


CASES += [
    case("max_pool2d_indices", "k3_s2_p1", lambda x: F.max_pool2d(x, 3, 2, 1,
                                                                  return_indices=True)[1],
         sep(1, 2, 5, 5), ref=lambda x: _pool_ref(x, 3, 2, 1, "argmax"), grad=False),
    case("adaptive_max_pool2d_indices", "3x2", lambda x: F.adaptive_max_pool2d(x, (3, 2),
                                                                              True)[1],
         sep(2, 5, 4), ref=lambda x: _adaptive_ref(x, 3, 2, "argmax"), grad=False),
    case("pool_gather", "max_pool2d", lambda x: F.max_pool2d(x, 3, 2, 1), sep(1, 2, 5, 5),
         ref=lambda x: _pool_ref(x, 3, 2, 1, "max"), node="MaxPool2DWithIndicesBackward0"),
    case("pool_gather", "module_unbatched", dg.nn.MaxPool2d(2), sep(3, 4, 5),
         ref=lambda x: _pool_ref(x, 2, 2, 0, "max")),
    case("pool_gather", "adaptive_max", lambda x: F.adaptive_max_pool2d(x, 2), sep(1, 2, 5, 4),
         ref=lambda x: _adaptive_ref(x, 2, 2, "max"), node="AdaptiveMaxPool2DBackward0"),
    case("pool_scatter", "ties_add_up", lambda g: bind(
        OPS["pool_scatter"], g, _POOL_IDX, size=(4, 4), source="max_pool2d"), real(1, 2, 2, 2),
         ref=_pool_scatter_ref, node="MaxPool2DWithIndicesBackwardBackward0"),
    case("avg_pool2d", "k3_s2_p1", lambda x: F.avg_pool2d(x, 3, 2, 1), real(2, 2, 5, 6),
         ref=lambda x: _pool_ref(x, 3, 2, 1, "avg"), node="AvgPool2DBackward0"),
    case("avg_pool2d", "module", dg.nn.AvgPool2d(2), real(2, 4, 4),
         ref=lambda x: _pool_ref(x, 2, 2, 0, "avg")),
    case("avg_pool2d_backward", "k3_s2_p1", lambda g: bind(
        OPS["avg_pool2d_backward"], g, size=(5, 6), **_AVG_ATTRS), real(1, 1, 3, 3),
         ref=_transpose_ref(lambda x: _pool_ref(x, 3, 2, 1, "avg"), (1, 1, 5, 6))),
    case("adaptive_avg_pool2d", "3x2", lambda x: F.adaptive_avg_pool2d(x, (3, 2)),
         real(2, 2, 5, 4), ref=lambda x: _adaptive_ref(x, 3, 2, "avg"),
         node="AdaptiveAvgPool2DBackward0"),
    case("adaptive_avg_pool2d", "module_none", dg.nn.AdaptiveAvgPool2d((None, 3)),
         real(2, 3, 7), ref=lambda x: _adaptive_ref(x, 3, 3, "avg")),
    case("adaptive_avg_pool2d_backward", "3x2", lambda g: bind(
        OPS["adaptive_avg_pool2d_backward"], g, size=(5, 4), output_size=(3, 2)),
         real(1, 3, 2), ref=_transpose_ref(lambda x: _adaptive_ref(x, 3, 2, "avg"), (1, 5, 4))),
    case("pad", "constant_crop", lambda x: F.pad(x, (1, -1, 0, 2), value=0.5), real(2, 3, 4),
         ref=_pad_ref((1, -1, 0, 2), "constant", 0.5), node="ConstantPadNdBackward0"),
    case("pad", "ints", lambda k: F.pad(k, (2, 1), value=7), ints(2, 3), grad=False,
         ref=_pad_ref((2, 1), "constant", 7)),
    case("pad_index", "reflect_2d", lambda x: F.pad(x, (2, 1, 1, 2), mode="reflect"),
         real(1, 2, 4, 3), ref=_pad_ref((2, 1, 1, 2), "reflect"),
         node="ReflectionPad2DBackward0"),
    case("pad_index", "replicate_1d", lambda x: F.pad(x, (3, 1), mode="replicate"),
         real(2, 4), ref=_pad_ref((3, 1), "replicate"), node="ReplicationPad1DBackward0"),
    case("pad_index", "circular", lambda x: F.pad(x, (2, 3), mode="circular"), real(2, 2, 4),
         ref=_pad_ref((2, 3), "circular")),
    case("pad_index_backward", "reflect", lambda g: bind(
        OPS["pad_index_backward"], g, pad=((2, 3),), mode="reflect", size=(4,)), real(2, 9),
         ref=_transpose_ref(_pad_ref((2, 3), "reflect"), (2, 4))),
    case("unfold", "method", lambda x: x.unfold(1, 3, 2), real(2, 7, 2),
         ref=lambda x: _windows_ref(x, 1, 3, 2), node="UnfoldBackward0"),
    case("unfold", "overlap_last", lambda x: x.unfold(-1, 2, 1), real(3, 4),
         ref=lambda x: _windows_ref(x, 1, 2, 1)),
    case("unfold_backward", "overlap", lambda g: bind(
        OPS["unfold_backward"], g, dimension=0, size=3, step=1, length=5), real(3, 2, 3),
         ref=_transpose_ref(lambda x: _windows_ref(x, 0, 3, 1), (5, 2))),
]

# Compositions over the pooling primitives (1-D pools, resampling, Flatten/Unflatten).
COMPOSITES += [
    case("max_pool1d", "fn", lambda x: F.max_pool1d(x, 3, 2, 1), sep(2, 2, 7),
         ref=lambda x: _pool_ref(x[:, :, None, :], 3, 2, 1, "max")[:, :, 0]),
    case("avg_pool1d", "fn", lambda x: F.avg_pool1d(x, 2), real(2, 6),
         ref=lambda x: x.reshape(2, 3, 2).mean(-1)),
    case("interpolate", "nearest_x2", lambda x: F.interpolate(x, scale_factor=2),
         real(1, 2, 3, 2), ref=lambda x: x.repeat(2, axis=-2).repeat(2, axis=-1)),
    case("interpolate", "bilinear_corners", lambda x: F.interpolate(
        x, size=(3, 5), mode="bilinear", align_corners=True), real(1, 1, 2, 3),
         ref=lambda x: _lerp_corners(_lerp_corners(x, 5, -1), 3, -2)),
    case("upsample", "linear_module", dg.nn.Upsample(size=5, mode="linear", align_corners=True),
         real(2, 1, 3), ref=lambda x: _lerp_corners(x, 5, -1)),
    case("flatten", "module", dg.nn.Flatten(), real(2, 3, 4), ref=lambda x: x.reshape(2, 12)),
    case("unflatten", "module", dg.nn.Unflatten(-1, (2, -1)), real(3, 4),
         ref=lambda x: x.reshape(3, 2, 2)),
]

# ---- shape (dualgraph/ops/shape.py, ops/linalg.py, ops/einsum.py)
CASES += [
    case("diagonal", "method", lambda x: x.diagonal(), real(3, 4), ref=np.diagonal,
         node="DiagonalBackward0"),
    case("diagonal", "offset_dims", lambda x: dg.diagonal(x, -1, 2, 0), real(3, 2, 4),
         ref=lambda x: np.diagonal(x, -1, 2, 0)),
    case("diag_scatter", "diag_embed", lambda x: dg.diag_embed(x, 1), real(2, 3),
         ref=lambda x: np.stack([np.diag(r, 1) for r in x]), node="DiagEmbedBackward0"),
    case("diag_scatter", "diag_1d", lambda x: dg.diag(x, -2), real(3),
         ref=lambda x: np.diag(x, -2)),
    case("flip", "dims", lambda x: x.flip(0, 2), real(2, 3, 2),
         ref=lambda x: np.flip(x, (0, 2)), node="FlipBackward0"),
    case("flip", "fliplr", dg.fliplr, real(2, 3), ref=np.fliplr),
    case("view_dtype", "int32", lambda x: x.view(dg.int32), real(2, 3), grad=False,
         ref=lambda x: x.view(np.int32)),
    case("view_dtype", "to_int16", lambda x: x.float().view(np.int16),
         real(2, 3), grad=False, ref=lambda x: x.astype(np.float32).view(np.int16)),
]


def _repeat_interleave_ref(x: np.ndarray) -> np.ndarray:
    return np.repeat(x, 2, axis=1)


COMPOSITES += [
    case("flatten", "dims", lambda x: x.flatten(1), real(2, 3, 2), ref=lambda x: x.reshape(2, 6)),
    case("unflatten", "minus_one", lambda x: x.unflatten(1, (2, -1)), real(3, 4),
         ref=lambda x: x.reshape(3, 2, 2)),
    case("movedim", "tuple", lambda x: dg.movedim(x, (0, 1), (2, 0)), real(2, 3, 4),
         ref=lambda x: np.moveaxis(x, (0, 1), (2, 0))),
    case("swapaxes", "method", lambda x: x.swapaxes(0, -1), real(2, 3, 4),
         ref=lambda x: np.swapaxes(x, 0, -1)),
    case("split", "sections", lambda x: dg.split(x, [1, 3], 1)[1] * 2.0, real(2, 4),
         ref=lambda x: x[:, 1:] * 2.0),
    case("chunk", "uneven", lambda x: x.chunk(2, 0)[1], real(5, 2), ref=lambda x: x[3:]),
    case("unbind", "stack_back", lambda x: dg.stack(x.unbind(1)[::-1], 1), real(2, 3),
         ref=lambda x: x[:, ::-1]),
    case("narrow", "negative_start", lambda x: x.narrow(1, -3, 2), real(2, 4),
         ref=lambda x: x[:, 1:3]),
    case("tensor_split", "indices", lambda x: dg.tensor_split(x, [1, 3])[2], real(5, 2),
         ref=lambda x: x[3:]),
    case("hstack", "2d", lambda x, y: dg.hstack([x, y]), real(2, 3), real(2, 1),
         ref=lambda x, y: np.hstack([x, y])),
    case("vstack", "1d", lambda x, y: dg.vstack([x, y]), real(3), real(2, 3),
         ref=lambda x, y: np.vstack([x, y])),
    case("dstack", "2d", lambda x, y: dg.dstack([x, y]), real(2, 3), real(2, 3),
         ref=lambda x, y: np.dstack([x, y])),
    case("column_stack", "mixed", lambda x, y: dg.column_stack([x, y]), real(3), real(3, 2),
         ref=lambda x, y: np.column_stack([x, y])),
    case("repeat", "more_dims", lambda x: x.repeat(2, 1, 3), real(2, 3),
         ref=lambda x: np.tile(x, (2, 1, 3))),
    case("tile", "short_dims", lambda x: dg.tile(x, (2,)), real(2, 3),
         ref=lambda x: np.tile(x, (1, 2))),
    case("repeat_interleave", "dim", lambda x: x.repeat_interleave(2, dim=1), real(2, 3),
         ref=_repeat_interleave_ref),
    case("repeat_interleave", "tensor_repeats",
         lambda x: dg.repeat_interleave(x, dg.tensor([1, 0, 3]), dim=1), real(2, 3),
         ref=lambda x: np.repeat(x, [1, 0, 3], axis=1)),
    case("roll", "dims", lambda x: dg.roll(x, (1, -1), (0, 1)), real(3, 4),
         ref=lambda x: np.roll(x, (1, -1), (0, 1))),
    case("roll", "flat", lambda x: x.roll(2), real(2, 3), ref=lambda x: np.roll(x, 2)),
    case("rot90", "k1", lambda x: x.rot90(), real(2, 3), ref=np.rot90),
    case("rot90", "k3_dims", lambda x: dg.rot90(x, -1, (1, 2)), real(2, 3, 4),
         ref=lambda x: np.rot90(x, -1, (1, 2))),
    case("tril", "batched", lambda x: x.tril(1), real(2, 3, 4), ref=lambda x: np.tril(x, 1)),
    case("triu", "negative", lambda x: dg.triu(x, -1), real(4, 3), ref=lambda x: np.triu(x, -1)),
    case("triu_", "inplace", lambda x: (x * 1.0).triu_(), real(3, 3), ref=np.triu),
    case("diag", "2d", lambda x: x.diag(1), real(3, 4), ref=lambda x: np.diag(x, 1)),
    case("trace", "method", lambda x: x.trace(), real(3, 4), ref=np.trace),
    case("meshgrid", "xy", lambda x, y: dg.stack(dg.meshgrid(x, y, indexing="xy")), real(2),
         real(3), ref=lambda x, y: np.stack(np.meshgrid(x, y, indexing="xy"))),
    case("meshgrid", "ij", lambda x, y: math.prod(dg.meshgrid([x, y])), real(2), real(3),
         ref=lambda x, y: math.prod(np.meshgrid(x, y, indexing="ij"))),
    case("einsum", "matmul", lambda a, b: dg.einsum("ij,jk->ik", a, b), real(2, 3), real(3, 4),
         ref=lambda a, b: np.einsum("ij,jk->ik", a, b)),
    case("einsum", "batched_implicit", lambda a, b: dg.einsum("bij,bkj", a, b), real(2, 3, 4),
         real(2, 2, 4), ref=lambda a, b: np.einsum("bij,bkj", a, b)),
    case("einsum", "diagonal_sum", lambda a, b: dg.einsum("ii,i->", a, b), real(3, 3), real(3),
         ref=lambda a, b: np.einsum("ii,i->", a, b)),
    case("einsum", "ellipsis_outer", lambda a, b: dg.einsum("...i,...j->...ij", a, b),
         real(2, 3), real(1, 4), ref=lambda a, b: np.einsum("...i,...j->...ij", a, b)),
    case("diff", "n2_prepend", lambda x, p: dg.diff(x, 2, 0, prepend=p), real(3, 2), real(1, 2),
         ref=lambda x, p: np.diff(x, 2, 0, prepend=p)),
    case("cross", "dim", lambda a, b: dg.cross(a, b, dim=0), real(3, 2), real(3, 1),
         ref=lambda a, b: np.cross(a, b, axis=0)),
    case("outer", "fn", dg.outer, real(3), real(2), ref=np.outer),
    case("kron", "2d", dg.kron, real(2, 3), real(2, 2), ref=np.kron),
]

# ============================================================================ losses
# Losses and attention (dualgraph/ops/softmax.py, ops/loss.py): softmax, log_softmax and
# nll_loss with their backward ops, bound directly so double backward is gradient-checked too.
W3 = np.array([0.5, 2.0, 1.5])  # a constant class weight (nll_loss has no weight gradient)


def _log_softmax_ref(x: np.ndarray, axis: int) -> np.ndarray:
    s = x - x.max(axis=axis, keepdims=True)
    return s - np.log(np.exp(s).sum(axis=axis, keepdims=True))


def ce_ref(x: np.ndarray, t: np.ndarray, w: Any = None, ignore: int = -100,
           reduction: str = "mean", ls: float = 0.0, log_probs: bool = False) -> np.ndarray:
    """PyTorch's cross_entropy (or nll_loss, ``log_probs=True``, with ``ls=0``) in NumPy."""
    dim = 0 if x.ndim == 1 else 1
    c = x.shape[dim]
    lp = np.moveaxis(x if log_probs else _log_softmax_ref(x, dim), dim, -1)
    wc = np.ones(c) if w is None else w
    if t.shape == x.shape:  # class probabilities
        q = np.moveaxis(t, dim, -1) * (1 - ls) + ls / c
        loss = -(lp * q * wc).sum(-1)
        n = loss.size
        out = loss if reduction == "none" else loss.sum() / (n if reduction == "mean" else 1)
        return np.asarray(out).astype(x.dtype)
    keep = t != ignore
    safe = np.where(keep, t, 0)
    wt = wc[safe] * keep
    nll = np.where(keep, -np.take_along_axis(lp, safe[..., None], -1)[..., 0] * wt, 0)
    smooth = np.where(keep, -(lp * wc).sum(-1), 0)
    if reduction == "none":
        out = (1 - ls) * nll + ls / c * smooth
    else:
        out = (1 - ls) * nll.sum() + ls / c * smooth.sum()
        if reduction == "mean":
            out = out / wt.sum()
    return np.asarray(out).astype(x.dtype)


def nll_backward_ref(g: np.ndarray, t: np.ndarray, shape: tuple, w: Any = None,
                     reduction: str = "mean") -> np.ndarray:
    n, c = shape
    wt = (np.ones(c) if w is None else w)[t]
    scale = g / wt.sum() if reduction == "mean" else g
    out = np.zeros(shape, g.dtype)
    out[np.arange(n), t] = -wt * scale
    return out


CASES += [
    case("log_softmax", "dim1", lambda x: dg.log_softmax(x, dim=1), real(2, 3),
         ref=lambda x: _log_softmax_ref(x, 1), node="LogSoftmaxBackward0"),
    case("log_softmax", "middle_3d", lambda x: F.log_softmax(x, 1), real(2, 3, 2),
         ref=lambda x: _log_softmax_ref(x, 1)),
    case("log_softmax", "0d", lambda x: x.log_softmax(0), real(), ref=lambda x: x * 0),
    case("softmax", "dim0", lambda x: dg.softmax(x, 0), real(3, 2),
         ref=lambda x: np.exp(_log_softmax_ref(x, 0)), node="SoftmaxBackward0"),
    case("softmax", "last_3d", lambda x: F.softmax(x, -1), real(2, 2, 3),
         ref=lambda x: np.exp(_log_softmax_ref(x, -1))),
    case("log_softmax_backward", "bind",
         lambda g, y: bind(SM.LOG_SOFTMAX_BACKWARD, g, y, axis=1),
         real(2, 3), real(2, 3),
         ref=lambda g, y: g - np.exp(y) * g.sum(1, keepdims=True),
         node="LogSoftmaxBackwardDataBackward0"),
    case("softmax_backward", "bind",
         lambda g, y: bind(SM.SOFTMAX_BACKWARD, g, y, axis=0), real(3, 2), real(3, 2),
         ref=lambda g, y: y * (g - (g * y).sum(0, keepdims=True)),
         node="SoftmaxBackwardDataBackward0"),
    case("nll_loss", "mean", F.nll_loss, real(4, 3), labels(4),
         ref=lambda x, k: ce_ref(x, k, log_probs=True), node="NllLossBackward0"),
    case("nll_loss", "weight_ignore_sum",
         lambda x, k: F.nll_loss(x, k, W3, ignore_index=1, reduction="sum"), real(5, 3),
         labels(5), ref=lambda x, k: ce_ref(x, k, W3, 1, "sum", log_probs=True)),
    case("nll_loss", "nd_none", lambda x, k: F.nll_loss(x, k, reduction="none"), real(2, 3, 2),
         labels(2, 2), ref=lambda x, k: ce_ref(x, k, reduction="none", log_probs=True),
         node="NllLoss2DBackward0"),
    case("nll_loss", "1d", F.nll_loss, real(3), labels(), ref=lambda x, k: -x[k]),
    case("nll_loss_backward", "bind_mean",
         lambda g, k: bind(LOSS.NLL_LOSS_BACKWARD, g, k, 1.0, shape=(4, 3),
                           ignore_index=-100, reduction="mean"), real(), labels(4),
         ref=lambda g, k: nll_backward_ref(g, k, (4, 3)), node="NllLossBackwardBackward0"),
    case("nll_loss_backward", "bind_none_weight",
         lambda g, k: bind(LOSS.NLL_LOSS_BACKWARD, g, k, W3, shape=(4, 3),
                           ignore_index=-100, reduction="none"), real(4), labels(4),
         ref=lambda g, k: nll_backward_ref(g, k, (4, 3), W3, "none")),
]

COMPOSITES += [
    case("cross_entropy", "weight_smoothing",
         lambda x, k: F.cross_entropy(x, k, W3, label_smoothing=0.2), real(5, 3), labels(5),
         ref=lambda x, k: ce_ref(x, k, W3, ls=0.2)),
    case("cross_entropy", "nd_ignore_none",
         lambda x, k: F.cross_entropy(x, k, ignore_index=2, reduction="none"), real(2, 3, 2),
         labels(2, 2), ref=lambda x, k: ce_ref(x, k, None, 2, "none")),
    case("cross_entropy", "probs_smoothing", lambda x, p: F.cross_entropy(
        x, p, label_smoothing=0.1), real(4, 3), pos(4, 3), ref=lambda x, p: ce_ref(x, p, ls=0.1)),
    case("cross_entropy", "probs_weight_sum_module", lambda x, p: dg.nn.CrossEntropyLoss(
        W3, reduction="sum")(x, p), real(4, 3), pos(4, 3),
         ref=lambda x, p: ce_ref(x, p, W3, reduction="sum")),
    case("cross_entropy", "1d", lambda x, k: F.cross_entropy(x, k[0]), real(3), labels(1),
         ref=lambda x, k: ce_ref(x, k[0])),
    case("nll_loss", "module_weight", lambda x, k: dg.nn.NLLLoss(W3, ignore_index=0)(x, k),
         real(4, 3), labels(4), ref=lambda x, k: ce_ref(x, k, W3, 0, log_probs=True)),
]

# Everyday losses (compositions): `sep` inputs keep finite differences off the kinks.
COMPOSITES += [
    case("l1_loss", "mean", F.l1_loss, sep(2, 3), grid(2, 3),
         ref=lambda x, y: np.abs(x - y).mean()),
    case("smooth_l1_loss", "beta", lambda x, y: F.smooth_l1_loss(x * 0.4, y, beta=0.3),
         real(2, 3), real(2, 3), ref=lambda x, y: np.where(
             np.abs(x * 0.4 - y) < 0.3, 0.5 * (x * 0.4 - y) ** 2 / 0.3,
             np.abs(x * 0.4 - y) - 0.15).mean()),
    case("huber_loss", "delta_none", lambda x, y: F.huber_loss(x, y, "none", 0.8), sep(2, 3),
         grid(2, 3), ref=lambda x, y: np.where(np.abs(x - y) < 0.8, 0.5 * (x - y) ** 2,
                                               0.8 * (np.abs(x - y) - 0.4))),
    case("binary_cross_entropy", "weight", lambda p, t: F.binary_cross_entropy(
        p * 0.2 + 0.5, t * 0.5, W3), real(2, 3), pos(2, 3), ref=lambda p, t: (-(
            t * 0.5 * np.log(p * 0.2 + 0.5) + (1 - t * 0.5) * np.log(0.5 - p * 0.2))
            * W3).mean().astype(p.dtype)),
    case("kl_div", "batchmean", lambda x, t: F.kl_div(x, t, reduction="batchmean"), real(2, 3),
         pos(2, 3), ref=lambda x, t: (t * (np.log(t) - x)).sum() / 2),
    case("cosine_similarity", "dim1", F.cosine_similarity, real(2, 3), real(2, 3),
         ref=lambda a, b: (a * b).sum(1) / np.sqrt((a * a).sum(1) * (b * b).sum(1))),
    case("pairwise_distance", "p2", F.pairwise_distance, real(2, 3), real(2, 3),
         ref=lambda a, b: np.sqrt(((a - b + 1e-6) ** 2).sum(-1))),
]


# A user-defined autograd Function: its node's gradient is the user's backward.
class SoftSign(dg.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x / (1 + x.abs())

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g / (1 + x.abs()) ** 2


CASES += [
    case("custom_function", "softsign", SoftSign.apply, sep(2, 3),
         ref=lambda x: x / (1 + np.abs(x)), node="SoftSignBackward"),
]


# PyTorch surface compositions: gated and rearranging layers, volumetric conv and pooling,
# unpooling, resampling modes, scatter reductions, clip.
def _conv3d_ref(x: np.ndarray, w: np.ndarray, stride: tuple, pad: tuple,
                groups: int = 1) -> np.ndarray:
    x = np.pad(x, ((0, 0), (0, 0)) + tuple((p, p) for p in pad))
    n, c = x.shape[:2]
    o, cg, *k = w.shape
    outs = [(x.shape[2 + i] - k[i]) // stride[i] + 1 for i in range(3)]
    out = np.zeros((n, o) + tuple(outs), x.dtype)
    og = o // groups
    for oc in range(o):
        g = oc // og
        xs = x[:, g * cg:(g + 1) * cg]
        for idx in np.ndindex(*outs):
            sl = tuple(slice(i * s, i * s + kk) for i, s, kk in zip(idx, stride, k))
            out[(slice(None), oc) + idx] = np.einsum("ncdhw,cdhw->n", xs[(Ellipsis,) + sl],
                                                     w[oc])
    return out


def _pool3d_ref(x: np.ndarray, k: int, fn: Callable) -> np.ndarray:
    w = np.lib.stride_tricks.sliding_window_view(x, (k, k, k), axis=(-3, -2, -1))
    w = w[..., ::k, ::k, ::k, :, :, :]
    return fn(w.reshape(w.shape[:-3] + (-1,)), -1).astype(x.dtype)


def _pixel_shuffle_ref(x: np.ndarray, r: int) -> np.ndarray:
    n, c, h, w = x.shape
    out = np.zeros((n, c // (r * r), h * r, w * r), x.dtype)
    for ch in range(c):
        oc, rem = divmod(ch, r * r)
        i, j = divmod(rem, r)
        out[:, oc, i::r, j::r] = x[:, ch]
    return out


def _nearest_exact_ref(x: np.ndarray, n_out: int) -> np.ndarray:
    n_in = x.shape[-1]
    src = np.minimum(np.floor((np.arange(n_out) + 0.5) * n_in / n_out).astype(int), n_in - 1)
    return x[..., src]


def _unpool_ref(v: np.ndarray, i: np.ndarray) -> np.ndarray:
    out = np.zeros(v.shape[:2] + (16,), v.dtype)
    for a in range(v.shape[0]):
        for b in range(v.shape[1]):
            out[a, b, i[a, b].ravel()] = v[a, b].ravel()
    return out.reshape(v.shape[:2] + (4, 4))


_UNPOOL_IDX = np.array([[[[0, 3], [9, 15]], [[5, 6], [10, 12]]]], np.int64)
_SCATTER_IDX = np.array([[0, 1, 0], [1, 1, 0]], np.int64)
_PW = np.array([0.5, 2.0, 3.0])


def _scatter_mul_ref(x: np.ndarray, s: np.ndarray) -> np.ndarray:
    out = x.copy()
    for i in range(2):
        for j in range(3):
            out[_SCATTER_IDX[i, j], j] *= s[i, j]
    return out


def _bce_pos_ref(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    lw = 1 + (_PW - 1) * y
    return ((1 - y) * x + lw * np.logaddexp(0, -x)).mean().astype(x.dtype)


COMPOSITES += [
    case("glu", "dim1", lambda x: F.glu(x, 1), real(2, 4, 3),
         ref=lambda x: x[:, :2] / (1 + np.exp(-x[:, 2:]))),
    case("pixel_shuffle", "r2", lambda x: F.pixel_shuffle(x, 2), real(1, 8, 2, 3),
         ref=lambda x: _pixel_shuffle_ref(x, 2)),
    case("pixel_unshuffle", "r2", lambda x: F.pixel_unshuffle(F.pixel_shuffle(x, 2), 2) * 1,
         real(1, 8, 2, 3), ref=lambda x: x),
    case("bce_with_logits", "pos_weight", lambda x, y: F.binary_cross_entropy_with_logits(
        x, y, pos_weight=dg.tensor(_PW.astype(x.dtype))), real(2, 3), Input((2, 3), "mask"),
         ref=_bce_pos_ref),
    case("clip", "method", lambda x: x.clip(-0.6, 1.1), sep(2, 3),
         ref=lambda x: np.clip(x, -0.6, 1.1)),
    case("conv3d", "stride_pad_groups", lambda x, w: F.conv3d(x, w, None, (2, 1, 1), 1, 1, 2),
         real(1, 4, 3, 4, 3), real(4, 2, 2, 2, 3),
         ref=lambda x, w: _conv3d_ref(x, w, (2, 1, 1), (1, 1, 1), 2)),
    case("conv_transpose3d", "stride2", lambda g: F.conv_transpose3d(
        g, dg.tensor(np.linspace(-1, 1, 36).reshape(2, 1, 2, 3, 3).astype(g.dtype)),
        stride=(2, 1, 2), padding=(0, 1, 1)),
         real(1, 2, 2, 3, 2), ref=_transpose_ref(lambda x: _conv3d_ref(
             x, np.linspace(-1, 1, 36).reshape(2, 1, 2, 3, 3).astype(x.dtype), (2, 1, 2),
             (0, 1, 1)), (1, 1, 4, 3, 3))),
    case("avg_pool3d", "k2", lambda x: F.avg_pool3d(x, 2), real(1, 2, 4, 4, 2),
         ref=lambda x: _pool3d_ref(x, 2, np.mean)),
    case("max_pool3d", "k2", lambda x: F.max_pool3d(x, 2), sep(1, 2, 4, 2, 4),
         ref=lambda x: _pool3d_ref(x, 2, np.max)),
    case("max_unpool2d", "k2", lambda v: F.max_unpool2d(v, dg.tensor(_UNPOOL_IDX), 2),
         real(1, 2, 2, 2), ref=lambda v: _unpool_ref(v, _UNPOOL_IDX)),
    case("interpolate", "nearest_exact", lambda x: F.interpolate(x, size=7,
                                                                 mode="nearest-exact"),
         real(1, 2, 5), ref=lambda x: _nearest_exact_ref(x, 7)),
    case("interpolate", "trilinear_corners", lambda x: F.interpolate(
        x, size=(3, 3, 3), mode="trilinear", align_corners=True), real(1, 1, 2, 2, 2),
         ref=lambda x: _lerp_corners(_lerp_corners(_lerp_corners(x, 3, 2), 3, 3), 3, 4)),
    case("scatter_reduce", "scatter_multiply", lambda x, s: x.scatter(
        0, dg.tensor(_SCATTER_IDX), s, reduce="multiply"), real(2, 3), real(2, 3),
         ref=_scatter_mul_ref),
]



# The scatter family of views written into a copy, PyTorch's top-level spellings of
# nn.functional (enum reductions, positional-only signatures), and linalg compositions.
_IR_IDX = np.array([0, 2, 0], np.int64)


def _written(x: np.ndarray, where: Callable, src: np.ndarray) -> np.ndarray:
    out = x.copy()
    where(out)[...] = src
    return out


def _diagonal_scatter_ref(x: np.ndarray, s: np.ndarray) -> np.ndarray:
    out = x.copy()
    out[np.arange(3), np.arange(3) + 1] = s
    return out


def _as_strided_scatter_ref(x: np.ndarray, s: np.ndarray) -> np.ndarray:
    flat = x.ravel().copy()
    flat[1 + np.arange(2)[:, None] + 3 * np.arange(2)[None, :]] = s
    return flat.reshape(x.shape)


def _index_amax_ref(x: np.ndarray, s: np.ndarray) -> np.ndarray:
    out = x.copy()
    for i, k in enumerate(_IR_IDX):
        out[k] = np.maximum(out[k], s[i])
    return out


def _index_prod_ref(x: np.ndarray, s: np.ndarray) -> np.ndarray:
    out = x.copy()
    for k in set(_IR_IDX.tolist()):
        out[:, k] = np.prod(s[:, _IR_IDX == k], axis=1)
    return out


def _batch_norm_ref(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    return ((x - x.mean(0)) / np.sqrt(x.var(0) + 1e-5) * w + b).astype(x.dtype)


def _conv1d_ref(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Stride 2, padding 1."""
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1)))
    k = w.shape[-1]
    n_out = (xp.shape[-1] - k) // 2 + 1
    return np.stack([np.einsum("nck,ock->no", xp[..., 2 * t:2 * t + k], w)
                     for t in range(n_out)], -1).astype(x.dtype)


def _vander_ref(x: np.ndarray) -> np.ndarray:
    return x[..., None] ** np.arange(4).astype(x.dtype)


COMPOSITES += [
    case("slice_scatter", "dim1_step2", lambda x, s: dg.slice_scatter(x, s, 1, 1, None, 2),
         real(3, 4), real(3, 2), ref=lambda x, s: _written(x, lambda o: o[:, 1::2], s)),
    case("select_scatter", "last_dim", lambda x, s: dg.select_scatter(x, s, -1, 1),
         real(2, 3), real(2), ref=lambda x, s: _written(x, lambda o: o[:, 1], s)),
    case("diagonal_scatter", "offset1_method", lambda x, s: x.diagonal_scatter(s, 1),
         real(3, 4), real(3), ref=_diagonal_scatter_ref),
    case("as_strided_scatter", "overlap_free", lambda x, s: dg.as_strided_scatter(
        x, s, (2, 2), (1, 3), 1), real(3, 4), real(2, 2), ref=_as_strided_scatter_ref),
    case("index_reduce", "amax", lambda x, s: x.index_reduce(0, dg.tensor(_IR_IDX), s,
                                                             "amax"),
         sep(3, 2), grid(3, 2), ref=_index_amax_ref),
    case("index_reduce", "prod_without_self", lambda x, s: dg.index_reduce(
        x, 1, dg.tensor(_IR_IDX), s, "prod", include_self=False), real(2, 3), real(2, 3),
         ref=_index_prod_ref),
    case("prelu", "method", lambda x, w: x.prelu(w), sep(2, 2, 3), real(2),
         ref=lambda x, w: np.where(x > 0, x, w[None, :, None] * x)),
    case("hardshrink", "method", lambda x: x.hardshrink(0.6), sep(2, 3),
         ref=lambda x: np.where(np.abs(x) > 0.6, x, 0).astype(x.dtype)),
    case("fill", "tensor_value", lambda x, v: dg.fill(x, v.sum()) * x, real(2, 3), real(2),
         ref=lambda x, v: (v.sum() * x).astype(x.dtype)),
    case("constant_pad_nd", "value", lambda x: dg.constant_pad_nd(x, (1, 2), 0.5), real(2, 3),
         ref=lambda x: np.pad(x, ((0, 0), (1, 2)), constant_values=0.5)),
    case("margin_ranking_loss", "enum_mean", lambda a, b: dg.margin_ranking_loss(
        a, b, dg.tensor([1.0, -1.0, 1.0], dtype=a.dtype), 0.1, 1), sep(3), grid(3),
         ref=lambda a, b: np.maximum(0, -np.array([1, -1, 1]) * (a - b) + 0.1).mean()
         .astype(a.dtype)),
    case("batch_norm", "top_level_training", lambda x, w, b: dg.batch_norm(
        x, w, b, None, None, True, 0.1, 1e-5, False), real(4, 3), real(3), real(3),
         ref=_batch_norm_ref),
    case("convolution", "1d_stride2_pad1", lambda x, w: dg.convolution(
        x, w, None, [2], [1], [1], False, [0], 1), real(1, 2, 6), real(3, 2, 3),
         ref=_conv1d_ref),
    case("vander", "batched_N4", lambda x: dg.linalg.vander(x, N=4), real(2, 3),
         ref=_vander_ref),
]

# Special functions and square-matrix primitives (ops/special.py, ops/matrix.py).
def _scipy_special(name: str) -> Callable:
    """SciPy's ``name`` as a reference, in the dtype of its last (array) argument."""
    def ref(*args: Any) -> np.ndarray:
        import scipy.special

        return np.asarray(getattr(scipy.special, name)(*args), np.asarray(args[-1]).dtype)
    return ref


def _bessel_forms_ref(x: np.ndarray) -> np.ndarray:
    inner = _scipy_special("i0e")(x * np.asarray(3.0, x.dtype)) + _scipy_special("i1")(x)
    return _scipy_special("i1e")(inner * np.asarray(30.0, x.dtype))


def _well_conditioned(x: Any) -> Any:
    """A batch of 3x3 matrices near 2I: invertible, with a positive determinant."""
    return x * 0.3 + 2.0 * dg.eye(3, dtype=x.dtype)


def _well_conditioned_ref(x: np.ndarray) -> np.ndarray:
    return x * 0.3 + 2.0 * np.eye(3, dtype=x.dtype)


CASES += [
    case("lgamma", "fn", dg.lgamma, pos(2, 3), ref=_scipy_special("gammaln"),
         node="LgammaBackward0"),
    case("lgamma", "method_negative", lambda x: (x - 0.4).lgamma(), pos(4),
         ref=lambda x: _scipy_special("gammaln")(x - np.asarray(0.4, x.dtype))),
    case("polygamma", "digamma", dg.digamma, pos(2, 3), ref=_scipy_special("psi"),
         node="DigammaBackward0"),
    case("polygamma", "trigamma", lambda x: dg.polygamma(1, x), pos(2, 3),
         ref=lambda x: _scipy_special("polygamma")(1, x).astype(x.dtype),
         node="PolygammaBackward0"),
    case("erfc", "fn", dg.erfc, real(2, 3), ref=_scipy_special("erfc"), node="ErfcBackward0"),
    case("erfinv", "fn", lambda x: dg.erfinv(x * 0.4), real(2, 3),
         ref=lambda x: _scipy_special("erfinv")(x * np.asarray(0.4, x.dtype)),
         node="ErfinvBackward0"),
    case("bessel_i", "i0", lambda x: dg.i0(x * 3.0), real(2, 3),
         ref=lambda x: _scipy_special("i0")(x * np.asarray(3.0, x.dtype)), node="I0Backward0"),
    # The output node is the op's: the other forms feed the last one (30x: its asymptotic side).
    case("bessel_i", "scaled_forms",
         lambda x: dg.special.i1e((dg.special.i0e(x * 3.0) + dg.special.i1(x)) * 30.0),
         real(2, 3), ref=_bessel_forms_ref, node="SpecialI1EBackward0"),
    case("inv", "batched", lambda x: dg.linalg.inv(_well_conditioned(x)), real(2, 3, 3),
         ref=lambda x: np.linalg.inv(_well_conditioned_ref(x)), node="LinalgInvExBackward0"),
    case("inv", "method", lambda x: _well_conditioned(x).inverse(), real(3, 3),
         ref=lambda x: np.linalg.inv(_well_conditioned_ref(x))),
    case("det", "batched", lambda x: dg.det(_well_conditioned(x)), real(2, 3, 3),
         ref=lambda x: np.linalg.det(_well_conditioned_ref(x)).astype(x.dtype),
         node="LinalgDetBackward0"),
    case("det", "matrix", lambda x: dg.linalg.det(x), real(3, 3),
         ref=lambda x: np.asarray(np.linalg.det(x), x.dtype)),
]


# ------------------------------------------------------------------ decompositions
# The packed ops (eigh, svd, qr) are called through their functional forms in
# dualgraph/ops/decomp.py, so the case's result is the op's own node; the public
# functions that slice them are tested in tests/ops/test_decomp.py.


def _spd(x: Any) -> Any:
    """``x xᵀ + 3I``: symmetric positive-definite, with distinct eigenvalues for these
    inputs."""
    return x @ x.mT + 3.0 * dg.eye(x.shape[-1], dtype=x.dtype)


def _spd_ref(x: np.ndarray) -> np.ndarray:
    return x @ np.swapaxes(x, -1, -2) + np.asarray(3.0, x.dtype) * np.eye(x.shape[-1],
                                                                          dtype=x.dtype)


def _packed_qr_ref(x: np.ndarray) -> np.ndarray:
    q, r = np.linalg.qr(x)
    return np.concatenate([q, np.concatenate([r, np.zeros((x.shape[0] - r.shape[0],
                                                           r.shape[1]), x.dtype)])], -1)


def _packed_svd_ref(x: np.ndarray) -> np.ndarray:
    u, s, vh = np.linalg.svd(x, full_matrices=False)
    b = x.shape[:-2]
    return np.concatenate([u.reshape(b + (-1,)), s, vh.reshape(b + (-1,))], -1)


def _decomp():
    from dualgraph.ops import decomp as DC

    return DC


CASES += [
    case("cholesky", "batched", lambda x: dg.linalg.cholesky(_spd(x)), real(2, 3, 3),
         ref=lambda x: np.linalg.cholesky(_spd_ref(x)), node="LinalgCholeskyExBackward0"),
    case("cholesky_info", "ex", lambda x: dg.linalg.cholesky_ex(_spd(x)).info, real(2, 3, 3),
         grad=False, ref=lambda x: np.zeros(2, np.int32)),
    case("solve_triangular", "lower", lambda a, b: dg.linalg.solve_triangular(
        _well_conditioned(a), b, upper=False), real(2, 3, 3), real(2, 3, 2),
         ref=lambda a, b: np.linalg.solve(np.tril(_well_conditioned_ref(a)), b),
         node="LinalgSolveTriangularBackward0"),
    case("eigh", "packed", lambda x: _decomp().eigh_packed(_spd(x)), real(2, 3, 3),
         ref=lambda x: np.concatenate([np.linalg.eigh(_spd_ref(x))[0][:, None],
                                       np.linalg.eigh(_spd_ref(x))[1]], 1),
         node="LinalgEighBackward0"),
    case("svd", "packed", lambda x: _decomp().svd_packed(x, False), real(2, 4, 3),
         ref=_packed_svd_ref, node="LinalgSvdBackward0"),
    case("qr", "packed", lambda x: _decomp().qr_packed(x, False), real(4, 3),
         ref=_packed_qr_ref, node="LinalgQrBackward0"),
    case("pinv", "tall", lambda x: dg.linalg.pinv(x), real(2, 4, 3),
         ref=lambda x: np.linalg.pinv(x), node="LinalgPinvBackward0"),
    case("lu", "packed", lambda x: _decomp().lu_packed(x), real(2, 4, 3),
         ref=lambda x: _decomp()._lu_impl(x), node="LinalgLuBackward0"),
    case("matrix_exp", "batched", lambda x: dg.linalg.matrix_exp(x), real(2, 3, 3),
         ref=lambda x: _decomp()._matrix_exp_impl(x), node="LinalgMatrixExpBackward0"),
    case("matrix_exp", "method_scaled", lambda x: (x * 2.0).matrix_exp(), real(3, 3),
         ref=lambda x: _decomp()._matrix_exp_impl(x * np.asarray(2.0, x.dtype))),
]

# ---- recurrences (dualgraph/ops/recurrent.py): one layer and direction over a sequence,
# the workspace (h, c, gates per step) checked against plain per-step NumPy, and the
# backward through time against its own plain NumPy loop.
_RNN_GATES = {"tanh": 1, "relu": 1, "lstm": 4, "gru": 3}


def _rnn(mode: str, reverse: bool = False, lengths: list | None = None,
         proj: bool = False) -> Callable:
    from dualgraph.ops.recurrent import rnn_layer

    def fn(x, h0, *rest):
        rest = list(rest)
        c0 = rest.pop(0) if mode == "lstm" else None
        w_hr = rest.pop(2) if proj else None  # inputs: w_ih, w_hh, [w_hr,] b_ih, b_hh
        lens = None if lengths is None else dg.tensor(np.asarray(lengths, np.int64))
        return rnn_layer(x, h0, c0, *rest, mode=mode, reverse=reverse, lengths=lens,
                         w_hr=w_hr)
    return fn


def _sigmoid_ref(a: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-a))


def _rnn_ref(mode: str, reverse: bool = False, lengths: list | None = None,
             proj: bool = False) -> Callable:
    """Plain NumPy, one sequence and one step at a time. Past its length a sequence keeps
    its state: its rows there hold the state (the final one; reversed, the initial one)
    and zero gates."""
    def ref(x, h0, *rest):
        rest = [a.astype(np.float64) for a in rest]
        c0 = rest.pop(0) if mode == "lstm" else None
        w_hr = rest.pop(2) if proj else None
        w_ih, w_hh, b_ih, b_hh = rest
        dt = x.dtype
        x, h0 = x.astype(np.float64), h0.astype(np.float64)
        t_len, batch = x.shape[:2]
        p = h0.shape[1]
        n = c0.shape[1] if mode == "lstm" else p
        extra = {"tanh": 0, "relu": 0, "lstm": 5, "gru": 4}[mode]
        out = np.zeros((t_len, batch, p + extra * n))
        for b in range(batch):
            steps = range(t_len if lengths is None else lengths[b])
            h, c = h0[b], None if c0 is None else c0[b]
            for t in range(len(steps), t_len):  # past the end: reversed, before the start
                out[t, b, :p] = h if reverse else 0
                if c is not None:
                    out[t, b, p:p + n] = c if reverse else 0
            for t in (steps[::-1] if reverse else steps):
                gi = x[t, b] @ w_ih.T + b_ih
                gh = h @ w_hh.T + b_hh
                if mode in ("tanh", "relu"):
                    h = np.tanh(gi + gh) if mode == "tanh" else np.maximum(gi + gh, 0)
                    out[t, b] = h
                elif mode == "lstm":
                    a = gi + gh
                    i, f, o = (_sigmoid_ref(a[k * n:(k + 1) * n]) for k in (0, 1, 3))
                    g = np.tanh(a[2 * n:3 * n])
                    c = f * c + i * g
                    h = o * np.tanh(c)
                    if w_hr is not None:
                        h = h @ w_hr.T
                    out[t, b] = np.concatenate((h, c, i, f, g, o))
                else:
                    r = _sigmoid_ref(gi[:n] + gh[:n])
                    z = _sigmoid_ref(gi[n:2 * n] + gh[n:2 * n])
                    new = np.tanh(gi[2 * n:] + r * gh[2 * n:])
                    h = (1 - z) * new + z * h
                    out[t, b] = np.concatenate((h, r, z, new, gh[2 * n:]))
            if not reverse:
                for t in range(len(steps), t_len):
                    out[t, b, :p] = h
                    if c is not None:
                        out[t, b, p:p + n] = c
        return out.astype(dt)
    return ref


def _rnn_inputs(mode: str, t: int = 3, b: int = 2, i: int = 3, n: int = 2,
                proj: int = 0) -> tuple:
    k = _RNN_GATES[mode] * n
    p = proj or n
    states = (real(b, p), real(b, n)) if mode == "lstm" else (real(b, n),)
    w_hr = (real(p, n),) if proj else ()
    return (real(t, b, i), *states, real(k, i), real(k, p), *w_hr, real(k), real(k))


def _lstm_backward(g, ws, h0, c0, w_hh):
    from dualgraph.ops.recurrent import layer_backward

    # Detached: its own gradient raises by design (NO_SECOND_DERIVATIVE), so the case
    # checks the forward only and records nothing.
    return layer_backward(*(a.detach() for a in (g, ws, h0, c0, w_hh)), mode="lstm")


def _lstm_backward_ref(g, ws, h0, c0, w_hh):
    """Backward through time of an LSTM from its workspace columns, read as the gates'
    values (the op is defined for any workspace)."""
    t_len, b, _ = ws.shape
    n = h0.shape[1]
    out = np.zeros((t_len, b, 4 * n + 2 * n + n))  # gates, the state read, h0's, c0's
    dh, dc = np.zeros((b, n)), np.zeros((b, n))
    for t in range(t_len - 1, -1, -1):
        cols = [ws[t, :, k * n:(k + 1) * n] for k in range(6)]
        gs = [g[t, :, k * n:(k + 1) * n] for k in range(6)]
        _, c, i, f, cell, o = cols
        c_prev = ws[t - 1, :, n:2 * n] if t else c0
        out[t, :, 4 * n:5 * n] = ws[t - 1, :, :n] if t else h0
        dh = dh + gs[0]
        dc = dc + gs[1] + dh * o * (1 - np.tanh(c) ** 2)
        d = np.concatenate(((dc * cell + gs[2]) * i * (1 - i), (dc * c_prev + gs[3]) * f * (1 - f),
                            (dc * i + gs[4]) * (1 - cell ** 2),
                            (dh * np.tanh(c) + gs[5]) * o * (1 - o)), axis=1)
        out[t, :, :4 * n] = d
        dh, dc = d @ w_hh, dc * f
    out[0, :, 5 * n:6 * n], out[0, :, 6 * n:7 * n] = dh, dc
    return out.astype(ws.dtype)


def _lstm_weight_grads(back, x, ws):
    from dualgraph.ops.recurrent import weight_grads

    # Detached, as the backward's row above: its own gradient raises by design.
    return weight_grads(*(a.detach() for a in (back, x, ws)), mode="lstm", hidden=2)


def _lstm_weight_grads_ref(back, x, ws):
    """W_ih's, W_hh's, b_ih's and b_hh's gradients of an LSTM (hidden 2) from its
    backward's rows (the gates' gradients, then the state each step read)."""
    rows = back.shape[0] * back.shape[1]
    flat = back.reshape(rows, -1).astype(np.float64)
    d, before = flat[:, :8], flat[:, 8:10]
    parts = (d.T @ x.reshape(rows, -1).astype(np.float64), d.T @ before, d.sum(0), d.sum(0))
    return np.concatenate([q.ravel() for q in parts]).astype(x.dtype)


CASES += [
    case("rnn_layer", "tanh", _rnn("tanh"), *_rnn_inputs("tanh"), ref=_rnn_ref("tanh"),
         node="RnnBackward0"),
    case("rnn_layer", "relu_reverse", _rnn("relu", True), *_rnn_inputs("relu"),
         ref=_rnn_ref("relu", True)),
    case("rnn_layer", "lstm", _rnn("lstm"), *_rnn_inputs("lstm"), ref=_rnn_ref("lstm"),
         node="LstmBackward0"),
    case("rnn_layer", "lstm_reverse", _rnn("lstm", True), *_rnn_inputs("lstm", t=2, b=1),
         ref=_rnn_ref("lstm", True)),
    case("rnn_layer", "gru", _rnn("gru"), *_rnn_inputs("gru"), ref=_rnn_ref("gru"),
         node="GruBackward0"),
    case("rnn_layer", "gru_reverse", _rnn("gru", True), *_rnn_inputs("gru", t=2),
         ref=_rnn_ref("gru", True)),
    # Per-sequence lengths (a packed batch): past its end a sequence keeps its state.
    case("rnn_layer", "tanh_lengths", _rnn("tanh", lengths=[3, 1]), *_rnn_inputs("tanh"),
         ref=_rnn_ref("tanh", lengths=[3, 1])),
    case("rnn_layer", "relu_reverse_lengths", _rnn("relu", True, [2, 3]),
         *_rnn_inputs("relu"), ref=_rnn_ref("relu", True, [2, 3])),
    case("rnn_layer", "lstm_lengths", _rnn("lstm", lengths=[3, 2]), *_rnn_inputs("lstm"),
         ref=_rnn_ref("lstm", lengths=[3, 2]), node="LstmBackward0"),
    case("rnn_layer", "lstm_reverse_lengths", _rnn("lstm", True, [1, 3]),
         *_rnn_inputs("lstm"), ref=_rnn_ref("lstm", True, [1, 3])),
    case("rnn_layer", "gru_lengths", _rnn("gru", lengths=[1, 3]), *_rnn_inputs("gru"),
         ref=_rnn_ref("gru", lengths=[1, 3])),
    case("rnn_layer", "gru_reverse_lengths", _rnn("gru", True, [3, 2]), *_rnn_inputs("gru"),
         ref=_rnn_ref("gru", True, [3, 2])),
    # The LSTM with a projection (proj_size): h = W_hr (o * tanh(c)).
    case("rnn_layer_proj", "lstm", _rnn("lstm", proj=True), *_rnn_inputs("lstm", n=3, proj=2),
         ref=_rnn_ref("lstm", proj=True), node="LstmBackward0"),
    # Two steps: over three, float32 compiled and eager round apart by a few 1e-6 here.
    case("rnn_layer_proj", "lstm_reverse_lengths", _rnn("lstm", True, [2, 1], proj=True),
         *_rnn_inputs("lstm", t=2, n=3, proj=2), ref=_rnn_ref("lstm", True, [2, 1], proj=True)),
    # A second derivative through the recurrence raises (NO_SECOND_DERIVATIVE).
    case("rnn_layer_backward", "lstm", _lstm_backward, real(3, 2, 12), real(3, 2, 12),
         real(2, 2), real(2, 2), real(8, 2), ref=_lstm_backward_ref, grad=False),
    case("rnn_layer_weight_grads", "lstm", _lstm_weight_grads, real(3, 2, 14), real(3, 2, 3),
         real(3, 2, 12), ref=_lstm_weight_grads_ref, grad=False),
]

# Backward ops whose own gradient raises a clear NotImplementedError instead of being
# computed (tests/ops/test_recurrent.py checks that it does).
NO_SECOND_DERIVATIVE = ("rnn_layer_backward", "rnn_layer_weight_grads")
