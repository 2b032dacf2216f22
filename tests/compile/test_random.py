"""Random numbers: eager streams, compiled calls drawing fresh numbers, reproducibility,
dropout (statistics, eval mode, gradients eager and compiled), ``verify`` and ``compare``."""

from __future__ import annotations

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.compare import RANDOM_NOTE
from dualgraph.nn import functional as F
from dualgraph.ops import random as RND

from .._support.compiled import graph_ops

ZEROS = np.zeros(1000, np.float32)


def noisy(x):
    return x + dg.randn(1000)


# ------------------------------------------------------------------------ eager


def test_eager_streams_are_numpys():
    """Eager randn/rand draw NumPy's stream from the seed, exactly as before."""
    dg.manual_seed(7)
    a, b = dg.randn(3, 4), dg.rand(5, dtype=dg.float64)
    gen = np.random.default_rng(7)
    np.testing.assert_array_equal(a.numpy(), gen.standard_normal((3, 4)).astype(np.float32))
    np.testing.assert_array_equal(b.numpy(), gen.random(5))
    assert a.grad_fn is None and a.dtype == np.float32


def test_eager_dropout_statistics_and_reproducibility():
    x = dg.ones(100_000)
    dg.manual_seed(1)
    y = F.dropout(x, p=0.3).numpy()
    zeroed = float(np.mean(y == 0))
    assert abs(zeroed - 0.3) < 0.01
    assert abs(float(y.mean()) - 1.0) < 0.02
    kept = y[y != 0]
    dg.testing.assert_close(kept, np.full_like(kept, 1 / 0.7), rtol=1e-6, atol=0, equal_nan=True,
                            check_dtype=False)
    dg.manual_seed(1)
    np.testing.assert_array_equal(F.dropout(x, p=0.3).numpy(), y)
    assert not np.array_equal(F.dropout(x, p=0.3).numpy(), y)  # the generator advanced


def test_eager_dropout_gradient_is_the_mask():
    x = dg.tensor(np.linspace(-1, 1, 1000).astype(np.float32), requires_grad=True)
    y = F.dropout(x, p=0.4)
    assert y.grad_fn.name() == "MulBackward0"
    y.backward(dg.ones(1000))
    kept = (y.numpy() != 0) | (x.numpy() == 0)
    dg.testing.assert_close(x.grad.numpy(), np.where(kept, 1 / 0.6, 0.0), rtol=1e-6, atol=0,
                            equal_nan=True, check_dtype=False)


def test_dropout_edge_cases_and_eval_identity():
    x = dg.randn(4, 5)
    assert F.dropout(x, 0.5, training=False) is x
    assert F.dropout(x, 0.0) is x
    np.testing.assert_array_equal(F.dropout(x, 1.0).numpy(), np.zeros((4, 5), np.float32))
    for bad in (-0.1, 1.5, "a"):
        with pytest.raises(ValueError, match="between 0 and 1"):
            F.dropout(x, bad)
    m = dg.nn.Dropout(0.5)
    assert m.training and "p=0.5" in repr(m)
    m.eval()
    assert m(x) is x
    with pytest.raises(ValueError):
        dg.nn.Dropout(2.0)


# --------------------------------------------------------------------- compiled


def test_compiled_randn_is_a_graph_op_drawing_fresh_numbers():
    f = dg.compile(noisy)
    a, b = f(dg.tensor(ZEROS)).numpy(), f(dg.tensor(ZEROS)).numpy()
    assert not np.array_equal(a, b)
    assert f.stats.traces == 1 and f.stats.cache_hits == 1 and f.stats.kernels == 1
    (entry,) = f.entries()
    assert "randn" in graph_ops(entry.optimized)
    for v in (a, b):  # standard normal
        assert abs(float(v.mean())) < 0.15 and abs(float(v.std()) - 1.0) < 0.1


def test_manual_seed_makes_compiled_runs_reproducible():
    f = dg.compile(lambda x: (x + dg.randn(50), dg.rand(3, 2, dtype=dg.float64)))
    dg.manual_seed(5)
    first = [[o.numpy() for o in f(dg.tensor(ZEROS[:50]))] for _ in range(3)]
    dg.manual_seed(5)
    again = [[o.numpy() for o in f(dg.tensor(ZEROS[:50]))] for _ in range(3)]
    for r1, r2 in zip(first, again):
        for a, b in zip(r1, r2):
            np.testing.assert_array_equal(a, b)
    assert not np.array_equal(first[0][0], first[1][0])
    assert first[0][1].dtype == np.float64 and (first[0][1] >= 0).all()
    assert (first[0][1] < 1).all()


def test_two_random_ops_in_one_trace_draw_different_numbers():
    f = dg.compile(lambda x: (x + dg.rand(100), x + dg.rand(100)))
    a, b = f(dg.zeros(100))
    assert not np.array_equal(a.numpy(), b.numpy())


def test_compiled_random_ops_match_the_interpreter_for_the_same_key():
    """The kernel and the NumPy kernels (reference interpreter) draw the same numbers."""
    key = dg.tensor(np.int64(123456789))

    def draws(k, x):
        return (RND.rand(k, (7, 3), np.float32, 0), RND.randn(k, (7, 3), np.float64, 1),
                RND.dropout(x, k, 0.5, 2))

    x = dg.randn(7, 3)
    graph = dg.trace(draws, key, x)
    expected = dg.interpret(graph, key.numpy(), x.numpy())
    got = dg.compile(draws)(key, x)
    np.testing.assert_array_equal(got[0].numpy(), expected[0])
    dg.testing.assert_close(got[1].numpy(), expected[1], rtol=1e-15, atol=1e-15, equal_nan=True,
                            check_dtype=False)
    np.testing.assert_array_equal(got[2].numpy(), expected[2])


def test_compiled_dropout_statistics_and_gradient():
    p = 0.25
    f = dg.compile(lambda x: F.dropout(x, p) * 1.0)
    x = dg.ones(100_000, requires_grad=True)
    y1 = f(x)
    y2 = f(x)  # another call before the first backward: its mask must not leak in
    v1 = y1.numpy()
    assert abs(float(np.mean(v1 == 0)) - p) < 0.01
    assert abs(float(v1.mean()) - 1.0) < 0.02
    assert not np.array_equal(v1, y2.numpy())
    y1.backward(dg.ones(100_000))
    dg.testing.assert_close(x.grad.numpy(), v1, rtol=1e-6, atol=0, equal_nan=True,
                            check_dtype=False)  # mask / (1 - p), x = 1
    assert f.stats.traces == 1 and f.stats.kernels == 2
    (entry,) = f.entries()
    assert "dropout" in graph_ops(entry.backward_graph)


def test_compiled_module_dropout_train_and_eval():
    m = dg.nn.Dropout(0.5)
    m.eval()
    cm = dg.compile(m)
    x = dg.randn(64)
    np.testing.assert_array_equal(cm(x).numpy(), x.numpy())
    train = dg.nn.Dropout(0.5)
    ct = dg.compile(train)
    out = ct(dg.ones(1000)).numpy()
    assert 0.4 < float(np.mean(out == 0)) < 0.6


def test_compiled_training_step_with_dropout_matches_mask_gradient():
    """A whole step (backward inside the compiled function): gradient = mask / (1 - p)."""
    w = dg.tensor(np.ones(2000, np.float32), requires_grad=True)

    @dg.compile
    def step(x):
        y = F.dropout(w * x, 0.5)
        y.sum().backward()
        return y

    y = step(dg.ones(2000)).numpy()
    dg.testing.assert_close(w.grad.numpy(), y, rtol=1e-6, atol=0, equal_nan=True, check_dtype=False)
    assert 0.45 < float(np.mean(y == 0)) < 0.55


def test_randn_requiring_grad_inside_a_trace_raises():
    with pytest.raises(dg.TraceError, match="requires_grad"):
        dg.compile(lambda x: x + dg.randn(3, requires_grad=True))(dg.zeros(3))


def test_verify_does_not_call_random_programs_stale():
    f = dg.compile(noisy, verify=True)
    dg.manual_seed(3)
    values = [f(dg.tensor(ZEROS)).numpy() for _ in range(5)]  # verifies on calls 1, 2, 4
    g = dg.compile(noisy)
    dg.manual_seed(3)
    plain = [g(dg.tensor(ZEROS)).numpy() for _ in range(5)]
    for a, b in zip(values, plain):  # verification does not advance the generator
        np.testing.assert_array_equal(a, b)


def test_compare_flags_random_outputs_instead_of_reporting_error():
    x = dg.randn(100, requires_grad=True)
    report = dg.compare(lambda x: (x * 2 + dg.randn(100)).sum(), x, repeats=1,
                        cold_warm=False)
    assert report.notes == [RANDOM_NOTE]
    assert all(d.random for d in report.numerics)
    assert report.max_abs_error == 0.0
    assert "random: a different stream" in str(report)
    plain = dg.compare(lambda x: (x * 2).sum(), x, repeats=1, cold_warm=False)
    assert plain.notes == [] and not any(d.random for d in plain.numerics)
