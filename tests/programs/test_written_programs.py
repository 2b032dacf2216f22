"""Every set of programs written in the manner of public PyTorch programs (`written_sets.SETS`),
run with ``torch`` bound to dualgraph from torch's initial weights: their losses (and the
figures they print) equal torch's, eagerly and with their steps under ``dg.compile``, with
the traces, warnings and tolerances each set expects (its module says why)."""

from __future__ import annotations

import pytest

import dualgraph as dg

from .harness import ProgramSet, run_like_golden
from .written_sets import SETS


def _cases(compiled: bool) -> list:
    cases = []
    for programs in SETS:
        for name in programs.programs:
            marks = []
            if compiled and name in programs.slow:
                marks.append(pytest.mark.slow)
            if compiled and name in programs.compile_fails:
                marks.append(pytest.mark.xfail(strict=True,
                                               reason=programs.compile_fails[name]))
            cases.append(pytest.param(programs, name, marks=marks,
                                      id=f"{programs.directory}-{name}"))
    return cases


@pytest.mark.parametrize(("programs", "name"), _cases(compiled=False))
def test_written_program_equals_torch_eagerly(programs: ProgramSet, name: str) -> None:
    out, want = run_like_golden(programs, name, dg, compiled=False)
    assert len(out["losses"]) == len(want)
    dg.testing.assert_close([float(v) for v in out["losses"]], want, rtol=1e-5,
                            atol=programs.atol(name, compiled=False), check_dtype=False)


@pytest.mark.parametrize(("programs", "name"), _cases(compiled=True))
def test_written_program_equals_torch_compiled(programs: ProgramSet, name: str) -> None:
    if name in programs.raises:
        with pytest.raises(dg.TraceError, match=programs.raises[name]) as info:
            run_like_golden(programs, name, dg, compiled=True)
        # the error names the program's line and the way out
        assert f"{name}.py" in str(info.value) and "dg.where" in str(info.value)
        return
    out, want = run_like_golden(programs, name, dg, compiled=True)
    dg.testing.assert_close([float(v) for v in out["losses"]], want, rtol=1e-5,
                            atol=programs.atol(name, compiled=True), check_dtype=False)
    fns = out["fn"] if isinstance(out["fn"], list) else [out["fn"]]
    assert [f.stats.traces for f in fns] == programs.traces.get(name, [1] * len(fns))
    for f in fns:
        if f.stats.traces:
            # compiled kernels ran (but in a call that filled an empty attribute, eagerly)
            assert f.stats.tier1_calls == f.stats.calls - f.stats.state_filling_calls > 0
