"""`dg.compare`: numerics, time, structure, memory, the tape <-> trace diff, fusion decisions
and the pass ablation, checked against what the parts of dualgraph report on their own."""

from __future__ import annotations

import dataclasses
import importlib
import json

import numpy as np
import pytest

import dualgraph as dg
from dualgraph import passes as P
from dualgraph.cli import _table

from . import _programs as progs

C = importlib.import_module("dualgraph.compare")  # the module: dg.compare is the function


@pytest.fixture(scope="module")
def report() -> dg.CompareReport:
    x, y = progs.inputs()
    # The one report with a cold-cache compile (~3 s) and the ablation: shared by the module.
    return dg.compare(progs.every_fate, x, y, repeats=2, cold_warm=True, ablation=True)


def _rows(report: dg.CompareReport, tag: str) -> list[dict]:
    where = progs.line_of(progs.every_fate, tag)
    return [r for r in report.diff if r["loc"] and r["loc"].endswith(where)]


# ------------------------------------------------------------------------- numerics
def test_numerics_cover_the_output_and_every_gradient(report):
    assert [d.name for d in report.numerics] == ["output 0", "grad arg 0", "grad arg 1"]
    assert report.max_abs_error == max(d.max_abs_error for d in report.numerics)
    assert report.max_rel_error == max(d.max_rel_error for d in report.numerics)
    # float32 eager and compiled agree to float32 rounding, and both are near float64.
    assert report.max_rel_error < 1e-5
    for d in report.numerics:
        assert 0 <= d.max_abs_error < 1e-4
        assert 0 <= d.eager_vs_f64 < 1e-4 and 0 <= d.compiled_vs_f64 < 1e-4


def test_closer_names_the_mode_nearer_to_float64(report):
    for d in report.numerics:
        if d.eager_vs_f64 < d.compiled_vs_f64:
            assert d.closer == "eager"
        elif d.eager_vs_f64 > d.compiled_vs_f64:
            assert d.closer == "compiled"
        else:
            assert d.closer == "tie"


def test_float64_referee_is_an_eager_float64_run(report):
    x, y = progs.inputs()
    x64 = dg.tensor(x.numpy().astype(np.float64), requires_grad=True)
    y64 = dg.tensor(y.numpy().astype(np.float64), requires_grad=True)
    ref = progs.every_fate(x64, y64)
    ref.backward()
    out = progs.every_fate(x, y)
    out.backward()
    expected = {
        "output 0": abs(float(out.item()) - float(ref.item())),
        "grad arg 0": float(np.max(np.abs(x.grad.numpy().astype(np.float64) - x64.grad.numpy()))),
        "grad arg 1": float(np.max(np.abs(y.grad.numpy().astype(np.float64) - y64.grad.numpy()))),
    }
    for d in report.numerics:
        assert d.eager_vs_f64 == pytest.approx(expected[d.name], rel=1e-6, abs=1e-12)


def test_compare_leaves_the_callers_grads_alone():
    x, y = progs.inputs()
    x.grad = dg.tensor(np.full(progs.N, 7.0, np.float32))
    dg.compare(progs.every_fate, x, y, repeats=1, cold_warm=False)
    np.testing.assert_array_equal(x.grad.numpy(), 7.0)
    assert y.grad is None


# ----------------------------------------------------------------------------- time
def test_time_fields_are_consistent(report):
    assert report.eager_time > 0 and report.compiled_time > 0
    for median, (lo, hi) in [(report.eager_time, report.eager_spread),
                             (report.compiled_time, report.compiled_spread),
                             (report.speedup, report.speedup_spread),
                             (report.wall_speedup, report.wall_speedup_spread),
                             (report.cpu_speedup, report.cpu_speedup_spread)]:
        assert lo <= median <= hi
    assert 0 <= report.clean_rounds <= report.rounds
    if report.clean_rounds:
        lo, hi = report.clean_speedup_spread
        assert lo <= report.clean_speedup <= hi
    # The verdict's figure is one of the three paired ratios, named by its basis.
    chosen = {"wall time": report.wall_speedup, "CPU time": report.cpu_speedup,
              "undisturbed rounds": report.clean_speedup}[report.speedup_basis]
    assert report.speedup == chosen
    assert set(report.cpu_share) == {"eager", "compiled"}
    b = report.compile_breakdown
    assert set(b) == {"trace", "passes", "numba"} and all(v >= 0 for v in b.values())
    assert report.compile_time == pytest.approx(sum(b.values()), rel=0.05, abs=1e-3)


def test_both_sides_ran_the_same_rounds_and_calls(report):
    e, c = report.timings["eager"], report.timings["compiled"]
    assert e["repeats"] == c["repeats"] == report.rounds >= C.MIN_ROUNDS
    assert e["number"] == c["number"] >= 1


def test_break_even_is_compile_time_over_the_saving_per_call(report):
    per_call = C._per_call(report, "eager")
    compile_t = report.compile_time if report.speedup_basis == "wall time" else \
        report.compile_spread[0]
    saving = per_call * (1 - 1 / report.speedup)
    assert report.break_even_calls == pytest.approx(compile_t / saving)
    lo, hi = report.break_even_spread
    assert lo <= report.break_even_calls and (hi is None or report.break_even_calls <= hi)
    text = str(report)
    assert f"{report.break_even_calls:,.0f} calls (" in text
    assert "with blocking compilation" in text


def test_spread_fields_are_present_and_sane(report):
    for name, median in (("eager", report.eager_time), ("compiled", report.compiled_time)):
        t = report.timings[name]
        assert set(t) == {"median", "q1", "q3", "repeats", "number", "cpu_ratio",
                          "cpu_median", "clean_median"}
        assert (t["clean_median"] > 0) == (report.clean_rounds > 0)
        assert t["median"] == median and 0 < t["q1"] <= t["median"] <= t["q3"]
        assert t["cpu_median"] > 0 and 0 < t["cpu_ratio"] < 2
    assert report.eager_spread == (report.timings["eager"]["q1"], report.timings["eager"]["q3"])
    lo, hi = report.compile_spread
    assert 0 < lo <= report.compile_time == hi
    assert report.compile_cache in ("cold", "warm")
    assert report.compile_cache_source in ("numba", "disk", "memory")
    assert (report.compile_cache == "cold") == (report.compile_cache_source == "numba")
    assert isinstance(report.noisy, bool) and report.noisy == bool(report.noise_reasons)


def test_the_report_opens_with_the_verdict(report):
    first = str(report).splitlines()[0]
    assert first == f"every_fate: {report.verdict}"
    assert report.verdict.startswith("compiled is ") and "x faster (" in report.verdict
    assert "pays after ~" in report.verdict and "s of your loop" in report.verdict
    assert ("wall-time ratio used" in report.verdict) == (report.speedup_basis == "wall time")


def test_compile_is_cold_then_warm_with_the_same_cache_dir(tmp_path):
    def halve(x):
        return (x * 0.5 + 0.25).sum()

    x = dg.tensor(np.arange(8, dtype=np.float32), requires_grad=True)
    labels = []
    for _ in range(2):
        with C._fresh_cache(str(tmp_path)):  # a new process's view of one cache dir
            r = dg.compare(halve, x, repeats=1, budget=0.05, roofline=False)
            labels.append((r.compile_cache, r.compile_cache_source))
            if not labels[1:]:
                assert "cold [" in str(r)
    assert labels == [("cold", "numba"), ("warm", "disk")]


def test_cold_warm_is_off_by_default_and_says_so():
    x, y = progs.inputs()
    r = dg.compare(progs.every_fate, x, y, repeats=1, budget=0.05, roofline=False)
    assert r.cold_compile_time is None and r.warm_compile_time is None
    assert "cold/warm cache  not measured (cold_warm=True measures both)" in str(r)


def test_warm_up_is_paid_once_per_process():
    C.warm_up()
    assert C.warm_up() == 0.0 and C._WARMED_UP > 0


def test_break_even_never_is_printed_when_compiling_does_not_pay(report):
    slow = dataclasses.replace(report, break_even_calls=None)
    assert "never (compiled is not faster)" in str(slow)

def test_cold_and_warm_compile_times_are_both_measured_and_printed(report):
    # That the cold run compiles and the warm one loads from disk is checked by cache
    # source (above), not by comparing the two times: tests never assert on time.
    assert report.cold_compile_time > 0 and report.warm_compile_time > 0
    assert (f"compile cold/warm cache  {report.cold_compile_time:.3f} s / "
            f"{report.warm_compile_time:.3f} s") in str(report)
    assert "cold [" in str(report) or "warm [" in str(report)


# ------------------------------------------------------------------------ structure
def test_structure_counts_match_graph_of_trace_and_optimize(report):
    x, y = progs.inputs()
    tape = dg.graph_of(progs.every_fate(x, y))
    traced = dg.trace(progs.every_fate, x, y)
    assert report.eager_tape_nodes == sum(1 for n in tape.nodes if n.op != "const")
    assert report.traced_nodes == P.op_count(traced)
    # The dead value is traced but never reaches the outputs' tape.
    assert report.traced_nodes > report.eager_tape_nodes
    # Optimization shrinks the graph; a scalar loss's forward and backward are one kernel.
    assert 0 < report.optimized_nodes < report.traced_nodes
    assert report.value_and_grad and report.backward_nodes == 0
    assert report.kernels == 1
    assert report.fused_kernels >= len(report.fusion) > 0
    assert "one value-and-grad kernel" in str(report)


@pytest.fixture(scope="module")
def vector_report():
    x, y = progs.inputs()
    return dg.compare(progs.every_fate_vector, x, y, repeats=3, budget=0.05, cold_warm=False)


def test_vector_output_has_forward_and_backward_kernels(vector_report):
    r = vector_report
    assert not r.value_and_grad and r.kernels == 2 and r.backward_nodes > 0
    assert r.max_rel_error < 1e-5


# --------------------------------------------------------------------------- memory
def test_memory_eager_saved_vs_compiled_residuals(report, vector_report):
    nbytes = progs.N * 4
    assert report.eager_saved_bytes > 0 and report.eager_saved_bytes % nbytes == 0
    # A scalar loss keeps nothing between forward and backward: they are one kernel.
    assert report.compiled_residual_bytes == 0 and "compiled keeps none" in str(report)
    r = vector_report
    assert 0 < r.compiled_residual_bytes < r.eager_saved_bytes
    assert r.compiled_residual_bytes % nbytes == 0
    # Cheap values the backward recomputes instead of keeping, named with their type.
    assert r.recomputed and all("f32[64]" in x for x in r.recomputed)
    assert any(x.startswith("sigmoid") for x in r.recomputed)


# ----------------------------------------------------------------- str and to_json
def test_str_is_a_readable_table(report):
    text = str(report)
    for heading in ("every_fate: compiled is", "distance to the machine's limits", "numerics",
                    "time", "structure", "memory", "tape <-> trace", "fusion",
                    "pass ablation", "break-even", "speed-up", "compile cold/warm cache"):
        assert heading in text
    assert f"eager tape nodes {report.eager_tape_nodes}" in text
    assert f"{report.speedup:.2f}x" in text


def test_to_json_round_trips(report):
    data = json.loads(report.to_json())
    fields = {f.name for f in dataclasses.fields(dg.CompareReport)}
    assert set(data) == fields
    assert data["speedup"] == report.speedup
    assert data["break_even_calls"] == report.break_even_calls
    assert data["eager_spread"] == list(report.eager_spread)
    assert [n["closer"] for n in data["numerics"]] == [d.closer for d in report.numerics]
    assert data["diff"] == report.diff and data["fusion"] == report.fusion
    assert data["ablation"] == report.ablation and data["trace_error"] is None
    assert data["timings"] == report.timings and data["noisy"] == report.noisy
    assert data["compile_cache"] == report.compile_cache
    assert data["compile_spread"] == list(report.compile_spread)
    assert data["break_even_spread"] == [v for v in report.break_even_spread]
    assert json.loads(report.to_json(indent=2)) == data


# ------------------------------------------------------------------- tape <-> trace
@pytest.mark.parametrize("tag, fate", [
    ("first", "fused into kernel"),
    ("duplicate", "merged by CSE"),
    ("dead", "removed by DCE"),
    ("folded", "folded to a constant"),
    ("simplified", "rewritten by simplify"),
    ("shared", "fused into kernel"),
])
def test_diff_marks_what_each_pass_did(report, tag, fate):
    rows = _rows(report, tag)
    assert rows, f"no diff row at the line tagged {tag}"
    assert any(r["fate"].startswith(fate) for r in rows), rows


def test_diff_aligns_tape_and_trace_by_op_and_line(report):
    # The duplicated line is on the tape and in the trace: aligned pairs of equal ops.
    for r in _rows(report, "duplicate"):
        assert r["eager"] == r["traced"] and r["traced"] in ("mul", "exp")
    # The dead value and the constant were traced but are not on the outputs' tape.
    for tag in ("dead", "folded"):
        for r in _rows(report, tag):
            assert r["eager"] is None and r["traced"] is not None
            assert "not on the outputs' tape" in r["fate"]
    # Every traced node appears once.
    assert sum(1 for r in report.diff if r["traced"]) == report.traced_nodes


def test_diff_is_printed_with_locations(report):
    text = str(report)
    for tag in ("duplicate", "dead"):
        assert progs.line_of(progs.every_fate, tag) in text
    assert "merged by CSE" in text and "removed by DCE" in text


def test_fused_fate_names_a_kernel_of_the_fusion_report(report):
    fused = [r for r in report.diff if r["fate"].startswith("fused into kernel")]
    assert fused
    for r in fused:
        k = int(r["fate"].split()[3])
        assert r["traced"] in report.fusion[k]["members"]


# ----------------------------------------------------------------- fusion decisions
def test_fusion_decisions_as_data(report):
    assert len(report.fusion) == 3
    for g in report.fusion:
        assert set(g) == {"kind", "members", "admitted", "blocked", "bytes_saved"}
        assert len(g["members"]) >= 2 and g["kind"] in ("elementwise", "reduce", "matmul")
        # One admission per member that joined (the root started the group).
        assert len(g["admitted"]) == len(g["members"]) - 1
        assert all(":" in a and "consumers are all in the group" in a for a in g["admitted"])
    kinds = [g["kind"] for g in report.fusion]
    assert kinds.count("reduce") == 2


def test_fusion_names_the_blocked_neighbour_and_its_rule(report):
    # h (an add) feeds both reductions: it is stored once, not fused into either.
    reductions = [g for g in report.fusion if g["kind"] == "reduce"]
    for g in reductions:
        assert any(b.startswith("add") and "consumers in different groups" in b
                   for b in g["blocked"]), g["blocked"]


def test_fusion_bytes_saved_are_the_intermediates_not_stored(report):
    nbytes = progs.N * 4
    by_members = {tuple(g["members"]): g["bytes_saved"] for g in report.fusion}
    # Every member but the stored root is a float32[64] never written to memory.
    assert by_members[("mul", "exp", "add", "add")] == 3 * nbytes
    assert by_members[("sigmoid", "mul", "sum")] == 2 * nbytes
    assert by_members[("tanh", "sum")] == nbytes


# --------------------------------------------------------------------- pass ablation
def test_ablation_has_a_row_per_pass(report):
    offs = [r["off"] for r in report.ablation]
    assert offs == ["(none)"] + [name for name, _ in P.DEFAULT_PIPELINE]
    x, y = progs.inputs()
    traced = dg.trace(progs.every_fate, x, y)
    for r in report.ablation:
        skip = () if r["off"] == "(none)" else (r["off"],)
        g = P.optimize(traced, skip=skip)
        assert r["nodes"] == P.op_count(g)
        assert r["kernels"] == sum(1 for n in g.nodes if n.op == "fused")
        assert r["max_abs_error"] < 1e-4 and r["time"] > 0
        assert r["spread"][0] <= r["time"] <= r["spread"][1]
    rows = {r["off"]: r for r in report.ablation}
    assert rows["fuse"]["kernels"] == 0 and rows["fuse"]["nodes"] > rows["(none)"]["nodes"]
    assert rows["dce"]["nodes"] > rows["(none)"]["nodes"]  # the dead tanh * 3 stays


def test_no_ablation_unless_asked():
    x, y = progs.inputs()
    r = dg.compare(progs.every_fate, x, y, repeats=1, cold_warm=False)
    assert r.ablation == [] and r.cold_compile_time is None
    assert "pass ablation" not in str(r) and "cold/warm cache  not measured" in str(r)


# ------------------------------------------------------------------------ bad input
def test_trace_failure_reports_the_error_and_still_gives_the_eager_side():
    x, _ = progs.inputs()
    r = dg.compare(progs.data_dependent, x, repeats=1)
    assert r.trace_error is not None
    assert progs.line_of(progs.data_dependent, "branch") in r.trace_error
    assert "dg.where" in r.trace_error
    assert r.eager_time > 0 and r.eager_tape_nodes > 0 and r.eager_saved_bytes >= 0
    assert r.compiled_time is None and r.speedup is None and r.break_even_calls is None
    text = str(r)
    assert "tracing failed" in text and "eager" in text
    assert json.loads(r.to_json())["trace_error"] == r.trace_error
    lines = _table([r], None).splitlines()
    assert lines[0] == f"data_dependent: {r.verdict}" and "tracing failed" in r.verdict
    row = lines[lines.index("") + 3]
    assert row.startswith("data_dependent") and "trace failed" in row
