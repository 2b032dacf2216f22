"""``dg.utils.benchmark``: Timer and Measurement with torch.utils.benchmark's fields.

A fake clock that advances by one per run of the statement makes every number exact, so
the tests assert on the bookkeeping, never on real time."""

from __future__ import annotations

import pytest

import dualgraph as dg
from dualgraph.utils import benchmark


def _counting_timer(cost: float = 1.0):
    state = {"runs": 0}

    def clock() -> float:
        return state["runs"] * cost

    return state, clock


def test_timeit_is_one_block_of_number_runs():
    state, clock = _counting_timer()
    t = benchmark.Timer("s['runs'] += 1", globals={"s": state}, timer=clock, label="lbl")
    m = t.timeit(7)
    assert m.number_per_run == 7 and m.raw_times == [7.0] and m.times == [1.0]
    assert m.mean == m.median == 1.0 and m.iqr == 0.0
    assert state["runs"] == 8  # one warm-up run, as PyTorch's timeit does
    assert "lbl" in repr(m) and "Median" in repr(m)


def test_blocked_autorange_runs_until_min_run_time():
    state, clock = _counting_timer(cost=1e-5)
    seen = []
    m = benchmark.Timer("s['runs'] += 1", globals={"s": state}, timer=clock).blocked_autorange(
        callback=lambda n, t: seen.append(n), min_run_time=1e-3)
    assert m.number_per_run == 10  # the first block size taking at least 0.1 ms
    assert sum(m.raw_times) >= 1e-3 and len(m.times) == len(seen) == 10
    assert m.median == pytest.approx(1e-5) and m.mean == pytest.approx(1e-5)


def test_timer_runs_dualgraph_code_with_setup():
    m = benchmark.Timer("y = x @ x", setup="x = dg.ones(3, 3)", globals={"dg": dg}).timeit(3)
    assert m.mean > 0 and len(m.times) == 1


def test_timer_refuses_callables_and_other_languages():
    with pytest.raises(TypeError, match="strings"):
        benchmark.Timer(lambda: None)
    with pytest.raises(ValueError, match="Python"):
        benchmark.Timer("pass", language="c++")
    with pytest.raises(ValueError, match="at least 1"):
        benchmark.Timer("pass").timeit(0)
