"""Convolution kernels as kernel IR: the bias is the products' starting value (no pass of
its own), and im2col lays its columns out kernel-offset major, so that the weight gradient
reads them as one (K, N*L) matrix without a copy."""

from __future__ import annotations

import numpy as np

import dualgraph as dg
import dualgraph.nn.functional as F
from dualgraph.backend import kir
from dualgraph.backend.numba import lowerings
from dualgraph.backend.numba.lowerings import conv as conv_lowering
from dualgraph.ir.graph import Node

from .._support.compiled import B3

GEOMETRY = {"stride": (1, 1), "padding": ((1, 1), (1, 1)), "dilation": (1, 1)}


def _args(*nodes: Node) -> list:
    return [lowerings.Arg(kir.Buffer(f"a{i}", n.shape, np.float32, kir.ARG))
            for i, n in enumerate(nodes)]


def test_conv2d_bias_starts_the_products(monkeypatch):
    # The kernel's own loops, as lowered without NumPy's BLAS (with it, the library's
    # routine does the same: tests/backend/test_conv_per_sample.py).
    monkeypatch.setattr(conv_lowering, "HAVE_CBLAS", False)
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
    (call,) = [s for s in block.stmts if isinstance(s, kir.LibCall)]
    assert call.fn == "conv_im2col" and call.outs[0].shape == (27, 4, 64)
    (table,) = [s for s in block.stmts if isinstance(s, kir.Table)]
    assert table.values[-3:] == (1, 0, 1)  # kernel-offset major, no bias, padded: zeros
    unpadded = Node("im2col", (x,), dict(GEOMETRY, kernel_size=(3, 3), stride=(2, 2),
                                         padding=((0, 0), (0, 0))), (4, 27, 9), "float32")
    block = lowerings.kernel_lowering("im2col")(unpadded, _args(x), "c")
    (table,) = [s for s in block.stmts if isinstance(s, kir.Table)]
    assert table.values[-1] == 0  # every column element is written: no zeros first


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
