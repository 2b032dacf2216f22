"""Registry-driven op tests: every op in ``dg.ops.OPS`` through the case table of cases.py.

For each case: the forward equals NumPy in float32 and float64 with NumPy 2's result dtype,
the gradient equals float64 finite differences, each op's ``infer`` rule agrees with what
eager execution produced (forward and backward ops alike), and the tape node carries the
op and PyTorch's node name. Plus: shape errors name both shapes, double backward, and the
tie conventions of PyTorch (split gradients, zero gradient at kinks).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest

import dualgraph as dg
from dualgraph import modes
from dualgraph.nn import functional as F
from dualgraph.ops import OPS
from dualgraph.ops.linalg import addmm
from dualgraph.testing import gradcheck

from .cases import (
    CASES,
    COMPOSITES,
    FLOAT_DTYPES,
    NO_SECOND_DERIVATIVE,
    Input,
    OpCase,
    grid,
    pos,
    real,
    sep,
)

DTYPE_IDS = ["f32", "f64"]
# Forward tolerance against the NumPy reference: a few ulp of each dtype (reductions and
# products may sum in another order, sigmoid uses scipy's expit).
TOL = {np.dtype(np.float32): (2e-6, 1e-6), np.dtype(np.float64): (1e-13, 1e-14)}


def _params(cases: list[OpCase]) -> list:
    return [pytest.param(c, id=c.id) for c in cases]


def _tensors(arrays: list[np.ndarray], requires_grad: bool) -> list[dg.Tensor]:
    return [dg.tensor(a, requires_grad=requires_grad and a.dtype.kind == "f") for a in arrays]


def _rng(case: OpCase) -> np.random.Generator:
    """A generator per case, so a case's data does not depend on which tests ran before."""
    return np.random.default_rng(sum(map(ord, case.id)))


@contextmanager
def recorded_binds() -> Iterator[list]:
    """Record every ``bind`` (op, args, attrs, result) in eager mode, backward included."""
    calls: list = []
    inner = modes.current_mode()

    def process(op: Any, args: tuple, attrs: dict) -> Any:
        out = inner(op, args, attrs)
        calls.append((op, args, attrs, out))
        return out

    modes.push_mode(process)
    try:
        yield calls
    finally:
        modes.pop_mode()


# --------------------------------------------------------------------------- coverage


def test_every_registered_op_has_a_case():
    covered = {c.op for c in CASES}
    missing = sorted(set(OPS) - covered)
    assert not missing, f"registered ops without a case in tests/ops/cases.py: {missing}"
    unknown = sorted(covered - set(OPS))
    assert not unknown, f"cases name ops that are not registered: {unknown}"


def test_every_differentiable_op_has_a_gradient_case():
    checked = {c.op for c in CASES if c.grad} | set(NO_SECOND_DERIVATIVE)
    missing = sorted(n for n, op in OPS.items() if op.differentiable and n not in checked)
    assert not missing, f"differentiable ops without a gradient-checked case: {missing}"
    wrong = sorted({c.id for c in CASES if c.grad and not OPS[c.op].differentiable})
    assert not wrong, f"cases gradient-check non-differentiable ops: {wrong}"


def test_case_ids_are_unique():
    ids = [c.id for c in CASES + COMPOSITES]
    assert len(ids) == len(set(ids))


# ---------------------------------------------------------------------------- forward


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("case", _params(CASES + COMPOSITES))
def test_forward_matches_numpy(case: OpCase, dtype):
    arrays = case.arrays(_rng(case), dtype)
    out = case.fn(*_tensors(arrays, requires_grad=False))
    expected = case.reference(*[a.copy() for a in arrays])
    assert isinstance(out, dg.Tensor)
    # NumPy 2 promotion (Python scalars are weak) decides the result dtype.
    assert out.dtype == expected.dtype, f"dtype {out.dtype}, NumPy says {expected.dtype}"
    assert out.shape == expected.shape
    if expected.dtype.kind == "f":
        rtol, atol = TOL[expected.dtype]
        dg.testing.assert_close(out.numpy(), expected, rtol=rtol, atol=atol, equal_nan=True,
                                check_dtype=False)
    else:
        np.testing.assert_array_equal(out.numpy(), expected)


# --------------------------------------------------------------------------- gradients


@pytest.mark.parametrize("case", _params([c for c in CASES + COMPOSITES if c.grad]))
def test_gradient_matches_finite_differences(case: OpCase):
    arrays = case.arrays(_rng(case), np.float64)
    assert gradcheck(case.fn, *arrays, **case.gradcheck)


@pytest.mark.parametrize("case", _params([c for c in CASES + COMPOSITES if c.grad]))
def test_gradient_has_input_shape_and_dtype(case: OpCase):
    """float32 gradients are float32 (and close to float64 ones on the same values);
    every input's gradient has the input's shape, broadcast dimensions summed back."""
    arrays32 = case.arrays(_rng(case), np.float32)
    grads = {}
    for dtype in FLOAT_DTYPES:
        arrays = [a.astype(dtype) if a.dtype == np.float32 else a for a in arrays32]
        tensors = _tensors(arrays, requires_grad=True)
        out = case.fn(*tensors)
        weights = np.linspace(0.5, 1.5, out.numel()).reshape(out.shape).astype(out.dtype)
        out.backward(dg.tensor(weights))
        for k, t in enumerate(tensors):
            if t.requires_grad:
                assert t.grad is not None, f"input {k} got no gradient"
                assert t.grad.shape == t.shape, f"input {k}"
                assert t.grad.dtype == t.dtype, f"input {k}"
        grads[dtype] = [t.grad.numpy() for t in tensors if t.requires_grad]
    for g32, g64 in zip(grads[np.float32], grads[np.float64]):
        dg.testing.assert_close(g32, g64, rtol=1e-4, atol=1e-5, equal_nan=True, check_dtype=False)


# ------------------------------------------------------------------------- infer rules


@pytest.mark.parametrize("dtype", FLOAT_DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("case", _params(CASES + COMPOSITES))
def test_infer_agrees_with_eager(case: OpCase, dtype):
    """Every op the case binds, forward and backward, has an ``infer`` rule predicting the
    shape and dtype that eager execution produced (tracing relies on ``infer`` alone)."""
    tensors = _tensors(case.arrays(_rng(case), dtype), requires_grad=True)
    with recorded_binds() as calls:
        out = case.fn(*tensors)
        forward_ops = {op.name for op, *_ in calls}
        if out.requires_grad:
            out.backward(dg.tensor(np.ones(out.shape, out.dtype)))
    if case.op in OPS:
        assert case.op in forward_ops, f"the case never binds {case.op!r}"
    for op, args, attrs, result in calls:
        shape, out_dtype = op.infer(*args, **attrs)
        shapes = [tuple(a.shape) if hasattr(a, "shape") else a for a in args]
        assert (tuple(shape), np.dtype(out_dtype)) == (result.shape, result.dtype), (
            f"{op.name}{shapes} {attrs}: infer says {shape} {out_dtype}, eager gave "
            f"{result.shape} {result.dtype}"
        )


# ------------------------------------------------------------------------------- tape


@pytest.mark.parametrize("case", _params(CASES))
def test_tape_node(case: OpCase):
    tensors = _tensors(case.arrays(_rng(case), np.float64), requires_grad=True)
    out = case.fn(*tensors)
    node = out.grad_fn
    if not case.grad:  # comparisons, or no floating input: nothing to record
        assert node is None and not out.requires_grad
        return
    assert out.requires_grad and not out.is_leaf
    assert node.op == case.op
    name = node.name()
    assert isinstance(name, str) and name.isidentifier()
    assert repr(node).startswith(f"<{name} object at 0x")
    if case.node is not None:  # API.md A3 fixes these names exactly
        assert name == case.node
    # One (node, 0) pair per tensor input: its grad_fn, AccumulateGrad or None (constant).
    tensor_inputs = [i for i in node.inputs if isinstance(i, dg.Node)]
    assert len(node.next_functions) == len(tensor_inputs)
    leaves = {id(t) for t in tensors}
    for fn, index in node.next_functions:
        assert index == 0
        if fn is not None and fn.name() == "AccumulateGrad":
            assert id(fn.variable) in leaves


def test_nn_linear_on_2d_input_records_addmm():
    layer = dg.nn.Linear(4, 3)
    out = layer(dg.randn(2, 4))
    assert out.grad_fn.op == "addmm"
    assert out.grad_fn.name() == "AddmmBackward0"


# ------------------------------------------------------------------------ shape errors

def _shape_error_cases() -> list:
    t = dg.ones
    c = t(2, 3) > 0
    rows = [
        ("add", lambda: t(2, 3) + t(4), [(2, 3), (4,)]),
        ("add_rank3", lambda: t(2, 3, 4) + t(3, 1, 5), [(2, 3, 4), (3, 1, 5)]),
        ("mul", lambda: t(2, 3) * t(2), [(2, 3), (2,)]),
        ("where", lambda: dg.where(c, t(3), t(4)), [(2, 3), (3,), (4,)]),
        ("matmul", lambda: t(2, 3) @ t(4, 5), [(2, 3), (4, 5)]),
        ("matmul_batch", lambda: t(2, 2, 3) @ t(3, 3, 4), [(2, 2, 3), (3, 3, 4)]),
        ("matmul_vector", lambda: t(3) @ t(4), [(3,), (4,)]),
        ("addmm_inner", lambda: addmm(t(5), t(2, 3), t(4, 5)), [(2, 3), (4, 5)]),
        ("addmm_bias", lambda: addmm(t(4), t(2, 3), t(3, 5)), [(4,), (2, 5)]),
        # A bias that broadcasts *with* the output but not *to* it (torch.addmm refuses it).
        ("addmm_bias_wider", lambda: addmm(t(2, 5), t(1, 3), t(3, 5)),
         [(2, 5), (1, 5)]),
        ("linear", lambda: F.linear(t(2, 3), t(5, 4), t(5)), [(2, 3), (5, 4)]),
        ("reshape", lambda: t(2, 3).reshape(4, 2), [(2, 3), (4, 2)]),
        ("concatenate", lambda: dg.concatenate([t(2, 3), t(2, 4)]), [(2, 3), (2, 4)]),
        ("concatenate_rank", lambda: dg.concatenate([t(2, 3), t(3)]), [(2, 3), (3,)]),
        ("stack", lambda: dg.stack([t(2, 3), t(3, 2)]), [(2, 3), (3, 2)]),
        ("broadcast_to", lambda: t(2, 3).expand(3, 3), [(2, 3), (3, 3)]),
        ("broadcast_to_rank", lambda: t(2, 3).broadcast_to((3,)), [(2, 3), (3,)]),
    ]
    return [pytest.param(fn, shapes, id=name) for name, fn, shapes in rows]


@pytest.mark.parametrize(("fn", "shapes"), _shape_error_cases())
def test_shape_error_names_both_shapes(fn: Callable, shapes: list):
    with pytest.raises(ValueError) as info:
        fn()
    message = str(info.value)
    for shape in shapes:
        assert str(shape) in message, f"{shape} not in {message!r}"


def _infer_error_cases() -> list:
    """The infer rules themselves raise (tracing never runs the NumPy kernels)."""
    t = dg.ones
    rows = [
        ("add", (t(2, 3), t(4)), {}, [(2, 3), (4,)]),
        ("mul", (t(2, 3), t(2)), {}, [(2, 3), (2,)]),
        ("where", (t(2, 3) > 0, t(3), t(4)), {}, [(2, 3), (3,), (4,)]),
        ("matmul", (t(2, 3), t(4, 5)), {}, [(2, 3), (4, 5)]),
        ("matmul", (t(2, 2, 3), t(3, 3, 4)), {}, [(2, 2, 3), (3, 3, 4)]),
        ("addmm", (t(5), t(2, 3), t(4, 5)), {}, [(2, 3), (4, 5)]),
        ("addmm", (t(4), t(2, 3), t(3, 5)), {}, [(4,), (2, 5)]),
        ("addmm", (t(2, 5), t(1, 3), t(3, 5)), {}, [(2, 5), (1, 5)]),
        ("reshape", (t(2, 3),), {"shape": (4, 2)}, [(2, 3), (4, 2)]),
        ("concatenate", (t(2, 3), t(2, 4)), {"axis": 0}, [(2, 3), (2, 4)]),
        ("stack", (t(2, 3), t(3, 2)), {"axis": 0}, [(2, 3), (3, 2)]),
        ("broadcast_to", (t(2, 3),), {"shape": (3, 3)}, [(2, 3), (3, 3)]),
    ]
    return [pytest.param(name, args, attrs, shapes, id=f"{name}-{i}")
            for i, (name, args, attrs, shapes) in enumerate(rows)]


@pytest.mark.parametrize(("name", "args", "attrs", "shapes"), _infer_error_cases())
def test_infer_rule_raises_value_error_naming_shapes(name: str, args: tuple, attrs: dict,
                                                     shapes: list):
    with pytest.raises(ValueError) as info:
        OPS[name].infer(*args, **attrs)
    message = str(info.value)
    for shape in shapes:
        assert str(shape) in message, f"{shape} not in {message!r}"


# --------------------------------------------------------------------- double backward


def _first_gradient(f: Callable) -> Callable:
    """The gradient of scalar ``f`` w.r.t. all its inputs, flattened into one tensor and
    recorded (create_graph=True), so gradcheck differentiates it a second time."""

    def gradient(*xs: dg.Tensor) -> dg.Tensor:
        xs = tuple(x if x.requires_grad else x.detach().requires_grad_(True) for x in xs)
        grads = dg.grad(f(*xs), xs, create_graph=True)
        return dg.concatenate([g.reshape(-1) for g in grads])

    return gradient


SECOND_ORDER = [
    ("mul", lambda x, y: (x * y * y).sum(), real(2, 3), real(3)),
    ("div", lambda x, y: (x / y).sum(), real(2, 3), pos(3)),
    ("pow", lambda x, y: (x ** y).sum(), pos(2, 3), real(3)),
    ("pow_literal", lambda x: (x ** 3.0 + 2.0 ** x).sum(), real(4)),
    ("exp_log", lambda x: (dg.exp(x) * dg.log(x)).sum(), pos(2, 3)),
    ("tanh_sigmoid", lambda x: (dg.tanh(x) * dg.sigmoid(x)).sum(), real(2, 3)),
    ("sqrt", lambda x: dg.sqrt(x).sum(), pos(4)),
    ("sin_cos", lambda x, y: (dg.sin(x) * dg.cos(y)).sum(), real(3), real(3)),
    ("relu_abs", lambda x: (dg.relu(x) * dg.abs(x) * x).sum(), sep(2, 3)),
    ("maximum_minimum", lambda x, y: (dg.maximum(x, y) * dg.minimum(x, y) ** 2).sum(),
     sep(2, 3), grid(3)),
    ("where", lambda x, y: (dg.where(x > y, x * x, y * x)).sum(), real(2, 3), real(3)),
    ("matmul", lambda a, b: ((a @ b) ** 2).sum(), real(2, 3), real(3, 2)),
    ("matmul_batched", lambda a, b: ((a @ b) ** 2).sum(), real(2, 2, 3), real(3)),
    ("addmm", lambda b, x, w: (F.linear(x, w, b) ** 2).mean(), real(3), real(2, 4), real(3, 4)),
    ("getitem_scatter", lambda x: (x[1:, None, 0] ** 3).sum(), real(3, 4)),
    ("shape_ops", lambda x, y: (dg.stack([x.T, y.expand(3, 2)]).reshape(-1)[::2] ** 3).sum(),
     real(2, 3), real(2)),
    ("concatenate", lambda x, y: (dg.concatenate([x * x, y], 0) ** 2).sum(), real(2, 3),
     real(1, 3)),
    ("mean_max", lambda x: (x.mean(axis=0) * x.amax(axis=1, keepdims=True) * x).sum(),
     sep(2, 3)),
    ("softmax", lambda x: (F.softmax(x, dim=-1) ** 2).sum(), real(2, 3)),
    ("mixed_f32", lambda x, y: (x.astype(dg.float64) * y).sum() ** 2, real(3), real(3)),
]


@pytest.mark.parametrize(("f", "inputs"), [pytest.param(f, i, id=n) for n, f, *i in SECOND_ORDER])
def test_double_backward_matches_finite_differences(f: Callable, inputs: list[Input]):
    rng = np.random.default_rng(7)
    arrays = [inp.make(rng, np.float64) for inp in inputs]
    assert gradcheck(_first_gradient(f), *arrays)


def test_create_graph_records_the_backward():
    x = dg.tensor([0.5, -1.0, 2.0], dtype=dg.float64, requires_grad=True)
    (g,) = dg.grad((x ** 3).sum(), [x], create_graph=True)
    assert g.requires_grad and g.grad_fn is not None
    dg.testing.assert_close(g.numpy(), 3 * x.numpy() ** 2, rtol=1e-7, atol=0, equal_nan=True,
                            check_dtype=False)
    (gg,) = dg.grad(g.sum(), [x])
    dg.testing.assert_close(gg.numpy(), 6 * x.numpy(), rtol=1e-7, atol=0, equal_nan=True,
                            check_dtype=False)
    (g_plain,) = dg.grad((x ** 3).sum(), [x])
    assert not g_plain.requires_grad and g_plain.grad_fn is None


# ------------------------------------------------------------------- ties and kinks
# PyTorch's conventions where the derivative is not defined.

F64 = dg.float64


def _grads(fn: Callable, *values: Any) -> list[np.ndarray]:
    xs = [dg.tensor(v, dtype=F64, requires_grad=True) for v in values]
    out = fn(*xs)
    out.backward(dg.tensor(np.ones(out.shape)))
    return [x.grad.numpy() for x in xs]


def _torch() -> Any:
    return pytest.importorskip("torch")


INF = np.inf
TIES = [
    # (id, dualgraph fn, the same in PyTorch, inputs, expected gradients)
    ("max_all_two_way", lambda x: x.max(), lambda x: x.max(),
     [[[1.0, 3.0, 3.0], [2.0, 0.0, -1.0]]], [[[0, 0.5, 0.5], [0, 0, 0]]]),
    ("max_all_three_way", lambda x: dg.max(x), lambda x: _torch().max(x),
     [[2.0, 2.0, 2.0]], [[1 / 3, 1 / 3, 1 / 3]]),
    ("max_axis", lambda x: x.amax(axis=1), lambda x: x.amax(dim=1),
     [[[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]]], [[[0, 0.5, 0.5], [1 / 3, 1 / 3, 1 / 3]]]),
    ("max_axis0_keepdims", lambda x: x.amax(axis=0, keepdims=True),
     lambda x: x.amax(dim=0, keepdim=True),
     [[[1.0, 3.0, 5.0], [2.0, 3.0, 4.0]]], [[[0, 0.5, 1], [1, 0.5, 0]]]),
    ("max_axes", lambda x: x.max(axis=(0, 1)), lambda x: x.amax(dim=(0, 1)),
     [[[[1.0], [4.0]], [[4.0], [0.0]]]], [[[[0], [0.5]], [[0.5], [0]]]]),
    ("maximum", dg.maximum, lambda x, y: _torch().maximum(x, y),
     [[1.0, 2.0, 3.0], [1.0, 0.0, 3.0]], [[0.5, 1, 0.5], [0.5, 0, 0.5]]),
    ("minimum", dg.minimum, lambda x, y: _torch().minimum(x, y),
     [[1.0, 2.0, 3.0], [1.0, 0.0, 3.0]], [[0.5, 0, 0.5], [0.5, 1, 0.5]]),
    ("maximum_bcast", dg.maximum, lambda x, y: _torch().maximum(x, y),
     [[[1.0, 2.0], [1.0, 5.0]], [1.0, 2.0]], [[[0.5, 0.5], [0.5, 1]], [1, 0.5]]),
    ("maximum_same_tensor", lambda x: dg.maximum(x, x), lambda x: _torch().maximum(x, x),
     [[1.0, -2.0]], [[1, 1]]),
    # clamp: an element on a bound passes its whole gradient (torch.clamp's rule).
    ("clamp_at_bounds", lambda x: x.clamp(0.0, 1.0), lambda x: x.clamp(0.0, 1.0),
     [[0.0, 1.0, 0.5, 2.0]], [[1, 1, 1, 0]]),
    # max(dim): the gradient goes to the first maximum only (not shared like amax).
    ("max_dim_ties", lambda x: x.max(dim=1).values, lambda x: x.max(dim=1).values,
     [[[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]]], [[[0, 1, 0], [1, 0, 0]]]),
    ("min_dim_ties", lambda x: x.min(dim=0).values, lambda x: x.min(dim=0).values,
     [[[1.0, 3.0], [1.0, 3.0]]], [[[1, 1], [0, 0]]]),
    ("relu_at_zero", dg.relu, lambda x: x.relu(), [[-1.0, 0.0, 2.0]], [[0, 0, 1]]),
    ("abs_at_zero", dg.abs, lambda x: x.abs(), [[-1.0, 0.0, 2.0]], [[-1, 0, 1]]),
    # x ** y at x == 0: 0 for the x-gradient where y == 0 (not 0 * inf); the y-gradient
    # takes the limit 0 where y >= 0 and keeps the formula's -inf where y < 0.
    ("pow_zero_base", lambda x, y: x ** y, lambda x, y: x ** y,
     [[0.0, 0.0, 0.0, 2.0], [0.0, -1.0, 2.0, 0.0]],
     [[0, -INF, 0, 0], [0, -INF, 0, np.log(2.0)]]),
    ("pow_zero_literal_base", lambda y: 0.0 ** y, lambda y: 0.0 ** y,
     [[-1.0, 0.0, 1.5]], [[-INF, 0, 0]]),
]


@pytest.mark.parametrize(("fn", "values", "expected"),
                         [pytest.param(f, v, e, id=n) for n, f, _, v, e in TIES])
def test_ties_and_kinks_follow_pytorch(fn: Callable, values: list, expected: list):
    with np.errstate(divide="ignore", invalid="ignore"):
        grads = _grads(fn, *values)
    for got, want in zip(grads, expected):
        dg.testing.assert_close(got, np.array(want, dtype=np.float64), rtol=1e-15, atol=0,
                                equal_nan=True, check_dtype=False)


@pytest.mark.parametrize(("torch_fn", "values", "expected"),
                         [pytest.param(t, v, e, id=n) for n, _, t, v, e in TIES])
def test_tie_expectations_match_pytorch(torch_fn: Callable, values: list, expected: list):
    """The expected gradients above are what PyTorch computes (skipped without torch)."""
    torch = _torch()
    xs = [torch.tensor(v, dtype=torch.float64, requires_grad=True) for v in values]
    out = torch_fn(*xs)
    out.backward(torch.ones_like(out))
    for x, want in zip(xs, expected):
        dg.testing.assert_close(x.grad.numpy(), np.array(want, dtype=np.float64), rtol=1e-15,
                                atol=0, equal_nan=True, check_dtype=False)


def test_max_tie_gradient_under_create_graph():
    """The split is itself differentiable: recorded with create_graph, same values."""
    x = dg.tensor([[1.0, 3.0, 3.0]], dtype=F64, requires_grad=True)
    (g,) = dg.grad(x.amax(axis=1).sum(), [x], create_graph=True)
    dg.testing.assert_close(g.numpy(), [[0, 0.5, 0.5]], rtol=1e-7, atol=0, equal_nan=True,
                            check_dtype=False)
