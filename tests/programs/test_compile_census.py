"""The compile census runs every program the scoreboard lists (their compiled training
steps, from torch's weights) and reports, besides the kernels and the CPU time, the
number of traces and whether the losses are torch's."""

from __future__ import annotations

import os

from . import compile_census


def test_the_census_knows_every_program_of_the_scoreboard():
    names = set(compile_census._programs())
    assert {"mingpt", "nanogpt", "mnist", "vae", "dcgan", "regression", "wlm-LSTM",
            "wlm-Transformer"} <= names
    assert {f"makemore-{k}" for k in ("transformer", "mlp", "rnn", "gru", "bow")} <= names


def test_the_census_knows_every_written_program():
    from .written_sets import SETS

    names = set(compile_census._programs())
    assert {f"{s.directory}/{n}" for s in SETS for n in s.programs} <= names


def test_a_written_programs_census_counts_its_kernels_without_compiling():
    """deep_ensemble's step (its first trace, nothing compiled): one kernel whose
    optimizer update repeats per parameter."""
    r = compile_census.run("written12/deep_ensemble", compile_=False)
    assert r["kernels"] == 1 and r["total"] > r["distinct"] >= 2


def test_a_census_reports_traces_and_torchs_losses(tmp_path, monkeypatch):
    """regression (its script, its ``nn.Linear`` compiled): the cheapest program, in a
    kernel cache of its own."""
    monkeypatch.setitem(os.environ, "DUALGRAPH_CACHE_DIR", str(tmp_path))
    r = compile_census.run("regression")
    assert r["kernels"] >= 1 and r["total"] >= r["distinct"] >= 1
    assert r["traces"] == 1 and r["match"] and r["max_rel"] < 1e-5
    assert r["cpu_total"] >= r["compile"] > 0


def test_dcgans_discriminator_passes_share_their_functions():
    """DCGAN's step runs the discriminator three times (the real batch, the fake one,
    the fake one for the generator's loss), its optimizer's update between the second
    and third: the three passes' forward and backward parts are the same functions, the
    loss against the real labels and the one against the fake labels (each label a scalar
    argument, not a folded constant) one more, and both optimizers' updates one (the census
    of the split kernel, nothing compiled)."""
    r = compile_census.run("dcgan", compile_=False)
    assert r["kernels"] == 1
    thrice = [code for code, n in r["codes"].items() if n == 3]
    assert len(thrice) >= 3
    assert max(r["codes"].values()) == 24  # Adam: 11 parameters of D, 13 of G
    assert r["distinct"] <= 9


def test_a_function_cut_to_its_signature_keeps_its_def_line():
    from tools.compile_profile import signature_only

    body = "def part(a0, w0, o0):\n    n0 = a0.shape[0]\n    for i0 in range(n0):\n" \
           "        o0[i0] = a0[i0]\n    return 0"
    stub, name = signature_only(body)
    assert (stub, name) == ("def part(a0, w0, o0):\n    return 0", "part")


def test_the_function_profile_times_each_functions_signature(tmp_path, monkeypatch):
    """A one-function kernel taken as `dg.compile` hands it over, profiled with
    ``signatures``: its row counts the arguments and times their compile alone."""
    import numpy as np

    import dualgraph as dg
    from tools.compile_profile import TakenError, build_swapped, profile

    monkeypatch.setitem(os.environ, "DUALGRAPH_CACHE_DIR", str(tmp_path))
    seen: list = []

    def take(graph, *args, write_to=None, **kw):
        seen.append((graph, dict(write_to or {})))
        raise TakenError

    with build_swapped(take):
        try:
            dg.compile(lambda x, y: (x * y + 1.0).sum(), tiered=False)(
                dg.tensor(np.ones(8, np.float32)), dg.tensor(np.ones(8, np.float32)))
        except TakenError:
            pass
    rows = [r for r in profile("", graphs=seen, signatures=True) if "cpu" in r]
    assert len(rows) == 1
    assert rows[0]["args"] == 3  # x, y and the result
    assert rows[0]["signature"] > 0
