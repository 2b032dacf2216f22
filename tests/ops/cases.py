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
    case("maximum", "clamp_min", lambda x: x.clamp(min=-0.5), sep(6),
         ref=lambda x: np.maximum(x, -0.5)),
    case("minimum", "bcast", dg.minimum, grid(2, 1), sep(2, 3), ref=np.minimum),
    case("minimum", "clamp", lambda x: x.clamp(-0.5, 0.5), sep(2, 3),
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
    case("astype", "to_f64", to_f64, real(2, 3), ref=lambda x: x.astype(np.float64)),
    case("astype", "to_f32", to_f32, real(2, 3), ref=lambda x: x.astype(np.float32),
         gradcheck=ROUNDED),
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
    case("mean", "ints_give_f32", lambda k: k.mean(axis=1), ints(2, 3), grad=False,
         ref=lambda k: k.mean(axis=1).astype(np.float32)),
    case("max", "all", lambda x: x.max(), sep(2, 3)),
    case("max", "axis", lambda x: x.max(axis=1), sep(2, 3)),
    case("max", "axes_keepdims", lambda x: x.max(axis=(0, -1), keepdims=True), sep(2, 3, 4)),
    case("max", "fn_dim", lambda x: dg.max(x, dim=0), sep(3, 2),
         ref=lambda x: np.max(x, axis=0)),
    case("max", "0d", lambda x: x.max(), sep()),
    case("max", "0d_dim_negative", lambda x: x.max(dim=-1), sep(), ref=lambda x: x),
    case("max", "ints", lambda k: k.max(axis=1), ints(2, 3), grad=False),
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
