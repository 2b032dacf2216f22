"""Convolution kernels as kernel IR: the bias is the products' starting value (no pass of
its own), and im2col lays its columns out kernel-offset major, so that the weight gradient
reads them as one (K, N*L) matrix without a copy; the window loops are one call of a
compiled routine per sample."""

from __future__ import annotations

import numpy as np
import pytest

import dualgraph as dg
import dualgraph.nn.functional as F
from dualgraph.backend import kir
from dualgraph.backend.numba import lowerings
from dualgraph.ir.graph import Node
from dualgraph.ops import OPS

from .._support.compiled import B3
from .kir_exec import run

GEOMETRY = {"stride": (1, 1), "padding": ((1, 1), (1, 1)), "dilation": (1, 1)}


def _args(*nodes: Node) -> list:
    return [lowerings.Arg(kir.Buffer(f"a{i}", n.shape, np.float32, kir.ARG))
            for i, n in enumerate(nodes)]


def test_conv2d_bias_starts_the_products():
    x = Node("input", (), {}, (4, 3, 8, 8), "float32")
    w = Node("input", (), {}, (5, 3, 3, 3), "float32")
    b = Node("input", (), {}, (5,), "float32")
    node = Node("conv2d", (x, w, b), dict(GEOMETRY, groups=1), (4, 5, 8, 8), "float32")
    block = lowerings.kernel_lowering("conv2d")(node, _args(x, w, b), "r")
    gemms = [s for s in kir.walk(block.stmts) if isinstance(s, kir.Gemm)]
    assert len(gemms) == 1 and gemms[0].beta == 1.0  # in the loop over the 4 samples
    (samples,) = [s for s in block.stmts if isinstance(s, kir.Loop)]
    assert samples.extent == 4 and gemms[0] in samples.body
    # the bias is read once per output element, by the store that starts the products
    bias_reads = [s for s in kir.walk(block.stmts) if isinstance(s, kir.Store)
                  and any(isinstance(e, kir.Load) and e.buf.name == "a2"
                          for e in kir.subexprs(s.value))]
    assert len(bias_reads) == 1 and bias_reads[0].combine is None
    assert "conv2d as im2col + GEMM" in kir.format_block(block)


def test_im2col_columns_are_kernel_offset_major():
    x = Node("input", (), {}, (4, 3, 8, 8), "float32")
    node = Node("im2col", (x,), dict(GEOMETRY, kernel_size=(3, 3)), (4, 27, 64), "float32")
    block = lowerings.kernel_lowering("im2col")(node, _args(x), "c")
    allocs = [s.buf for s in block.stmts if isinstance(s, kir.Alloc)]
    assert [a.shape for a in allocs] == [(27, 4, 64)]
    view = block.stmts[-1]
    assert isinstance(view, kir.View) and view.how == "transpose" and view.arg == (1, 0, 2)
    assert block.result.shape == (4, 27, 64) and block.result.layout == "A"
    # one routine call per sample, writing that sample's columns at block n of the store
    (samples,) = [s for s in block.stmts if isinstance(s, kir.Loop)]
    (call,) = samples.body
    assert samples.extent == 4 and isinstance(call, kir.LibCall) and call.fn == "im2col"
    assert call.outs == (allocs[0],) and call.args[1] == samples.var


@pytest.mark.parametrize("geometry", [
    GEOMETRY,
    {"stride": (2, 1), "padding": ((0, 0), (0, 0)), "dilation": (1, 2)},
    # padding wider than the kernel: rows and columns of windows wholly in the padding
    {"stride": (3, 2), "padding": ((4, 4), (3, 3)), "dilation": (1, 1)},
])
def test_im2col_and_col2im_routines_mean_the_ops(geometry):
    """The kernel IR (the routines run as Python) against the NumPy kernels: padding
    written as zeros, col2im adding in the same order (exactly equal)."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 8, 7)).astype(np.float32)
    attrs = dict(geometry, kernel_size=(3, 2))
    shape, _ = OPS["im2col"].infer(x, **attrs)
    node = Node("im2col", (Node("input", (), {}, x.shape, "float32"),), attrs, shape,
                "float32")
    got = run(lowerings.kernel_lowering("im2col")(node, _args(node.inputs[0]), "c"),
              {"a0": x})["c"]
    np.testing.assert_array_equal(got, OPS["im2col"].impl(x, **attrs))

    cols = rng.standard_normal(shape).astype(np.float32)
    fold = dict(attrs, output_size=(8, 7))
    node = Node("col2im", (Node("input", (), {}, shape, "float32"),), fold, x.shape,
                "float32")
    got = run(lowerings.kernel_lowering("col2im")(node, _args(node.inputs[0]), "f"),
              {"a0": cols})["f"]
    np.testing.assert_array_equal(got, OPS["col2im"].impl(cols, **fold))


def conv_step(x, w, b):
    return (F.conv2d(x, w, b, padding=1).relu().sum()
            + F.conv2d(x, w, b, stride=2).tanh().sum())


def test_conv_gradients_compiled_equal_eager():
    rng = np.random.default_rng(3)
    arrays = (rng.standard_normal((4, 3, 8, 8)), rng.standard_normal((5, 3, 3, 3)),
              rng.standard_normal(5))
    grads = {}
    for compiled in (False, True):
        ts = [dg.tensor(a.astype(np.float32), requires_grad=True) for a in arrays]
        f = dg.compile(conv_step, tiered=False) if compiled else conv_step
        f(*ts).backward()
        grads[compiled] = [t.grad.numpy() for t in ts]
    for got, want in zip(grads[True], grads[False]):
        dg.testing.assert_close(got, want, equal_nan=True, **B3[want.dtype])
