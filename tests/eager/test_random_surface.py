"""Generators and random constructors: `dg.Generator`, `randint`, `randperm`,
`multinomial`, `randn_like`/`rand_like`/`randint_like`, eager and compiled."""

from __future__ import annotations

import numpy as np
import pytest

import dualgraph as dg


def test_generator_streams_are_reproducible_and_independent() -> None:
    a = dg.randn(5, generator=dg.Generator().manual_seed(3)).numpy()
    b = dg.randn(5, generator=dg.Generator().manual_seed(3)).numpy()
    np.testing.assert_array_equal(a, b)
    g = dg.Generator().manual_seed(3)
    dg.manual_seed(0)
    before = dg.randn(3).numpy()
    dg.manual_seed(0)
    dg.rand(4, generator=g)  # drawing from g leaves the default generator alone
    np.testing.assert_array_equal(dg.randn(3).numpy(), before)
    assert g.initial_seed() == 3 and g.device == dg.device("cpu")


def test_generator_state_round_trips() -> None:
    g = dg.Generator().manual_seed(1)
    state = g.get_state()
    first = dg.rand(3, generator=g).numpy()
    g.set_state(state)
    np.testing.assert_array_equal(dg.rand(3, generator=g).numpy(), first)
    with pytest.raises(RuntimeError, match="not a generator state"):
        g.set_state(dg.tensor([1, 2, 3], dtype=dg.uint8))


def test_manual_seed_seeds_the_default_generator() -> None:
    assert dg.manual_seed(5) is None and dg.initial_seed() == 5
    assert dg.default_generator.initial_seed() == 5
    x = dg.randn(3).numpy()
    state = dg.get_rng_state()
    y = dg.randn(3).numpy()
    dg.set_rng_state(state)
    np.testing.assert_array_equal(dg.randn(3).numpy(), y)
    dg.manual_seed(5)
    np.testing.assert_array_equal(dg.randn(3).numpy(), x)


def test_randint_forms_bounds_and_dtype() -> None:
    dg.manual_seed(0)
    x = dg.randint(10, (1000,))
    assert x.dtype == np.int64 and x.shape == (1000,)
    assert x.numpy().min() >= 0 and x.numpy().max() <= 9
    y = dg.randint(-3, 3, (2, 500), dtype=dg.int32).numpy()
    assert y.dtype == np.int32 and y.min() == -3 and y.max() == 2
    with pytest.raises(RuntimeError, match="from=5 >= to=5"):
        dg.randint(5, 5, (2,))


def test_randperm_is_a_permutation() -> None:
    p = dg.randperm(50, generator=dg.Generator().manual_seed(0)).numpy()
    assert p.dtype == np.int64 and sorted(p.tolist()) == list(range(50))
    assert dg.randperm(0).shape == (0,)


def test_like_constructors_follow_the_input() -> None:
    x = dg.zeros(3, 4, dtype=dg.float64)
    for make in (dg.randn_like, dg.rand_like):
        y = make(x)
        assert y.shape == (3, 4) and y.dtype == np.float64 and not y.requires_grad
    assert dg.rand_like(x, dtype=dg.float32).dtype == np.float32
    assert dg.randn_like(dg.ones(2), requires_grad=True).requires_grad
    r = dg.randint_like(x, 2, 5).numpy()
    assert r.dtype == np.float64 and r.min() >= 2 and r.max() <= 4
    assert dg.rand_like(x).numpy().min() >= 0


# Probabilities of each category for a 2-row input: the sampled frequencies must match.
W = np.array([[0.0, 1.0, 3.0, 1.0], [2.0, 2.0, 2.0, 2.0]], np.float32)


def test_multinomial_with_replacement_matches_the_distribution() -> None:
    dg.manual_seed(0)
    s = dg.multinomial(dg.tensor(W), 20000, replacement=True).numpy()
    assert s.shape == (2, 20000) and s.dtype == np.int64
    for row in range(2):
        freq = np.bincount(s[row], minlength=4) / 20000
        dg.testing.assert_close(freq, W[row] / W[row].sum(), rtol=1e-7, atol=0.015, equal_nan=True,
                                check_dtype=False)


def test_multinomial_without_replacement_draws_distinct_categories_in_order() -> None:
    """Without replacement the first draw follows the weights, and the second the weights
    left after removing the first (computed exactly here)."""
    dg.manual_seed(1)
    w = np.array([1.0, 2.0, 3.0, 4.0])
    first, second = np.zeros(4), np.zeros((4, 4))
    n = 4000
    for _ in range(n):
        s = dg.multinomial(dg.tensor(w, dtype=dg.float32), 2).numpy()
        assert s.shape == (2,) and s[0] != s[1]
        first[s[0]] += 1
        second[s[0], s[1]] += 1
    p = w / w.sum()
    dg.testing.assert_close(first / n, p, rtol=1e-7, atol=0.03, equal_nan=True, check_dtype=False)
    # P(second = j) = sum_i p_i * w_j / (1 - w_i)
    p2 = sum(p[i] * np.where(np.arange(4) == i, 0, w / (w.sum() - w[i])) for i in range(4))
    dg.testing.assert_close(second.sum(0) / n, p2, rtol=1e-7, atol=0.03, equal_nan=True,
                            check_dtype=False)
    full = dg.multinomial(dg.tensor(w), 4).numpy()
    assert sorted(full.tolist()) == [0, 1, 2, 3]


def test_multinomial_never_draws_zero_weights_and_uses_the_generator() -> None:
    w = dg.tensor([0.0, 0.0, 5.0, 0.0])
    assert set(dg.multinomial(w, 50, True).numpy().tolist()) == {2}
    a = dg.multinomial(dg.tensor(W), 3, generator=dg.Generator().manual_seed(7)).numpy()
    b = dg.multinomial(dg.tensor(W), 3, generator=dg.Generator().manual_seed(7)).numpy()
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("w, n, repl, match", [
    ([1.0, -1.0], 1, True, "element < 0"),
    ([1.0, np.nan], 1, True, "`inf`, `nan`"),
    ([0.0, 0.0], 1, True, "sum of probabilities <= 0"),
    ([1.0, 0.0, 0.0], 2, False, "not enough non-negative category"),
    ([1.0, 1.0], 3, False, "n_sample > prob_dist.size"),
    ([1.0, 1.0], 0, True, "n_sample <= 0"),
    ([[[1.0]]], 1, True, "must be 1 or 2 dim"),
])
def test_multinomial_errors_like_torch(w, n, repl, match) -> None:
    with pytest.raises(RuntimeError, match=match):
        dg.multinomial(dg.tensor(w), n, repl)


def test_multinomial_refuses_integer_weights() -> None:
    with pytest.raises(RuntimeError, match="floating-point"):
        dg.multinomial(dg.tensor([1, 2]), 1)


def test_random_ops_compile_and_draw_fresh_numbers_each_call() -> None:
    """`multinomial`, `randn_like`, `rand_like`, `randint` and `randperm` inside a compiled
    function: one trace, valid results, new numbers each call, reproducible under
    `dg.manual_seed`."""
    def f(p, x):
        a = dg.multinomial(p, 6, replacement=True)
        b = dg.multinomial(p, 2)
        c = dg.randn_like(x) + dg.rand_like(x)
        d = dg.randint(0, 4, (8,))
        e = dg.randperm(5)
        return a, b, c, d, e

    g = dg.compile(f)
    p, x = dg.tensor(W), dg.zeros(3, 2)
    dg.manual_seed(0)
    first = [t.numpy().copy() for t in g(p, x)]
    second = [t.numpy().copy() for t in g(p, x)]
    assert g.stats.traces == 1
    dg.manual_seed(0)
    again = [t.numpy().copy() for t in g(p, x)]
    for u, v in zip(first, again):
        np.testing.assert_array_equal(u, v)
    assert any(not np.array_equal(u, v) for u, v in zip(first, second))
    a, b, c, d, e = first
    assert a.shape == (2, 6) and a.dtype == np.int64 and 0 not in a[0]
    assert b.shape == (2, 2) and all(len(set(r)) == 2 for r in b.tolist())
    assert c.shape == (3, 2) and c.dtype == np.float32
    assert d.min() >= 0 and d.max() <= 3 and d.dtype == np.int64
    assert sorted(e.tolist()) == list(range(5))


def test_generator_inside_a_compiled_function_is_a_trace_error() -> None:
    g = dg.Generator().manual_seed(0)
    f = dg.compile(lambda x: dg.multinomial(x, 1, generator=g), strict=True)
    with pytest.raises(dg.TraceError, match="generator="):
        f(dg.tensor([1.0, 2.0]))
