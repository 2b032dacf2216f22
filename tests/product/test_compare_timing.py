"""`dg.compare`'s time: paired, interleaved rounds, the 95% interval of the median ratio,
CPU time on a busy machine, the noise flag's causes and the verdict line; and a compiled
function passed to `dg.compare` (it used to be timed as the "eager" side)."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

import dualgraph as dg

from . import _programs as progs

C = importlib.import_module("dualgraph.compare")  # the module: dg.compare is the function


class Machine:
    """A fake machine: calls spend CPU seconds, and the wall clock advances by the CPU
    time over the share of the CPU the process gets (``share(now)``), so a test sets the
    load as a function of time."""

    def __init__(self, share=lambda now: 1.0) -> None:
        self.wall = 0.0
        self.cpu = 0.0
        self.share = share

    def spend(self, seconds: float) -> None:
        self.wall += seconds / self.share(self.wall)
        self.cpu += seconds

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(C, "_wall", lambda: self.wall)
        monkeypatch.setattr(C, "_cpu", lambda: self.cpu)


def _paired(m: Machine, eager: float, compiled, **kw) -> C.Paired:
    work = compiled if callable(compiled) else (lambda now: compiled)
    return C.measure_paired(lambda: m.spend(eager), lambda: m.spend(work(m.wall)), **kw)


def test_median_interval_by_order_statistics():
    assert C.median_interval([1.0, 2.0, 3.0, 4.0, 5.0, 6.0]) == (3.5, 1.0, 6.0)
    # n = 20: P(Binomial(20, 1/2) <= 5) = 2.1% <= 2.5% < P(<= 6): the 6th and 15th values.
    assert C.median_interval([float(v) for v in range(1, 21)]) == (10.5, 6.0, 15.0)
    # Too few values for 95%: the range.
    assert C.median_interval([3.0, 1.0, 2.0]) == (2.0, 1.0, 3.0)


def test_eager_and_compiled_alternate_with_the_same_call_count(monkeypatch):
    m = Machine()
    m.install(monkeypatch)
    order = []

    def side(name, seconds):
        def call():
            order.append(name)
            m.spend(seconds)
        return call

    p = C.measure_paired(side("e", 10e-6), side("c", 2e-6), repeats=6, budget=10.0,
                         tick=lambda: order.append("|"))
    assert len(p.eager_wall) == len(p.compiled_wall) == p.rounds >= C.MIN_ROUNDS
    # Each round (ended by a tick) is one untimed and n timed eager calls and the same
    # compiled, the first side alternating; before the first round: one call each and
    # the calibration.
    first, *rounds, end = "".join(order).split("|")
    n = p.number
    assert end == "" and len(rounds) == p.rounds - 1
    expected = ["e" * (n + 1) + "c" * (n + 1) if k % 2 == 0 else "c" * (n + 1) + "e" * (n + 1)
                for k in range(p.rounds)]
    assert first.endswith(expected[0]) and rounds == expected[1:]


def test_load_drift_cancels_out_of_the_paired_ratio(monkeypatch):
    # The process's share of the CPU falls from 100% to 20% during the run: both
    # absolute times grow fivefold, but each round's ratio stays 5.
    m = Machine(share=lambda now: max(0.2, 1.0 - now))
    m.install(monkeypatch)
    p = _paired(m, 10e-6, 2e-6, repeats=40, budget=100.0, max_rounds=40, target=0.01)
    e = p.timing("eager")
    assert e.iqr_ratio > C.NOISY_INTERVAL  # the eager time alone is all over the place
    med, lo, hi = C.median_interval(p.ratios("wall"))
    assert med == pytest.approx(5.0, rel=0.02) and lo > 4.5 and hi < 5.5


def test_a_busy_machine_uses_the_cpu_time_ratio(monkeypatch):
    # Other processes take 40-90% of the CPU, changing from call to call: wall ratios
    # scatter, CPU ratios do not.
    rng = np.random.default_rng(0)
    m = Machine(share=lambda now: rng.uniform(0.1, 0.6))
    m.install(monkeypatch)
    p = _paired(m, 10e-6, 2e-6, repeats=30, budget=100.0, max_rounds=30, target=1e-9)
    r = dg.CompareReport("f", compile_time=0.1, compile_spread=(0.03, 0.1))
    C._apply_timing(r, p, compile_cpu=0.3, budget=100.0)
    assert r.speedup_basis == "CPU time" and r.speedup == r.cpu_speedup
    assert r.speedup == pytest.approx(5.0)
    assert r.speedup_spread[1] - r.speedup_spread[0] < 1e-6
    lo, hi = r.wall_speedup_spread
    assert hi / lo > 1.5  # the wall-time ratio alone would have been a guess
    assert max(r.cpu_share.values()) < C.BUSY_CPU and not r.noisy
    # Break-even on the same clock: the compile's CPU time over the CPU time saved per call.
    assert r.break_even_calls == pytest.approx(0.03 / (10e-6 - 2e-6))
    r.verdict = C.verdict(r)
    assert "measured on a busy machine" in r.verdict and "CPU-time ratio used" in r.verdict


def test_the_figure_and_basis_follow_the_cpu_share(monkeypatch):
    m = Machine(share=lambda now: 0.5)
    m.install(monkeypatch)
    p = _paired(m, 10e-6, 2e-6, repeats=10, budget=10.0)
    assert C._basis(p) == "cpu"
    assert C.median_interval(p.ratios("cpu"))[0] == pytest.approx(5.0)
    m2 = Machine()
    m2.install(monkeypatch)
    assert C._basis(_paired(m2, 10e-6, 2e-6, repeats=10, budget=10.0)) == "wall"


class Preempting(Machine):
    """A fake busy machine that preempts the process now and then, as a scheduler does:
    a call that is preempted waits (wall time passes, CPU time does not) and also pays
    ``refill`` times its own CPU time again for the caches that the other process
    evicted. Whether a call is preempted is drawn per call, with probability growing with
    its length (``rate`` preemptions per CPU second)."""

    def __init__(self, rate: float, refill: float, seed: int = 0) -> None:
        super().__init__()
        self.rng = np.random.default_rng(seed)
        self.rate, self.refill = rate, refill

    def spend(self, seconds: float) -> None:
        if self.rng.random() < 1 - np.exp(-self.rate * seconds):
            self.wall += 3e-3  # another process's time slice
            seconds *= 1 + self.refill
        self.wall += seconds
        self.cpu += seconds


def test_a_busy_machine_uses_the_rounds_no_other_process_entered(monkeypatch):
    # Eager calls take 2 ms, compiled 0.4 ms: five times faster on a quiet machine. A
    # preemption costs the preempted call 60% more CPU (the caches refill), and the long
    # eager rounds are preempted far more often, so the CPU-time ratio overstates the
    # speed-up; the rounds that no preemption entered measure it.
    m = Preempting(rate=800.0, refill=0.6)
    m.install(monkeypatch)
    p = _paired(m, 2e-3, 4e-4, repeats=60, budget=10.0, max_rounds=60)
    assert p.number == 1  # the rounds are one call each: many fall between preemptions
    assert C.median_interval(p.ratios("cpu"))[0] > 6.0  # the biased figure
    assert C._basis(p) == "clean"
    r = dg.CompareReport("f", compile_time=0.1, compile_spread=(0.1, 0.1))
    C._apply_timing(r, p, compile_cpu=1.0, budget=1.0)
    assert r.speedup_basis == "undisturbed rounds" and r.speedup == r.clean_speedup
    assert r.speedup == pytest.approx(5.0) and r.speedup_spread[1] - r.speedup_spread[0] < 1e-6
    assert C.MIN_ROUNDS <= r.clean_rounds < r.rounds
    assert r.timings["eager"]["clean_median"] == pytest.approx(2e-3)
    r.verdict = C.verdict(r)
    assert f"ratio of the {r.clean_rounds} of {r.rounds} rounds no other process entered" \
        in r.verdict and "measured on a busy machine" in r.verdict


def test_too_few_undisturbed_rounds_fall_back_to_cpu_time(monkeypatch):
    # Every eager call is preempted (rounds longer than any time slice): no clean rounds.
    m = Preempting(rate=1e6, refill=0.0)
    m.install(monkeypatch)
    p = _paired(m, 2e-3, 4e-4, repeats=10, budget=0.5)
    assert sum(p.clean()) == 0 and C._basis(p) == "cpu"
    assert C.median_interval(p.ratios("cpu"))[0] == pytest.approx(5.0)


def test_a_round_is_clean_when_both_sides_had_the_cpu():
    p = C.Paired(1, eager_wall=[1.0, 1.0, 2.0], eager_cpu=[0.99, 1.0, 1.0],
                 compiled_wall=[0.2, 0.5, 0.2], compiled_cpu=[0.2, 0.2, 0.2])
    assert p.clean() == [True, False, False]
    assert p.ratios("clean") == [pytest.approx(5.0)]


def test_a_drifting_ratio_is_noisy_and_says_so(monkeypatch):
    m = Machine()
    m.install(monkeypatch)
    # The compiled call gets 3x slower halfway through (a kernel swapped, say).
    p = _paired(m, 10e-6, lambda now: 2e-6 if now < 0.11 else 6e-6, repeats=20,
                budget=0.1, max_rounds=20, target=0.01)
    (reason,) = C._noise(p, "wall", 0.1)
    assert "drifted between rounds" in reason and "run it again" in reason


def test_a_busy_and_scattered_ratio_names_the_cpu_share(monkeypatch):
    rng = np.random.default_rng(1)
    m = Machine(share=lambda now: 0.5)
    m.install(monkeypatch)
    # Each call's cost scatters by 2x either way in every half of the run.
    p = C.measure_paired(lambda: m.spend(10e-6 * rng.uniform(0.5, 2.0)),
                         lambda: m.spend(2e-6 * rng.uniform(0.5, 2.0)), repeats=20,
                         budget=100.0, max_rounds=20, target=1e-9)
    (reason,) = C._noise(p, "cpu", 1.0)
    assert "other processes took the CPU" in reason and "taskset" in reason


def test_too_few_rounds_are_flagged_with_what_to_do(monkeypatch):
    m = Machine()
    m.install(monkeypatch)
    p = _paired(m, 10e-6, 2e-6, repeats=2, budget=0.0)
    assert p.rounds == 2
    reasons = C._noise(p, "wall", 0.0)
    assert reasons[0].startswith("too few rounds: 2") and "larger budget" in reasons[0]


def test_steady_measurement_is_not_noisy(monkeypatch):
    m = Machine()
    m.install(monkeypatch)
    p = _paired(m, 10e-6, 2e-6, repeats=6, budget=10.0)
    assert C._noise(p, "wall", 10.0) == []
    assert p.rounds == C.MIN_ROUNDS  # settled at once: no round more than needed


def _report(speedup, spread, **kw) -> dg.CompareReport:
    r = dg.CompareReport("f", speedup=speedup, speedup_spread=spread, compile_time=0.05,
                         compile_cache="warm", speedup_basis="wall time",
                         cpu_share={"eager": 1.0, "compiled": 1.0},
                         timings={"eager": {"median": 1e-3, "cpu_median": 1e-3}}, **kw)
    return r


def test_verdict_lines():
    fast = _report(4.7, (4.5, 4.9), break_even_calls=137.0)
    assert C.verdict(fast) == (
        "compiled is 4.7x faster (4.5-4.9); compiling (0.05 s, warm cache) pays after ~140 "
        "calls, about 0.14 s of your loop; measured with the CPU to itself, wall-time "
        "ratio used")
    unsure = C.verdict(_report(1.05, (0.9, 1.2)))
    assert unsure.startswith("uncertain: ") and "spans 1" in unsure
    slow = C.verdict(_report(0.5, (0.45, 0.55)))
    assert slow.startswith("compiled is 2x slower (1.82-2.22); compiling does not pay")


# ---------------------------------------------- a compiled function passed to compare
def test_a_compiled_function_is_compared_as_its_python_function(tiered):
    """The bimodal verdict: ``dg.compare(f)`` of a ``@dg.compile``d ``f`` timed ``f``'s
    compiled calls as the "eager" side, at tier 0 (the NumPy interpreter) before the
    background compile swapped in and at tier 1 after, so the verdict depended on when the
    worker finished. Now eager runs the Python function."""
    x, y = progs.inputs()
    f = dg.compile(progs.every_fate)
    r = dg.compare(f, x, y, repeats=6, budget=0.2, roofline=False, progress=False)
    assert f.stats.calls == 0  # the compiled function itself never ran
    plain = dg.graph_of(progs.every_fate(x, y))
    assert r.eager_tape_nodes == sum(1 for n in plain.nodes if n.op != "const") > 1
    assert any("dg.compile result" in n for n in r.notes)
    assert r.name == "every_fate"


def test_a_compiled_module_is_compared_as_its_module():
    dg.manual_seed(0)
    net = dg.nn.Sequential(dg.nn.Linear(4, 8), dg.nn.ReLU(), dg.nn.Linear(8, 1))
    cnet = dg.compile(net)
    r = dg.compare(cnet, dg.randn(16, 4), repeats=6, budget=0.1, roofline=False)
    assert cnet.stats.calls == 0 and r.eager_tape_nodes > 1
    assert any("Python module" in n for n in r.notes)


# ------------------------------------------------------------------------ progress
def test_progress_bar_names_the_stages(monkeypatch, capsys):
    monkeypatch.setattr(C, "PROGRESS_DELAY", 0.0)
    x, y = progs.inputs()
    dg.compare(progs.every_fate, x, y, repeats=6, budget=0.05, roofline=False, progress=True)
    err = capsys.readouterr().err
    assert "dg.compare every_fate" in err and "compiling" in err
    assert "timing eager and compiled" in err


def test_no_progress_bar_when_off(capsys):
    x, y = progs.inputs()
    dg.compare(progs.every_fate, x, y, repeats=6, budget=0.05, roofline=False, progress=False)
    assert capsys.readouterr().err == ""


def test_the_budget_is_cpu_time_so_a_busy_machine_runs_as_many_rounds(monkeypatch):
    monkeypatch.setattr(C, "_SETTLED", 0.0)  # never settled: the budget decides

    def rounds(share: float) -> int:
        rng = np.random.default_rng(2)
        m = Machine(share=lambda now: share)
        m.install(monkeypatch)
        p = C.measure_paired(lambda: m.spend(10e-6 * rng.uniform(0.5, 2.0)),
                             lambda: m.spend(2e-6 * rng.uniform(0.5, 2.0)), repeats=6,
                             budget=0.2, max_rounds=10_000, target=1e-3)
        return p.rounds

    idle = rounds(1.0)
    assert idle > C.MIN_ROUNDS and rounds(0.5) == idle
    # Past `WALL_CAP` times the budget in wall time it stops anyway.
    assert rounds(0.1) < idle
