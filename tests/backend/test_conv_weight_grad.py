"""A convolution's gradients are ops of their own, ``conv2d_weight`` and ``conv2d_input``:
ungrouped and with NumPy's BLAS each runs sample by sample in the library (the sample's
columns, or their gradient, in a (K, L) buffer that stays in cache, and one product per
sample), without the batch's columns or a copy of the gradient; grouped, or without the
library, one product per (sample, group) over the batch's columns."""

from __future__ import annotations

import numpy as np
import pytest

import dualgraph as dg
import dualgraph.nn.functional as F
from dualgraph.backend import kir
from dualgraph.backend.numba import lowerings
from dualgraph.backend.numba.lowerings import conv as conv_lowering
from dualgraph.ir.graph import Node
from dualgraph.ops.conv import conv2d_input, conv2d_weight
from dualgraph.testing import assert_close

from .test_conv_per_sample import _grads

_GEOMETRY = {"stride": (1, 1), "padding": ((1, 1), (1, 1)), "dilation": (1, 1)}


def _lowered(groups: int = 1) -> kir.Block:
    x = Node("input", (), {}, (4, 2, 7, 6), "float32")
    g = Node("input", (), {}, (4, 6, 7, 6), "float32")
    node = Node("conv2d_weight", (x, g), dict(_GEOMETRY, kernel_size=(3, 3), groups=groups),
                (6, 2 // groups, 3, 3), "float32")
    args = [lowerings.Arg(kir.Buffer(f"a{i}", n.shape, np.float32, kir.ARG))
            for i, n in enumerate((x, g))]
    return lowerings.kernel_lowering("conv2d_weight")(node, args, "r")


def _lowered_input(groups: int = 1) -> kir.Block:
    g = Node("input", (), {}, (4, 6, 7, 6), "float32")
    w = Node("input", (), {}, (6, 2 // groups, 3, 3), "float32")
    node = Node("conv2d_input", (g, w), dict(_GEOMETRY, input_size=(7, 6), groups=groups),
                (4, 2, 7, 6), "float32")
    args = [lowerings.Arg(kir.Buffer(f"a{i}", n.shape, np.float32, kir.ARG))
            for i, n in enumerate((g, w))]
    return lowerings.kernel_lowering("conv2d_input")(node, args, "r")


def test_one_library_call_and_no_batch_columns():
    for block, fn in ((_lowered(), "conv_wgrad"), (_lowered_input(), "conv_dgrad")):
        calls = [s for s in kir.walk(block.stmts) if isinstance(s, kir.LibCall)]
        assert [c.fn for c in calls] == [fn] and calls[0].outs[0].name == "r"
        assert [s.buf.name for s in block.stmts if isinstance(s, kir.Alloc)] == ["r"]
        assert not [s for s in kir.walk(block.stmts) if isinstance(s, (kir.Loop, kir.Gemm))]
        assert "per sample" in kir.format_block(block)


def test_grouped_or_without_the_library_one_product_per_sample_and_group(monkeypatch):
    for groups, cblas in ((2, True), (1, False)):
        monkeypatch.setattr(conv_lowering, "HAVE_CBLAS", cblas)
        block = _lowered(groups)
        allocs = {s.buf.name: s.buf.shape for s in block.stmts if isinstance(s, kir.Alloc)}
        assert allocs["r_c"] == (4, 2 * 9, 7 * 6)
        (items,) = [s for s in block.stmts if isinstance(s, kir.Loop) and s.var.name == "r_i"]
        assert items.extent == 4 * groups
        (gemm,) = [s for s in kir.walk(items.body) if isinstance(s, kir.Gemm)]
        assert gemm.tb and gemm.beta == 1.0 and (gemm.m, gemm.n) == (6 // groups, 2 // groups * 9)
        block = _lowered_input(groups)
        allocs = {s.buf.name: s.buf.shape for s in block.stmts if isinstance(s, kir.Alloc)}
        assert allocs["r_cols"] == (4, 2 * 9, 7 * 6)
        (gemm,) = [s for s in kir.walk(block.stmts) if isinstance(s, kir.Gemm)]
        assert gemm.ta and (gemm.m, gemm.n, gemm.k) == (2 // groups * 9, 7 * 6, 6 // groups)
        fns = [s.fn for s in kir.walk(block.stmts) if isinstance(s, kir.LibCall)]
        assert fns == (["conv_col2im"] if cblas else [])


def _conv_net(x, w1, b1, w2, w3):
    """Two convolutions as LeNet has them (padding, then none, a 1-channel input) and a
    grouped strided dilated one."""
    y = dg.relu(F.conv2d(x, w1, b1, padding=2))
    y = F.conv2d(y, w2)
    z = F.conv2d(y, w3, stride=(2, 1), dilation=(1, 2), padding=1, groups=2)
    return (y * y.tanh()).sum() + (z * z).mean()


def _inputs(dtype, rng):
    shapes = [(5, 1, 12, 12), (6, 1, 5, 5), (6,), (4, 6, 3, 3), (6, 2, 2, 2)]
    return [dg.tensor(rng.standard_normal(s).astype(dtype), requires_grad=True)
            for s in shapes]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_compiled_equals_eager_and_runs_the_weight_gradient_op(dtype):
    ts = _inputs(dtype, np.random.default_rng(3))
    eager = _grads(_conv_net, ts)
    compiled = dg.compile(_conv_net, tiered=False)
    got = _grads(compiled, ts)
    assert compiled.stats.traces == 1
    tol = 5e-5 if dtype == np.float32 else 1e-12
    for a, e in zip(got, eager):
        assert_close(a, e, rtol=tol, atol=tol)
    text = dg.explain(compiled, *ts)
    graph = str(text.optimized)
    assert graph.count("conv2d_weight") == 3 and graph.count("conv2d_input") == 3
    assert "im2col" not in graph and "col2im" not in graph
    source = text.numba_source or ""
    if conv_lowering.HAVE_CBLAS:
        assert source.count(f"dgb.conv_wgrad_{np.dtype(dtype).name}(") == 2
        assert source.count(f"dgb.conv_dgrad_{np.dtype(dtype).name}(") == 2
    assert "conv2d_weight as im2col + GEMM (a window of 25 elements, per sample)" in source
    assert "conv2d_input as GEMM + col2im (a window of 54 elements, per sample)" in source


def test_float32_rounding_like_eager_against_float64():
    """The compiled sum runs in another order than eager's (sample by sample): its error
    against float64 is of eager's size."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal((64, 1, 28, 28)).astype(np.float32)
    g = rng.standard_normal((64, 6, 28, 28)).astype(np.float32)
    pad = ((2, 2), (2, 2))
    exact = conv2d_weight(dg.tensor(x.astype(np.float64)), dg.tensor(g.astype(np.float64)),
                          (5, 5), padding=pad).numpy()
    eager = conv2d_weight(dg.tensor(x), dg.tensor(g), (5, 5), padding=pad).numpy()
    compiled = dg.compile(lambda x, g: conv2d_weight(x, g, (5, 5), padding=pad),
                          tiered=False)(dg.tensor(x), dg.tensor(g)).numpy()
    err_eager = np.abs(eager - exact).max()
    err_compiled = np.abs(compiled - exact).max()
    assert err_compiled <= 2 * err_eager + 1e-5 * np.abs(exact).max()
    assert_close(compiled, exact.astype(np.float32), rtol=1e-5, atol=1e-3)


def test_shape_errors():
    with pytest.raises(dg.ShapeError, match="output gradient of shape"):
        conv2d_input(dg.zeros((2, 4, 4, 4)), dg.zeros((4, 3, 3, 3)), (5, 5))
    with pytest.raises(dg.ShapeError, match="does not fit"):
        conv2d_input(dg.zeros((2, 4, 3, 3)), dg.zeros((5, 3, 3, 3)), (5, 5))
    x, g = dg.zeros((2, 3, 5, 5)), dg.zeros((2, 4, 4, 4))
    with pytest.raises(dg.ShapeError, match="output gradient of shape"):
        conv2d_weight(x, g, (3, 3))
    with pytest.raises(dg.ShapeError, match="must divide"):
        conv2d_weight(x, dg.zeros((2, 4, 3, 3)), (3, 3), groups=2)
