"""Kernels read their sizes from their arguments, so kernels that differ only in their
sizes are one compiled function.

Generated code prints a size above `printer.KEEP_LITERAL` as a local bound to an
argument's shape at the function's top, and keeps graph lines out of the compiled
module's comments, so a layer at two widths (or an optimizer's update of parameters of
two shapes) prints the same module: one file, one dispatcher, one compile per argument
types. These tests count compiles (dispatchers and their overloads), never time.
"""

from __future__ import annotations

import numpy as np

import dualgraph as dg
from dualgraph.backend import kir
from dualgraph.backend.numba import build, printer
from dualgraph.ir.interpret import interpret
from dualgraph.passes import optimize


def _layer(rows: int, width: int, out: int, seed: int = 0):
    """tanh(x @ W + b) * 2, its row sums and a mean: a product, a fused epilogue and
    reductions, optimized, with arguments."""
    rng = np.random.default_rng(seed)
    x = dg.tensor(rng.standard_normal((rows, width)).astype(np.float32))
    w = dg.tensor(rng.standard_normal((width, out)).astype(np.float32) * 0.1)
    b = dg.tensor(rng.standard_normal(out).astype(np.float32))

    def f(x, w, b):
        h = dg.tanh(x @ w + b) * 2.0
        return h.sum(dim=1), h.mean()

    g = optimize(dg.trace(f, x, w, b))
    return g, [x.numpy(), w.numpy(), b.numpy()]


def _check(kernel, g, arrays) -> None:
    for got, want in zip(kernel(*arrays), interpret(g, *arrays)):
        dg.testing.assert_close(got, want, rtol=1e-5, atol=1e-5, check_dtype=False)


def test_kernels_of_two_sizes_share_one_compiled_function():
    g1, a1 = _layer(40, 24, 36)
    g2, a2 = _layer(72, 48, 20, seed=1)
    k1, k2 = build(g1, segment_lines=0), build(g2, segment_lines=0)
    # The displayed sources differ (their graph lines name the shapes) ...
    assert k1.lowered.source != k2.lowered.source
    # ... the compiled modules do not: one dispatcher, so one compile.
    assert k1.lowered.code == k2.lowered.code
    assert k1.fn is k2.fn
    k1.compile(a1)
    k2.compile(a2)
    assert len(k1.fn.overloads) == 1
    _check(k1, g1, a1)
    _check(k2, g2, a2)


def test_parts_of_a_split_kernel_at_other_sizes_are_shared():
    # The same layer at two sizes, split into parts: the cuts ignore sizes
    # (`partition._structure`), so the second kernel's parts are the first's functions.
    g1, a1 = _layer(40, 24, 36)
    g2, a2 = _layer(72, 48, 20, seed=1)
    k1, k2 = build(g1, segment_lines=4), build(g2, segment_lines=4)
    assert len(k1.parts) > 1
    assert [p.fn for p in k1.parts] == [p.fn for p in k2.parts]
    k1.compile(a1)
    k2.compile(a2)
    assert k2.shared_parts == len(k2.parts)
    _check(k1, g1, a1)
    _check(k2, g2, a2)


def test_small_sizes_stay_literal_and_large_ones_are_read_from_arguments():
    g, _ = _layer(40, 8, 12)
    src = build(g, segment_lines=0).lowered.code
    assert "n0 = a0.shape[0]" in src  # the 40 rows
    assert "n0 = a0.shape[0]  # 40" in build(g, segment_lines=0).lowered.source
    assert "range(40)" not in src
    assert "range(8)" in src or "range(12)" in src  # at most KEEP_LITERAL: literal


def test_sizes_name_argument_dimensions_then_products_in_order_of_use():
    sz = printer.Sizes([("a0", (30, 4, 50)), ("o0", (7, 50))])
    assert sz(4) == "4"  # at most KEEP_LITERAL
    assert sz(50) == "n0"
    assert sz(120) == "n1"  # 30 * 4: a product of consecutive dimensions of a0
    assert sz(7000) == "7000"  # no argument has it
    assert sz(50) == "n0"
    assert sz.defs == ["n0 = a0.shape[2]", "n1 = a0.shape[0] * a0.shape[1]"]
    assert sz.values == [50, 120]
    # A float holding a size (a mean's divisor) reads it too, in its dtype.
    e = kir.Bin("/", kir.Var("s", np.float64), kir.Const(50.0, np.dtype(np.float64)))
    assert printer.expr(e, sz) == "(s / np.float64(n0))"
    assert printer.expr(e) == "(s / np.float64(50.0))"
