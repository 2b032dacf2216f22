"""The window loops of a convolution carry their range computations and row tests only
where some window reaches into the padding: without padding every column range and row
is known when the kernel is lowered, and the generated nest is that much shorter."""

from __future__ import annotations

import numpy as np
import pytest

from dualgraph.backend import kir
from dualgraph.backend.numba import lowerings
from dualgraph.ir.graph import Node


def _im2col(padding: tuple, stride: tuple = (1, 1)) -> kir.Block:
    x = Node("input", (), {}, (2, 3, 9, 8), "float32")
    (pt, pb), (pl, pr) = padding
    oh = (9 + pt + pb - 3) // stride[0] + 1
    ow = (8 + pl + pr - 3) // stride[1] + 1
    node = Node("im2col", (x,), {"kernel_size": (3, 3), "dilation": (1, 1),
                                 "padding": padding, "stride": stride},
                (2, 27, oh * ow), "float32")
    args = [lowerings.Arg(kir.Buffer("a0", x.shape, np.float32, kir.ARG))]
    return lowerings.kernel_lowering("im2col")(node, args, "c")


def _bounds(block: kir.Block) -> tuple[set, int]:
    lets = {s.var.name for s in kir.walk(block.stmts) if isinstance(s, kir.Let)}
    tests = sum(isinstance(s, kir.If) for s in kir.walk(block.stmts))
    return {n for n in lets if n.endswith(("_lo", "_hi"))}, tests


@pytest.mark.parametrize("stride", [(1, 1), (2, 3)])
def test_no_range_or_row_test_without_padding(stride):
    ranges, tests = _bounds(_im2col(((0, 0), (0, 0)), stride))
    assert not ranges and tests == 0


def test_padding_keeps_the_range_and_the_row_test():
    assert _bounds(_im2col(((1, 1), (1, 1)))) == ({"c_t_lo", "c_t_hi"}, 1)
    # padding only across the rows: the column range is still known
    assert _bounds(_im2col(((1, 0), (0, 0)))) == (set(), 1)
    # only across the columns: the rows are all inside
    assert _bounds(_im2col(((0, 0), (2, 1)))) == ({"c_t_lo", "c_t_hi"}, 0)
