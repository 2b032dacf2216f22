"""A compiled scalar loss and its gradient (`value_and_grad`: forward and backward as one
kernel, the backward seeded with a constant one) run as one pass over the elements: the
reduction's loop computes the shared values as scalars, folds the loss and writes the
gradient in the same iteration, serially and in the chunked ``prange``.

The backward's seed is a constant that stands after the reduction in program order; it
is a kernel parameter, so the gradient's loop may still join the reduction's. A gradient
that reads the reduction's result (through a broadcast of it) cannot join: it waits for
the whole reduction.

Each case compiles one kernel, compares it with eager (value and gradient) and reads its
kernel IR for the loop structure.
"""

from __future__ import annotations

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.backend import kir
from dualgraph.backend.numba.codegen import PARALLEL_MIN_SIZE


def chain(x):
    return (dg.tanh(x * 0.5 + 1) * dg.sigmoid(x) + 0.1 * x ** 2).sum()


def centered(x):
    # The gradient, 2 (x - mean(x)), reads the reduction mean(x) at every element.
    return ((x - x.mean()) ** 2).sum()


def _data(n: int, dtype) -> np.ndarray:
    return np.random.default_rng(n).standard_normal(n).astype(dtype)


def _eager(fn, x: np.ndarray):
    t = dg.tensor(x, requires_grad=True)
    v = fn(t)
    v.backward()
    return v.numpy(), t.grad.numpy()


def _compiled(fn, x: np.ndarray, parallel: bool):
    f = dg.compile(fn, tiered=False, parallel=parallel)
    t = dg.tensor(x, requires_grad=True)
    v = f(t)
    v.backward()
    plan = f.plan_for(t)
    assert plan.joint, "a scalar loss compiles forward and backward as one kernel"
    return v.numpy(), t.grad.numpy(), plan.kernel.lowered.ir


def _element_loops(ir: list, n: int) -> list:
    """The top-level loops that touch arrays of the elements' length (``n``)."""
    out = []
    for s in ir:
        if not isinstance(s, kir.Loop):
            continue
        bufs = {x.buf for t in kir.walk([s]) for e in kir.exprs_of(t)
                for x in kir.subexprs(e) if isinstance(x, kir.Load)}
        bufs |= {t.buf for t in kir.walk([s]) if isinstance(t, kir.Store)}
        if any(b.shape == (n,) for b in bufs):
            out.append(s)
    return out


def _stores(loop: kir.Loop, n: int) -> set:
    return {t.buf.name for t in kir.walk([loop])
            if isinstance(t, kir.Store) and t.buf.shape == (n,)}


def _folds(loop: kir.Loop) -> bool:
    return any(isinstance(t, kir.Accum) or (isinstance(t, kir.LibCall)
                                             and t.fn == "fold_lanes")
               or (isinstance(t, kir.Store) and t.combine) for t in kir.walk([loop]))


_TOL = {np.float32: dict(rtol=2e-5, atol=2e-6), np.float64: dict(rtol=1e-12, atol=1e-12)}

# Odd lengths, not multiples of the lanes, the fold buffer or the chunks; the parallel one
# is long enough for a prange. Both are long enough that constant folding keeps the seed a
# scalar rather than an array of ones (which it folds away).
CASES = [(20_001, False), (PARALLEL_MIN_SIZE + 4_003, True)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n,parallel", CASES)
def test_loss_and_gradient_in_one_pass(n, parallel, dtype):
    x = _data(n, dtype)
    v, g, ir = _compiled(chain, x, parallel)
    ev, eg = _eager(chain, x)
    dg.testing.assert_close(v, ev, **_TOL[dtype])
    dg.testing.assert_close(g, eg, **_TOL[dtype])
    assert g.dtype == dtype
    loops = _element_loops(ir, n)
    # The blocked (or chunked) loop and the tail of the elements past its whole blocks:
    # each folds the loss and writes the gradient, and nothing else of length n is
    # written (tanh and sigmoid are scalars of the iteration, never arrays).
    assert len(loops) == 2, loops
    for loop in loops:
        assert _folds(loop) and _stores(loop, n) == {"o1"}, loop
    assert loops[0].parallel == parallel
    assert not any(s.parallel for s in ir if isinstance(s, kir.Loop) and s is not loops[0])


def test_a_gradient_reading_the_reduction_stays_after_it():
    n = 1_001
    x = _data(n, np.float64)
    v, g, ir = _compiled(centered, x, False)
    ev, eg = _eager(centered, x)
    dg.testing.assert_close(v, ev, rtol=1e-12, atol=1e-12)
    dg.testing.assert_close(g, eg, rtol=1e-12, atol=1e-9)
    # The mean's pass, then the loss's and the gradient's after it: the gradient's loop
    # reads the mean, so it cannot run inside the mean's.
    loops = _element_loops(ir, n)
    mean_loop = next(k for k, s in enumerate(loops) if _folds(s))
    assert not _stores(loops[mean_loop], n), loops[mean_loop]
    assert any("o1" in _stores(s, n) for s in loops[mean_loop + 1:]), loops
