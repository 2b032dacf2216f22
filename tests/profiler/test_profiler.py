"""``dg.profiler``: per-op events of eager code, record_function ranges, key_averages and
PyTorch's table, the step schedule and bad input. No test asserts on a time's size, only
on counts, names and the self/total bookkeeping."""

from __future__ import annotations

import json

import pytest

import dualgraph as dg
from dualgraph import modes
from dualgraph.profiler import ProfilerActivity, profile, record_function, schedule


def test_ops_are_recorded_by_name_with_counts_and_shapes():
    x = dg.ones(4, 3)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        y = (x * 2.0).exp()
        z = (y * y).sum()
    avg = {e.key: e for e in prof.key_averages()}
    assert avg["mul"].count == 2 and avg["exp"].count == 1 and avg["sum"].count == 1
    assert float(z) == pytest.approx(12 * float(dg.tensor(2.0).exp()) ** 2, rel=1e-5)
    shapes = {e.key: e.input_shapes for e in prof.key_averages(group_by_input_shape=True)}
    assert shapes["exp"] == [[4, 3]]
    table = prof.key_averages().table(sort_by="cpu_time_total", row_limit=10)
    for column in ("Name", "Self CPU %", "CPU total", "# of Calls", "mul", "exp"):
        assert column in table
    # Outside the block nothing is recorded and the mode stack is back.
    n = len(prof.events())
    (x + x).sum()
    assert len(prof.events()) == n and modes.current_mode().tracing is False


def test_record_function_ranges_nest_and_split_self_time():
    with profile() as prof:
        with record_function("outer"):
            a = dg.ones(8) + 1.0
            with record_function("inner"):
                (a * a).sum()

    @record_function("decorated")
    def f(t):
        return t.neg()

    with profile() as prof2:
        f(dg.ones(2))
    ev = {e.name: e for e in prof.events()}
    outer, inner = ev["outer"], ev["inner"]
    assert inner in outer.children and ev["mul"] in inner.children
    assert outer.cpu_time_total >= inner.cpu_time_total
    assert outer.self_cpu_time_total == pytest.approx(
        outer.cpu_time_total - sum(c.cpu_time_total for c in outer.children))
    assert [e.name for e in prof2.events()] == ["neg", "decorated"]
    with record_function("no profile active"):
        dg.ones(1).neg()


def test_schedule_records_only_active_steps_and_calls_on_trace_ready():
    ready = []
    with profile(schedule=schedule(wait=1, warmup=1, active=2),
                 on_trace_ready=ready.append) as prof:
        for _ in range(4):
            dg.ones(2).neg()
            prof.step()
    assert prof.key_averages()[0].count == 2 and len(ready) == 1


def test_chrome_trace_and_errors(tmp_path):
    with profile() as prof:
        dg.ones(2).exp()
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    assert [e["name"] for e in json.loads(path.read_text())["traceEvents"]] == ["exp"]
    with pytest.raises(RuntimeError, match="CPU activity only"):
        profile(activities=[ProfilerActivity.CUDA])
    with pytest.raises(ValueError, match="sort_by"):
        prof.key_averages().table(sort_by="cuda_time")
