"""An ungrouped conv2d is lowered sample by sample: the sample's columns in a (K, L) buffer
that stays in cache, then one product adding to the output started at the bias."""

from __future__ import annotations

import numpy as np
import pytest

import dualgraph as dg
import dualgraph.nn.functional as F
from dualgraph.backend import kir
from dualgraph.backend.numba import lowerings
from dualgraph.ir.graph import Node
from dualgraph.testing import assert_close


def _lowered(padding: tuple, groups: int = 1, bias: bool = True) -> kir.Block:
    x = Node("input", (), {}, (4, 2, 7, 6), "float32")
    w = Node("input", (), {}, (6, 2 // groups, 3, 3), "float32")
    b = Node("input", (), {}, (6,), "float32")
    ins = (x, w, b) if bias else (x, w)
    oh, ow = 7 + sum(padding[0]) - 2, 6 + sum(padding[1]) - 2
    node = Node("conv2d", ins, {"stride": (1, 1), "padding": padding, "dilation": (1, 1),
                                "groups": groups}, (4, 6, oh, ow), "float32")
    args = [lowerings.Arg(kir.Buffer(f"a{i}", n.shape, np.float32, kir.ARG))
            for i, n in enumerate(ins)]
    return lowerings.kernel_lowering("conv2d")(node, args, "r")


def test_columns_of_one_sample_then_its_product():
    block = _lowered(((1, 1), (1, 1)))
    allocs = {s.buf.name: s.buf.shape for s in block.stmts if isinstance(s, kir.Alloc)}
    assert allocs["r_c"] == (2 * 3 * 3, 7 * 6)  # (K, L): one sample's columns
    (samples,) = [s for s in block.stmts if isinstance(s, kir.Loop)]
    assert samples.var.name == "r_n" and samples.extent == 4
    gemms = [s for s in kir.walk(samples.body) if isinstance(s, kir.Gemm)]
    assert len(gemms) == 1 and gemms[0].beta == 1.0
    # zeros for the padding, the windows, the bias start, the product: in that order
    kinds = [type(s).__name__ for s in samples.body]
    assert kinds == ["Loop", "Loop", "Loop", "Gemm"]
    assert "per sample" in kir.format_block(block)


def test_no_zero_fill_without_padding_and_grouped_keeps_the_batch_columns():
    block = _lowered(((0, 0), (0, 0)), bias=False)
    (samples,) = [s for s in block.stmts if isinstance(s, kir.Loop)]
    assert [type(s).__name__ for s in samples.body] == ["Loop", "Loop", "Gemm"]
    assert not [s for s in kir.walk(samples.body) if isinstance(s, kir.Store)
                and isinstance(s.value, kir.Const) and s.buf.name == "r_c"]
    grouped = _lowered(((1, 1), (1, 1)), groups=2)
    allocs = {s.buf.name: s.buf.shape for s in grouped.stmts if isinstance(s, kir.Alloc)}
    assert allocs["r_c"] == (4, 2 * 3 * 3, 7 * 6)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_compiled_equals_eager(dtype):
    """Padding on one side only, stride, dilation, padding wider than the kernel, with and
    without bias, in one compiled function: forward and gradients against eager."""
    rng = np.random.default_rng(1)
    x = dg.tensor(rng.standard_normal((3, 2, 9, 8)).astype(dtype), requires_grad=True)
    w = dg.tensor(rng.standard_normal((4, 2, 3, 2)).astype(dtype), requires_grad=True)
    b = dg.tensor(rng.standard_normal(4).astype(dtype), requires_grad=True)

    def f(x, w, b):
        y1 = F.conv2d(x, w, b, stride=(2, 1), padding=(1, 0))
        y2 = F.conv2d(x, w, dilation=(2, 2), padding=2)
        # padding wider than the kernel and a stride: some kernel offsets read no image
        # column at all in a row of windows (their range is empty, lo > hi)
        y3 = F.conv2d(x, w, b, stride=(3, 4), padding=(4, 5))
        # 'same' with an even dilated kernel on a 2-wide image: the second kernel offset
        # lies wholly in the right padding (its range ends before 0)
        y4 = F.conv2d(x[..., :2], w, padding="same", dilation=(1, 5))
        return ((dg.relu(y1) ** 2).sum() + (y2 * y2.tanh()).sum()
                + (y3 * y3).mean() + (y4 * y4).sum())

    def grads(fn):
        for t in (x, w, b):
            t.grad = None
        loss = fn(x, w, b)
        loss.backward()
        return [loss.numpy()] + [t.grad.numpy().copy() for t in (x, w, b)]

    eager = grads(f)
    compiled = dg.compile(f, tiered=False)
    got = grads(compiled)
    assert compiled.stats.traces == 1
    tol = 2e-5 if dtype == np.float32 else 1e-12
    for a, e in zip(got, eager):
        assert_close(a, e, rtol=tol, atol=tol)
    assert "per sample" in (dg.explain(compiled, x, w, b).numba_source or "")
