"""The window loops a convolution is lowered to without NumPy's BLAS carry their range
computations and row tests only where some window reaches into the padding: without
padding every column range and row is known when the kernel is lowered, and the
generated nest is that much shorter. (With NumPy's BLAS the library's compiled routine
gathers the windows: tests/backend/test_conv_per_sample.py.)"""

from __future__ import annotations

import numpy as np
import pytest

from dualgraph.backend import kir
from dualgraph.backend.numba import lowerings
from dualgraph.backend.numba.lowerings import conv as conv_lowering
from dualgraph.ir.graph import Node


@pytest.fixture(autouse=True)
def no_cblas(monkeypatch):
    monkeypatch.setattr(conv_lowering, "HAVE_CBLAS", False)


def _conv(padding: tuple, stride: tuple = (1, 1)) -> kir.Block:
    x = Node("input", (), {}, (2, 3, 9, 8), "float32")
    w = Node("input", (), {}, (4, 3, 3, 3), "float32")
    (pt, pb), (pl, pr) = padding
    oh = (9 + pt + pb - 3) // stride[0] + 1
    ow = (8 + pl + pr - 3) // stride[1] + 1
    node = Node("conv2d", (x, w), {"dilation": (1, 1), "padding": padding, "stride": stride,
                                   "groups": 1}, (2, 4, oh, ow), "float32")
    args = [lowerings.Arg(kir.Buffer(f"a{i}", n.shape, np.float32, kir.ARG))
            for i, n in enumerate((x, w))]
    return lowerings.kernel_lowering("conv2d")(node, args, "c")


def _bounds(block: kir.Block) -> tuple[set, int]:
    lets = {s.var.name for s in kir.walk(block.stmts) if isinstance(s, kir.Let)}
    tests = sum(isinstance(s, kir.If) for s in kir.walk(block.stmts))
    return {n for n in lets if n.endswith(("_lo", "_hi"))}, tests


@pytest.mark.parametrize("stride", [(1, 1), (2, 3)])
def test_no_range_or_row_test_without_padding(stride):
    ranges, tests = _bounds(_conv(((0, 0), (0, 0)), stride))
    assert not ranges and tests == 0


def test_padding_keeps_the_range_and_the_row_test():
    assert _bounds(_conv(((1, 1), (1, 1)))) == ({"c_c_lo", "c_c_hi"}, 1)
    # padding only across the rows: the column range is still known
    assert _bounds(_conv(((1, 0), (0, 0)))) == (set(), 1)
    # only across the columns: the rows are all inside
    assert _bounds(_conv(((0, 0), (2, 1)))) == ({"c_c_lo", "c_c_hi"}, 0)
