"""Type promotion is PyTorch's, written once (`dualgraph.ops.broadcast.result_dtype`): every
binary op, in operator and functional spelling, eager, traced and compiled, on mixed
bool/int/float tensors and Python scalars. And the in-place API, written once in the mixin,
behaves the same on eager tensors and tracers."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import dualgraph as dg
from dualgraph import modes
from dualgraph.ops import elementwise as E

B, I64, I32, F32, F64 = "bool", "i64", "i32", "f32", "f64"
# 0-d tensors: PyTorch ranks them between dimensioned tensors and Python scalars.
I64_0D, F32_0D, F64_0D = "i64_0d", "f32_0d", "f64_0d"
DTYPES = {B: dg.bool_, I64: dg.int64, I32: dg.int32, F32: dg.float32, F64: dg.float64,
          I64_0D: dg.int64, F32_0D: dg.float32, F64_0D: dg.float64}
VALUES = {B: [True, False, True], I64: [1, 2, 3], I32: [1, 2, 3],
          F32: [0.5, 1.5, 2.5], F64: [0.5, 1.5, 2.5], I64_0D: 2, F32_0D: 1.5, F64_0D: 1.5}
COND = [True, False, True]

# PyTorch's result dtypes (its documented rule, checked against torch 2.13): (a, b, dtype of
# add/sub/mul/pow/maximum/minimum/where, dtype of div). A string is a tensor of that dtype,
# anything else a Python scalar. Comparisons always give bool.
TABLE = [
    (I64, 2.5, F32, F32),  # a float scalar with an integer tensor: the default float dtype
    (I32, 2.5, F32, F32),
    (B, 2.5, F32, F32),
    (B, 2, I64, F32),  # an int scalar with a bool tensor: int64
    (B, True, B, F32),
    (I32, 2, I32, F32),  # a scalar never widens a tensor of its category
    (I64, True, I64, F32),
    (F32, 2, F32, F32),
    (F32, 2.5, F32, F32),
    (F64, 2.5, F64, F64),
    (F32, True, F32, F32),
    (I64, F32, F32, F32),  # integer and bool tensors never widen a float tensor
    (B, F32, F32, F32),
    (I32, F32, F32, F32),
    (B, I32, I32, F32),
    (I32, I64, I64, F32),  # within a category, the wider dtype
    (F32, F64, F64, F64),
    (I64, F64, F64, F64),
    (I64, I64, I64, F32),
    (B, B, B, F32),
    (2.5, I64, F32, F32),  # scalar first: the reflected operators
    (2, B, I64, F32),
    (2.5, F32, F32, F32),
    (True, I32, I32, F32),
    (F32, F64_0D, F32, F32),  # a 0-d tensor never widens a tensor of its category
    (F64_0D, F32, F32, F32),
    (I32, I64_0D, I32, F32),
    (B, I64_0D, I64, F32),  # of a higher category, the 0-d tensor's own dtype (not f32)
    (I64, F64_0D, F64, F64),
    (I32, F32_0D, F32, F32),
    (F32_0D, F64_0D, F64, F64),  # 0-d tensors alone promote like dimensioned ones
    (I64_0D, 2.5, F32, F32),  # a scalar of a higher category: the default dtype
]


def _is_bool(x: Any) -> bool:
    return x == B or isinstance(x, bool)


def _spellings() -> dict:
    """op -> (result column, [operator or method spelling, functional spelling], skip)."""
    where = (lambda a, b: dg.where(dg.tensor(COND), a, b))
    return {
        "add": (0, [lambda a, b: a + b, E.add], None),
        # PyTorch refuses `-` on bools.
        "sub": (0, [lambda a, b: a - b, E.sub], lambda a, b: _is_bool(a) or _is_bool(b)),
        "mul": (0, [lambda a, b: a * b, E.mul], None),
        "div": (1, [lambda a, b: a / b, E.div], None),
        "pow": (0, [lambda a, b: a ** b, E.pow], lambda a, b: _is_bool(a) and _is_bool(b)),
        "maximum": (0, [_clamp_min, dg.maximum], None),
        "minimum": (0, [_clamp_max, dg.minimum], None),
        "where": (0, [where], None),
        **{c: ("bool", [o, f], None) for c, o, f in [
            ("lt", lambda a, b: a < b, E.lt), ("le", lambda a, b: a <= b, E.le),
            ("gt", lambda a, b: a > b, E.gt), ("ge", lambda a, b: a >= b, E.ge),
            ("eq", lambda a, b: a == b, E.eq), ("ne", lambda a, b: a != b, E.ne)]},
    }


def _clamp_min(a: Any, b: Any) -> Any:
    return a.clamp(min=b) if isinstance(a, dg.ops.mixin.TensorOps) else dg.maximum(a, b)


def _clamp_max(a: Any, b: Any) -> Any:
    return a.clamp(max=b) if isinstance(a, dg.ops.mixin.TensorOps) else dg.minimum(a, b)


def _operand(x: Any) -> Any:
    return dg.tensor(VALUES[x], dtype=DTYPES[x]) if isinstance(x, str) else x


def _reference(op: str, a: Any, b: Any, dtype: np.dtype) -> np.ndarray:
    """NumPy on operands cast to PyTorch's computation dtype first, as PyTorch computes."""
    def arr(x: Any) -> Any:
        return np.asarray(VALUES[x] if isinstance(x, str) else x).astype(dtype)

    ufunc = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.true_divide,
             "pow": np.power, "maximum": np.maximum, "minimum": np.minimum,
             "lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
             "eq": np.equal, "ne": np.not_equal}
    if op == "where":
        return np.where(COND, arr(a), arr(b))
    return np.broadcast_to(ufunc[op](arr(a), arr(b)), (3,))


def _cases() -> list:
    out = []
    for op, (col, fns, skip) in _spellings().items():
        for row in TABLE:
            a, b = row[0], row[1]
            if skip is not None and skip(a, b):
                continue
            expected = B if col == "bool" else row[2 + col]
            compute = row[2] if col == "bool" else expected  # comparisons: in the common dtype
            for k, fn in enumerate(fns):
                out.append(pytest.param(op, fn, a, b, expected, compute,
                                        id=f"{op}-{k}-{a}-{b}"))
    return out


class _Recorded:
    """The op names bound in eager mode, recorded by a plain function pushed as a mode."""

    def __enter__(self) -> list:
        self.ops: list = []
        inner = modes.current_mode()

        def record(op: Any, args: tuple, attrs: dict) -> Any:
            self.ops.append(op.name)
            return inner(op, args, attrs)

        modes.push_mode(record)
        return self.ops

    def __exit__(self, *exc: Any) -> None:
        modes.pop_mode()


@pytest.mark.filterwarnings("ignore:divide by zero", "ignore:invalid value")  # x / False
@pytest.mark.parametrize(("op", "fn", "a", "b", "expected", "compute"), _cases())
def test_binary_ops_promote_like_pytorch_eager_and_traced(op, fn, a, b, expected, compute):
    x, y = _operand(a), _operand(b)
    with _Recorded() as eager_ops:
        out = fn(x, y)
    assert out.dtype == DTYPES[expected]
    # The reference is broadcast to (3,); a 0-d result stands for every element.
    want = _reference(op, a, b, DTYPES[compute])
    dg.testing.assert_close(np.broadcast_to(out.numpy(), want.shape), want, rtol=1e-6, atol=0,
                            equal_nan=True, check_dtype=False)
    # Traced: the same dtype, and the same ops as eager (no cast in one spelling only).
    tensors = [v for v in (x, y) if isinstance(v, dg.Tensor)]

    def traced(*ts: Any) -> Any:
        it = iter(ts)
        return fn(*[next(it) if isinstance(v, dg.Tensor) else v for v in (x, y)])

    graph = dg.trace(traced, *tensors)
    assert graph.outputs[0].dtype == DTYPES[expected]
    assert [n.op for n in graph.nodes if n.op != "const"] == [
        o for o in eager_ops if o != "const"]
    assert "astype" not in eager_ops


def test_operator_and_functional_spellings_give_one_graph():
    i = dg.tensor([1, 2, 3])
    for fn in (lambda t: t * 2.5, lambda t: E.mul(t, 2.5), lambda t: t.mul(2.5)):
        graph = dg.trace(fn, i)
        assert [(n.op, n.dtype) for n in graph.nodes] == [("mul", dg.float32)]


# The compiled check: one function serves every case, so Numba compiles once.
COMPILED = [("mul", I64, 2.5), ("div", I64, 2), ("maximum", I32, 2.5), ("where", I64, 2.5),
            ("add", B, 2), ("mul", I64, F32), ("add", F32, F64), ("pow", I64, 2.5),
            ("lt", I64, 2.5), ("minimum", B, 2.5), ("sub", 2.5, I32)]


def test_compiled_results_promote_like_eager():
    spell = _spellings()
    names = [B, I64, I32, F32, F64]

    def program(*ts: Any) -> tuple:
        env = dict(zip(names, ts))
        pick = (lambda v: env[v] if isinstance(v, str) else v)
        return tuple(spell[op][1][-1](pick(a), pick(b)) for op, a, b in COMPILED)

    args = [_operand(n) for n in names]
    eager = program(*args)
    compiled = dg.compile(program)(*args)
    for (op, a, b), e, c in zip(COMPILED, eager, compiled):
        assert c.dtype == e.dtype, (op, a, b)
        dg.testing.assert_close(c.numpy(), e.numpy(), rtol=1e-6, atol=0, equal_nan=True,
                                check_dtype=False, msg=f"{op} {a} {b}")
    assert [e.dtype for e in eager] == [
        dg.float32, dg.float32, dg.float32, dg.float32, dg.int64, dg.float32, dg.float64,
        dg.float32, dg.bool_, dg.float32, dg.float32]


# ----------------------------------------------------------------- in place, every mode


def test_the_eager_mode_is_a_mode_object():
    mode = modes.current_mode()
    assert isinstance(mode, modes.Mode) and type(mode).__name__ == "EagerMode"


def _both(fn: Any, t: dg.Tensor) -> list:
    """``fn(t)``'s exception text eagerly and while tracing (on a tracer)."""
    texts = []
    for run in (lambda: fn(t.detach() if not t.requires_grad else t),
                lambda: dg.trace(lambda u: fn(u), t)):
        with pytest.raises(RuntimeError) as info:
            run()
        texts.append(str(info.value))
    return texts


@pytest.mark.parametrize("fn", [
    lambda t: t.__iadd__(1.0), lambda t: t.mul_(2.0), lambda t: t.zero_(),
    lambda t: t.copy_(dg.ones(3)),
], ids=["+=", "mul_", "zero_", "copy_"])
def test_inplace_on_a_leaf_requiring_grad_raises_the_same_in_both_modes(fn):
    eager, traced = _both(fn, dg.ones(3, requires_grad=True))
    assert eager == traced
    assert "a leaf Variable that requires grad" in eager


@pytest.mark.parametrize(("fn", "text"), [
    (lambda t: t.__iadd__(2.5), "in-place add: result type float32 can't be cast to int64"),
    (lambda t: t.__itruediv__(2), "in-place div: result type float32 can't be cast to int64"),
    (lambda t: t.add_(dg.ones(2, 3, dtype=dg.int64)),
     "in-place add: output with shape (3,) doesn't match the broadcast shape (2, 3)"),
    (lambda t: t.mul_(dg.ones(4, dtype=dg.int64)),
     "in-place mul: shapes (3,) and (4,) cannot be broadcast together"),
    (lambda t: t.copy_(dg.ones(2, 3)), "copy_: source of shape (2, 3) cannot be broadcast"),
], ids=["cast", "div_cast", "grows", "no_broadcast", "copy_shape"])
def test_inplace_errors_are_the_same_in_both_modes(fn, text):
    eager, traced = _both(fn, dg.tensor([1, 2, 3]))
    assert eager == traced
    assert text in eager


def test_inplace_keeps_the_dtype_eager_traced_and_under_autograd():
    def step(p: Any, g: Any) -> Any:
        p -= g * 0.5  # float64 update into a float32 tensor: cast back, as PyTorch does
        p.mul_(2)
        return p

    g = dg.tensor([1.0, 2.0], dtype=dg.float64)
    eager = step(dg.tensor([1.0, 1.0]), g)
    traced = dg.trace(step, dg.tensor([1.0, 1.0]), g)
    recorded = step(dg.tensor([1.0, 1.0], requires_grad=True) * 1, g)
    assert eager.dtype == traced.outputs[0].dtype == recorded.dtype == dg.float32
    np.testing.assert_array_equal(eager.numpy(), [1.0, 0.0])
    np.testing.assert_array_equal(recorded.detach().numpy(), [1.0, 0.0])
    # The no-grad path and the recorded path run the same kernel: the same bits.
    x = dg.randn(64)
    y = dg.randn(64, dtype=dg.float64)
    a = x * 1
    a /= y
    b = x.detach().requires_grad_() * 1
    b /= y
    np.testing.assert_array_equal(a.numpy(), b.detach().numpy())
