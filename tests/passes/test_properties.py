"""Property tests: random float64 programs (tests/_support/random_programs.py, shared with the fuzz
tests) through the tracer, the passes and the reference interpreter.

For each program: eager == interpreter(traced) == interpreter(optimized) to 1e-12, fusion
groups are convex, and the eager gradients == the interpreter on the optimized forward and
backward graphs to 1e-10. (The fuzz tests run the same programs through every mode with the
looser tolerances that float32 and compiled code need.)
"""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, assume, given, settings

import dualgraph as dg
from dualgraph.passes import optimize
from dualgraph.testing import assert_close

from .._support.graphs import assert_convex
from .._support.random_programs import Program, eager_run, grads_by_leaf, programs
from .._support.tolerance import tolerance


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs(dtypes=(np.float64,)))
def test_eager_traced_optimized_and_gradients_agree(prog: Program):
    fn = prog.function()
    arrays = prog.arrays()
    outs, weights, expected = eager_run(prog, fn, arrays)
    assume(all(np.isfinite(o.numpy()).all() for o in outs))
    assume(all(e is None or np.isfinite(e).all() for e in expected))

    args = [arrays[k] for k in prog.arg_of]
    graph = dg.trace(fn, *[dg.tensor(a, requires_grad=True) for a in args])
    graph.verify()
    assert_convex(graph)
    opt = optimize(graph, verify=True)
    for k, (traced, optimized, out) in enumerate(zip(dg.interpret(graph, *args),
                                                     dg.interpret(opt, *args), outs)):
        e = out.numpy()
        assert_close(traced, e, **tolerance(e, 1e-12), msg=f"traced output {k}")
        assert_close(optimized, e, **tolerance(e, 1e-12), msg=f"optimized output {k}")

    wrt = [i for i, n in enumerate(graph.inputs) if n.dtype.kind == "f"]
    d = dg.differentiate(graph, wrt)
    fwd, bwd = optimize(d.forward, verify=True), optimize(d.backward, verify=True)
    res = dg.interpret(fwd, *args)
    for k, (got, out) in enumerate(zip(res, outs)):
        e = out.numpy()
        assert_close(got, e, **tolerance(e, 1e-12), msg=f"forward with residuals, output {k}")
    cot = [w if w is not None and o.requires_grad else np.zeros(o.shape, o.dtype)
           for o, w in zip(outs, weights)]
    grads = grads_by_leaf(prog, dg.interpret(bwd, *cot, *res[len(outs):]), wrt, arrays)
    for k, (got, e) in enumerate(zip(grads, expected)):
        e = np.zeros_like(arrays[k]) if e is None else e
        assert_close(got, e, **tolerance(e, 1e-10), msg=f"gradient {k}")
