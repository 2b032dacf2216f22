"""The row kernels of softmax, log_softmax, their backward ops and layer_norm: kernel IR
that means the op (run by the IR's own executor against the NumPy kernels, on rows of
every length class: shorter than the 16 float64 lanes, a multiple of them, with a
remainder; the normalised axis first, in the middle or last), vectorizable float32 passes
in the printed source, and compiled equal to eager with nan and -inf rows."""

from __future__ import annotations

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.backend import kir
from dualgraph.backend.numba import lowerings
from dualgraph.backend.numba.lowerings import norm
from dualgraph.backend.numba.printer import block_lines
from dualgraph.ir.graph import Node
from dualgraph.nn import functional as F
from dualgraph.ops import OPS

from .kir_exec import run

SHAPES = [((3, 5), 1), ((4, 37), 1), ((2, 64), 1), ((6, 3, 16), 1), ((33, 2, 3), 0), ((7,), 0)]


@pytest.fixture(autouse=True)
def _generated_loops(request, monkeypatch):
    """The IR tests check the row loops written into a kernel (kept for kernels whose item
    loops run on threads), not the call of the library's C function."""
    if "compiled" not in request.node.name:
        monkeypatch.setattr(norm, "CALL_C", False)


def _lowered(op: str, arrays: list, attrs: dict) -> tuple:
    ins = [Node("input", (), {}, a.shape, a.dtype) for a in arrays]
    shape, dtype = OPS[op].infer(*ins, **attrs)
    node = Node(op, tuple(ins), attrs, tuple(shape), np.dtype(dtype))
    args = [lowerings.Arg(kir.Buffer(f"a{k}", a.shape, a.dtype, kir.ARG, "A"))
            for k, a in enumerate(arrays)]
    block = lowerings.kernel_lowering(op)(node, args, "r")
    assert isinstance(block, kir.Block), f"{op} must build kernel IR, not source lines"
    kir.verify(block, [a.buf for a in args])
    return node, block


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(("shape", "axis"), SHAPES)
@pytest.mark.parametrize("op", ["softmax", "log_softmax", "softmax_backward",
                                "log_softmax_backward"])
def test_softmax_family_ir_means_the_op(op, shape, axis, dtype):
    rng = np.random.default_rng(len(shape) * 10 + axis)
    x = (rng.standard_normal(shape) * 3).astype(dtype)
    if op.endswith("backward"):
        y = OPS[op.replace("_backward", "")].impl(x, axis=axis)
        arrays = [rng.standard_normal(shape).astype(dtype), y]
    else:
        arrays = [x]
    _, block = _lowered(op, arrays, {"axis": axis})
    got = run(block, {f"a{k}": a for k, a in enumerate(arrays)})["r"]
    want = OPS[op].impl(*arrays, axis=axis)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    dg.testing.assert_close(got.reshape(want.shape), want, rtol=tol, atol=tol, equal_nan=True,
                            check_dtype=False)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(("shape", "ndim"), [((4, 5), 1), ((3, 40), 1), ((2, 3, 8), 2),
                                             ((2, 128), 1)])
def test_layer_norm_ir_means_the_op(shape, ndim, dtype):
    rng = np.random.default_rng(ndim)
    # A mean far from zero against the spread: the two-pass variance keeps it exact.
    x = (rng.standard_normal(shape) + 50).astype(dtype)
    w = rng.standard_normal(shape[-ndim:]).astype(dtype)
    b = rng.standard_normal(shape[-ndim:]).astype(dtype)
    attrs = {"ndim": ndim, "eps": 1e-5}
    _, block = _lowered("layer_norm", [x, w, b], attrs)
    got = run(block, {"a0": x, "a1": w, "a2": b})["r"]
    want = OPS["layer_norm"].impl(x, w, b, **attrs)
    tol = 2e-4 if dtype == np.float32 else 1e-10
    dg.testing.assert_close(got.reshape(want.shape), want, rtol=tol, atol=tol, equal_nan=True,
                            check_dtype=False)


@pytest.mark.parametrize("op", ["softmax", "log_softmax", "softmax_backward",
                                "log_softmax_backward"])
def test_float32_rows_are_vectorizable_passes(op):
    """float32: exp is the inlined vectorizable one, and the row sum goes through the
    float64 lanes (no serial chain of additions) for rows of 16 or more."""
    x = np.zeros((8, 64), np.float32)
    arrays = [x, x] if op.endswith("backward") else [x]
    _, block = _lowered(op, arrays, {"axis": 1})
    source = "\n".join(block_lines(block))
    assert "dgk.fold_lanes" in source
    assert ("dgk.exp_f32" in source) == (op != "softmax_backward")
    assert "np.exp(" not in source and "ascontiguousarray" not in source


def test_compiled_rows_equal_eager_with_nan_and_inf():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((5, 4, 37)).astype(np.float32)
    x[1, 2, 7] = np.nan
    x[3, 1, :] = -np.inf
    x[4, 0, 3] = np.inf
    w = rng.standard_normal(37).astype(np.float32)

    def rows(x, w):
        return (F.softmax(x, -1), F.log_softmax(x, 1), F.layer_norm(x, (37,), w),
                F.softmax(x, 0))

    compiled = dg.compile(rows, tiered=False)
    with dg.no_grad():
        got = compiled(dg.tensor(x), dg.tensor(w))
        want = rows(dg.tensor(x), dg.tensor(w))
    assert compiled.stats.kernels >= 1
    for g, e in zip(got, want):
        dg.testing.assert_close(g.numpy(), e.numpy(), rtol=1e-5, atol=1e-6, equal_nan=True,
                                check_dtype=False)


def test_compiled_row_gradients_equal_eager():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((6, 40)).astype(np.float32)
    g = rng.standard_normal((6, 40)).astype(np.float32)

    def loss(x):
        return (F.softmax(x, -1) * dg.tensor(g)).sum() + (F.log_softmax(x, 0) * 0.5).sum()

    compiled = dg.compile(loss, tiered=False)
    xc, xe = dg.tensor(x, requires_grad=True), dg.tensor(x, requires_grad=True)
    compiled(xc).backward()
    loss(xe).backward()
    assert compiled.stats.kernels >= 1
    dg.testing.assert_close(xc.grad.numpy(), xe.grad.numpy(), rtol=1e-5, atol=1e-6, equal_nan=True,
                            check_dtype=False)
