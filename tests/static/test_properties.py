"""Property tests: random programs over the registry's ops and broadcast shapes.

For each program: eager == interpreter(traced) == interpreter(optimized), and eager
gradients == interpreter on the optimized backward graph, in float64.
"""

from __future__ import annotations

import numpy as np
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import dualgraph as dg
from dualgraph.modes import bind
from dualgraph.ops import OPS
from dualgraph.ops import random as RND
from dualgraph.ops.linalg import addmm
from dualgraph.ops.shape import astype, stop_gradient
from dualgraph.passes import optimize

from ._util import assert_close, assert_convex


def _pos(v):
    return abs(v) + 0.5  # a domain where log, sqrt, division and pow are smooth


def _last(v):
    return v.shape[-1] if v.shape else 1


COMPARISONS = ("lt", "le", "gt", "ge", "eq", "ne")  # generated as where's condition


def _binary(name):
    return lambda a, b, k: bind(OPS[name], a, b)


# op name -> builder(a, b, k): a and b are values of the program, k an integer choice.
# Every result broadcasts against the program's base shape.
STEPS = {
    "add": _binary("add"), "sub": _binary("sub"), "mul": _binary("mul"),
    "maximum": _binary("maximum"), "minimum": _binary("minimum"),
    "div": lambda a, b, k: a / _pos(b),
    "pow": lambda a, b, k: _pos(a) ** (b * 0.5) if k % 2 else a ** (2, 3, 1)[k % 3],
    "neg": lambda a, b, k: -a,
    "exp": lambda a, b, k: (a * 0.5).exp(),
    "log": lambda a, b, k: _pos(a).log(),
    "sqrt": lambda a, b, k: _pos(a).sqrt(),
    "tanh": lambda a, b, k: a.tanh(), "sigmoid": lambda a, b, k: a.sigmoid(),
    "relu": lambda a, b, k: a.relu(), "abs": lambda a, b, k: a.abs(),
    "sin": lambda a, b, k: a.sin(), "cos": lambda a, b, k: a.cos(),
    "where": lambda a, b, k: dg.where(
        bind(OPS[COMPARISONS[k % 6]], a, b), a, b * 2.0),
    "stop_gradient": lambda a, b, k: a + stop_gradient(b),
    "astype": lambda a, b, k: astype(astype(a, dg.float32), dg.float64),
    "sum": lambda a, b, k: a.sum(axis=k % a.ndim if a.ndim else None, keepdims=True),
    "mean": lambda a, b, k: a.mean(keepdims=k % 2 == 0) if a.ndim < 2 else a.mean(
        axis=(0, a.ndim - 1), keepdims=True),
    "max": lambda a, b, k: a.max(axis=-1 if a.ndim else None, keepdims=True),
    "matmul": lambda a, b, k: (a @ _eye_plus(a, b)) if a.ndim else a * b,
    "addmm": lambda a, b, k: addmm(b[0] if b.ndim == 2 else b.sum(), a, _eye_plus(a, b))
    if a.ndim == 2 else a - b,
    "reshape": lambda a, b, k: (a.reshape(-1) * 2.0).reshape(a.shape),
    "transpose": lambda a, b, k: (a.T * 0.5 + 1.0).T,
    "broadcast_to": lambda a, b, k: a.broadcast_to(np.broadcast_shapes(a.shape, b.shape)),
    "getitem": lambda a, b, k: a[..., ::-1] if a.ndim else a[None][0],
    "concatenate": lambda a, b, k: dg.concatenate([a, a.exp()], axis=-1)[..., :_last(a)]
    if a.ndim else a + b,
    "stack": lambda a, b, k: dg.stack([a, a * b.sin() if a.shape == (a * b).shape else a])
    .sum(axis=0),
    # Rewrites for the passes to find: identities, duplicates and constants.
    "identities": lambda a, b, k: -(-((a * 1 + 0) / 1)) ** 1 - 0,
    "duplicate": lambda a, b, k: (a * b).tanh() + (b * a).tanh(),
    "constant": lambda a, b, k: a + _CONST.exp() * 0.5,
    # Random ops from a fixed key: every mode draws the same numbers from it.
    "dropout": lambda a, b, k: RND.dropout(a, _KEY, 0.25, k % 4),
    "randn": lambda a, b, k: a + RND.randn(_KEY, a.shape, a.dtype, k % 4),
    "rand": lambda a, b, k: a * RND.rand(_KEY, b.shape, a.dtype, k % 4),
}
# Ops with no builder, and why.
NOT_BUILT = {"scatter": "only reachable as getitem's VJP: every getitem gradient runs it"}

_CONST = dg.tensor(np.array(0.25))
_KEY = dg.tensor(np.int64(987654321))


def _eye_plus(a, b):
    """A square matrix for ``a @ m`` that keeps ``a``'s shape and depends on ``b``."""
    n = a.shape[-1]
    return dg.tensor(np.eye(n)) + b.mean() * 0.1


def test_every_registry_op_is_generated():
    assert set(OPS) - set(STEPS) - set(COMPARISONS) == set(NOT_BUILT)


@st.composite
def programs(draw):
    base = tuple(draw(st.lists(st.integers(1, 3), min_size=0, max_size=3)))
    n_inputs = draw(st.integers(1, 3))
    shapes = []
    for _ in range(n_inputs):
        drop = draw(st.integers(0, len(base)))
        shapes.append(tuple(d if draw(st.booleans()) else 1 for d in base[drop:]))
    steps = draw(st.lists(st.tuples(st.sampled_from(sorted(STEPS)), st.integers(0, 20),
                                    st.integers(0, 20), st.integers(0, 20)),
                          min_size=1, max_size=7))
    seed = draw(st.integers(0, 2**16))
    return shapes, steps, seed


def _build(steps):
    def prog(*xs):
        vals = list(xs)
        for name, i, j, k in steps:
            vals.append(STEPS[name](vals[i % len(vals)], vals[j % len(vals)], k))
        return vals[-1]

    return prog


@settings(max_examples=80, deadline=None)
@given(programs())
def test_eager_traced_optimized_and_gradients_agree(program):
    shapes, steps, seed = program
    rng = np.random.default_rng(seed)
    arrays = [rng.uniform(-1.0, 1.0, s) for s in shapes]
    prog = _build(steps)

    leaves = [dg.tensor(a, requires_grad=True) for a in arrays]
    out = prog(*leaves)
    ct = rng.standard_normal(out.shape)
    assume(out.requires_grad and np.isfinite(out.numpy()).all())
    (out * ct).sum().backward()
    expected = [t.grad.numpy() if t.grad is not None else np.zeros(t.shape) for t in leaves]
    assume(all(np.isfinite(e).all() for e in expected))

    graph = dg.trace(prog, *[dg.tensor(a, requires_grad=True) for a in arrays])
    graph.verify()
    assert_convex(graph)
    opt = optimize(graph, verify=True)
    (traced,) = dg.interpret(graph, *arrays)
    (optimized,) = dg.interpret(opt, *arrays)
    assert_close(traced, out.numpy(), what="traced")
    assert_close(optimized, out.numpy(), what="optimized")

    d = dg.differentiate(graph)
    fwd, bwd = optimize(d.forward, verify=True), optimize(d.backward, verify=True)
    outs = dg.interpret(fwd, *arrays)
    assert_close(outs[0], out.numpy(), what="forward with residuals")
    grads = dg.interpret(bwd, ct, *outs[1:])
    for k, (gr, ex) in enumerate(zip(grads, expected)):
        assert_close(gr, ex, rtol=1e-10, what=f"gradient {k}")
