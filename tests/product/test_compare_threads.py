"""`dg.compare(..., threads=N)` and `dualgraph compare --threads N`."""

from __future__ import annotations

import numba
import pytest

import dualgraph as dg
from dualgraph.cli import main


def _fn(x):
    return (dg.tanh(x) * x).sum()


def test_threads_sets_the_pools_and_restores_them() -> None:
    from threadpoolctl import threadpool_info

    before = numba.get_num_threads()
    seen = {}

    def spy(x):
        seen["numba"] = numba.get_num_threads()
        seen["blas"] = {p["num_threads"] for p in threadpool_info()
                        if p["user_api"] == "blas"}
        return _fn(x)

    x = dg.randn(64, requires_grad=True)
    r = dg.compare(spy, x, repeats=1, budget=0.01, cold_warm=False, threads=1)
    assert seen["numba"] == 1 and seen["blas"] <= {1}
    assert r.threads == 1 and r.speedup is not None
    assert "1 threads" in str(r)
    assert numba.get_num_threads() == before


def test_compiled_false_measures_eager_only() -> None:
    r = dg.compare(_fn, dg.randn(64, requires_grad=True), repeats=1, budget=0.01,
                   compiled=False)
    assert r.eager_time > 0 and r.compiled_time is None and r.speedup is None


@pytest.mark.parametrize("bad", [0, -1, 1.5, True])
def test_bad_thread_counts_are_refused(bad: object) -> None:
    with pytest.raises(ValueError, match="threads"):
        dg.compare(_fn, dg.randn(4), threads=bad)


def test_cli_threads(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compare", "--quick", "--workload", "scalar", "--threads", "1"]) == 0
    assert "scalar" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["compare", "--threads", "0"])
