"""Helpers shared by the compiler tests."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from dualgraph.ir.graph import Graph
from dualgraph.testing import assert_close

# Tolerances of API.md B3: compiled equals eager within these (relative).
RTOL = {np.dtype(np.float32): 1e-5, np.dtype(np.float64): 1e-10}
# dtype -> assert_close's tolerances for compiled against eager: B3's rtol, and an absolute
# floor of a tenth of it for elements near zero, which carry the rounding error of the
# larger terms summed into them (BLAS vs a loop, float64 accumulators). (The tests' arrays
# reach magnitudes of 0.15 or more, so the floor is no looser than B3's "rtol times the
# largest magnitude"; arrays that span many magnitudes use tests/_support/tolerance.py.)
B3 = {np.dtype(np.float32): {"rtol": 1e-5, "atol": 1e-6},
      np.dtype(np.float64): {"rtol": 1e-10, "atol": 1e-11}}
B3.update({np.dtype(dt): {"rtol": 0.0, "atol": 0.0} for dt in (np.int32, np.int64, np.bool_)})
B3.update({dt.type: v for dt, v in list(B3.items())})  # also indexed by np.float32 etc.


def graph_ops(graph: Graph | None) -> Iterator[str]:
    """Every op name in ``graph``, fused bodies included."""
    if graph is None:
        return
    for n in graph.nodes:
        yield n.op
        body = n.attrs.get("body") if n.op == "fused" else None
        if body is not None:
            yield from graph_ops(body)


def forget_kernel(path: str) -> None:
    """Drop the loaded kernel whose source file is ``path`` from memory, so the next compile
    of its graph goes to the disk cache again."""
    from dualgraph.backend.numba import cache as kernel_cache

    digest = Path(path).stem[len("dg_"):]
    kernel_cache._KERNELS.pop(digest, None)
    sys.modules.pop(f"dualgraph_kernels.dg_{digest}", None)


def compile_and_check(f: Any, x: np.ndarray, expected: np.ndarray) -> tuple:
    """Compile and run ``f(x)``, check the result; its kernel and the warnings it gave."""
    import warnings

    import dualgraph as dg

    compiled = dg.compile(f)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        out = compiled(dg.tensor(x))
    assert_close(out.numpy(), expected, rtol=1e-12, atol=0, equal_nan=True, check_dtype=False)
    assert compiled.stats.kernels == 1
    (entry,) = compiled.entries()
    return entry.kernel, [str(w.message) for w in record]


def adam_mlp_step() -> tuple:
    """A small Tanh MLP with its Adam training step (in-place parameter and state updates),
    seeded: two calls give two identical networks to run eager and compiled."""
    import dualgraph as dg

    dg.manual_seed(0)
    net = dg.nn.Sequential(dg.nn.Linear(8, 16), dg.nn.Tanh(), dg.nn.Linear(16, 16),
                           dg.nn.Tanh(), dg.nn.Linear(16, 3))
    return net, cross_entropy_step(net, dg.optim.Adam(net.parameters(), lr=1e-2))


def cross_entropy_step(net: Any, opt: Any) -> Any:
    """``step(x, t)``: one training step of ``net`` on cross-entropy with ``opt``,
    returning the loss."""
    import dualgraph as dg

    def step(x, t):
        opt.zero_grad()
        loss = dg.nn.functional.cross_entropy(net(x), t)
        loss.backward()
        opt.step()
        return loss

    return step


def on_one_and_two_threads(call: Callable[[], Any]) -> list:
    """``call()`` with compiled kernels on one thread, then on two (one where Numba's pool
    has one), the pool's full size restored after each: a parallel build's answers must not
    depend on the thread count."""
    import numba

    import dualgraph as dg

    out = []
    for threads in (1, min(2, numba.config.NUMBA_NUM_THREADS)):
        dg.set_num_threads(threads)
        try:
            out.append(call())
        finally:
            dg.set_num_threads(numba.config.NUMBA_NUM_THREADS)
    return out
