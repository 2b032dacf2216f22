"""Max pooling in the Numba backend: regular windows (no padding or ceil_mode cropping)
build kernel IR with constant loop extents, no window tables, and cropped windows read
theirs from `kir.Table`s; the gather of the pooled
values and the gradient's scatter through the saved argmax are kernel IR for every pool;
compiled equals eager with ties and nan."""

from __future__ import annotations

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.backend import kir
from dualgraph.backend.numba import lowerings
from dualgraph.ir.graph import Node
from dualgraph.nn import functional as F
from dualgraph.ops import OPS
from dualgraph.ops.pool import _pool_args

from .kir_exec import run


def _node(op: str, arrays: list, attrs: dict) -> tuple:
    ins = [Node("input", (), {}, a.shape, a.dtype) for a in arrays]
    shape, dtype = OPS[op].infer(*ins, **attrs)
    node = Node(op, tuple(ins), attrs, tuple(shape), np.dtype(dtype))
    args = [lowerings.Arg(kir.Buffer(f"a{k}", a.shape, a.dtype, kir.ARG, "A"))
            for k, a in enumerate(arrays)]
    return node, lowerings.kernel_lowering(op)(node, args, "r"), args


def _image(shape: tuple) -> np.ndarray:
    rng = np.random.default_rng(0)
    x = rng.integers(-3, 4, shape).astype(np.float32)  # small integers: many ties
    x.reshape(-1)[::17] = np.nan
    return x


@pytest.mark.parametrize(("shape", "k", "s", "d"), [((2, 3, 8, 8), 2, 2, 1),
                                                    ((1, 2, 7, 9), 3, 2, 1),
                                                    ((2, 5, 6), 2, 1, 2),
                                                    ((1, 1, 4, 4), 4, 4, 1)])
def test_regular_max_pool_is_kernel_ir_that_means_the_op(shape, k, s, d):
    x = _image(shape)
    attrs = _pool_args("max_pool2d", x, k, s, 0, d, False)
    _, block, args = _node("max_pool2d_indices", [x], attrs)
    assert isinstance(block, kir.Block), "regular windows need no window tables"
    kir.verify(block, [a.buf for a in args])
    got = run(block, {"a0": x})["r"]
    want = OPS["max_pool2d_indices"].impl(x, **attrs)
    np.testing.assert_array_equal(got.reshape(want.shape), want)

    _, gather, gargs = _node("pool_gather", [x, want], {"source": "max_pool2d"})
    kir.verify(gather, [a.buf for a in gargs])
    g = run(gather, {"a0": x, "a1": want})["r"]
    np.testing.assert_array_equal(g.reshape(want.shape),
                                  OPS["pool_gather"].impl(x, want, source="max_pool2d"))

    grad = np.random.default_rng(1).standard_normal(want.shape).astype(np.float32)
    sattrs = {"source": "max_pool2d", "size": tuple(shape[-2:])}
    _, scatter, sargs = _node("pool_scatter", [grad, want], sattrs)
    kir.verify(scatter, [a.buf for a in sargs])
    got = run(scatter, {"a0": grad, "a1": want})["r"]
    dg.testing.assert_close(got.reshape(shape), OPS["pool_scatter"].impl(grad, want, **sattrs),
                            rtol=1e-6, atol=0, equal_nan=True, check_dtype=False)


def test_padded_pool_reads_its_windows_from_tables():
    x = _image((1, 2, 7, 7))
    attrs = _pool_args("max_pool2d", x, 3, 2, 1, 1, False)
    _, block, args = _node("max_pool2d_indices", [x], attrs)
    kir.verify(block, [a.buf for a in args])
    assert any(isinstance(s, kir.Table) for s in block.stmts)  # cropped windows
    got = run(block, {"a0": x})["r"]
    want = OPS["max_pool2d_indices"].impl(x, **attrs)
    np.testing.assert_array_equal(got.reshape(want.shape), want)


@pytest.mark.parametrize("padding", [0, 1])
def test_compiled_max_pool_and_gradient_equal_eager(padding):
    x = _image((3, 4, 10, 10))

    def loss(x):
        y = F.max_pool2d(x, 3, 2, padding)
        return (y * y).sum()

    compiled = dg.compile(loss, tiered=False)
    xc, xe = dg.tensor(x, requires_grad=True), dg.tensor(x, requires_grad=True)
    lc, le = compiled(xc), loss(xe)
    lc.backward()
    le.backward()
    assert compiled.stats.kernels >= 1
    dg.testing.assert_close(lc.numpy(), le.numpy(), rtol=1e-6, atol=0, equal_nan=True,
                            check_dtype=False)
    dg.testing.assert_close(xc.grad.numpy(), xe.grad.numpy(), rtol=1e-6, atol=0, equal_nan=True,
                            check_dtype=False)
