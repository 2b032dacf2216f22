"""An ungrouped conv2d runs sample by sample: the sample's columns in a (K, L) buffer that
stays in cache, then one product adding to the output started at the bias. With NumPy's
BLAS that is one call of the library's compiled routine; without, the same as loops and
a product in the kernel."""

from __future__ import annotations

import numpy as np
import pytest

import dualgraph as dg
import dualgraph.nn.functional as F
from dualgraph.backend import kir
from dualgraph.backend.numba import lowerings
from dualgraph.backend.numba.lowerings import conv as conv_lowering
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


def test_one_library_call_with_the_geometry_in_a_table():
    block = _lowered(((1, 0), (1, 1)))
    calls = [s for s in kir.walk(block.stmts) if isinstance(s, kir.LibCall)]
    assert [c.fn for c in calls] == ["conv_conv2d"] and calls[0].outs[0].name == "r"
    assert not [s for s in kir.walk(block.stmts) if isinstance(s, (kir.Loop, kir.Gemm))]
    (table,) = [s for s in block.stmts if isinstance(s, kir.Table)]
    # kernel, dilation, stride, top and left padding, output size, mode, bias, padded
    assert table.values == (3, 3, 1, 1, 1, 1, 1, 1, 6, 6, 0, 1, 1)
    (table,) = [s for s in _lowered(((0, 0), (0, 0)), bias=False).stmts
                if isinstance(s, kir.Table)]
    assert table.values[-2:] == (0, 0)


@pytest.fixture
def no_cblas(monkeypatch):
    monkeypatch.setattr(conv_lowering, "HAVE_CBLAS", False)


def test_columns_of_one_sample_then_its_product(no_cblas):
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


def test_no_zero_fill_without_padding(no_cblas):
    block = _lowered(((0, 0), (0, 0)), bias=False)
    (samples,) = [s for s in block.stmts if isinstance(s, kir.Loop)]
    assert [type(s).__name__ for s in samples.body] == ["Loop", "Loop", "Gemm"]
    assert not [s for s in kir.walk(samples.body) if isinstance(s, kir.Store)
                and isinstance(s.value, kir.Const) and s.buf.name == "r_c"]


def test_grouped_keeps_the_batch_columns():
    grouped = _lowered(((1, 1), (1, 1)), groups=2)
    allocs = {s.buf.name: s.buf.shape for s in grouped.stmts if isinstance(s, kir.Alloc)}
    assert allocs["r_c"] == (4, 2 * 3 * 3, 7 * 6)
    assert [s.fn for s in kir.walk(grouped.stmts) if isinstance(s, kir.LibCall)] == [
        "conv_im2col"]


def _grads(fn, ts: tuple) -> list:
    """``fn(*ts)``'s value and the gradients of ``ts``."""
    for t in ts:
        t.grad = None
    loss = fn(*ts)
    loss.backward()
    return [loss.numpy()] + [t.grad.numpy().copy() for t in ts]


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

    eager = _grads(f, (x, w, b))
    compiled = dg.compile(f, tiered=False)
    got = _grads(compiled, (x, w, b))
    assert compiled.stats.traces == 1
    tol = 2e-5 if dtype == np.float32 else 1e-12
    for a, e in zip(got, eager):
        assert_close(a, e, rtol=tol, atol=tol)
    assert "per sample" in (dg.explain(compiled, x, w, b).numba_source or "")


def test_a_cold_convolution_compiles_no_helper_and_its_module_registers_the_routines(
        tmp_path):
    """The window copies and per-sample products are C functions built once per install
    (here, before counting) and called by symbol: compiling a kernel with conv2d, its
    gradients (im2col, col2im) and a transposed convolution types none of them, and the
    kernel's module registers them before Numba loads it from the disk cache."""
    from dualgraph.backend.numba import blas, cache

    from .test_compile_helpers import _helpers_compiled

    rng = np.random.default_rng(2)
    x = dg.tensor(rng.standard_normal((2, 3, 6, 5)).astype(np.float32), requires_grad=True)
    w = dg.tensor(rng.standard_normal((4, 3, 3, 3)).astype(np.float32), requires_grad=True)
    wt = dg.tensor(rng.standard_normal((4, 2, 3, 3)).astype(np.float32), requires_grad=True)

    def f(x, w, wt):
        y = F.conv_transpose2d(F.conv2d(x, w, padding=1), wt, stride=2, output_padding=1)
        return (y * y).sum()

    eager = _grads(f, (x, w, wt))
    blas.need_conv("float32")
    with cache.isolated(str(tmp_path)):
        compiled = dg.compile(f, tiered=False)
        got: list = []
        helpers = _helpers_compiled(lambda: got.extend(_grads(compiled, (x, w, wt))))
    assert not [h for h in helpers if "blas." in h], helpers
    for a, e in zip(got, eager):
        assert_close(a, e, rtol=2e-5, atol=2e-5)
    sources = "".join(p.read_text() for p in tmp_path.rglob("*.py"))
    for kind in ("conv2d", "wgrad", "dgrad"):
        assert f"dgb.conv_{kind}_float32(" in sources
        assert f"('conv', '{kind}', 'float32')" in sources
