"""`dg.sweep` / ``dualgraph sweep`` on a two-worker Dask cluster (skipped without the
``sweep`` extra): every cell present and valid, resume, a killed worker's cell retried,
a failing cell recorded, a bad parameter refused before anything runs, the plot."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

pytest.importorskip("distributed")

import dualgraph as dg  # noqa: E402
from dualgraph.cli import main  # noqa: E402
from dualgraph.sweeps import SweepError, plot, runner  # noqa: E402

TINY = {"repeats": 1, "budget": 0.01, "progress": False}
FLAGS = ["--repeats", "1", "--budget", "0.01"]


@pytest.fixture(scope="module")
def cluster():
    """An existing two-worker cluster (with nannies, so a killed worker comes back)."""
    from distributed import LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None) as c:
        yield c.scheduler_address


@pytest.fixture(scope="module")
def grid(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[dict], Path]:
    """scalar and chain at two sizes, eager and compiled, on sweep's own pinned
    two-worker LocalCluster."""
    out = tmp_path_factory.mktemp("sweep") / "grid.json"
    rows = dg.sweep(["scalar", "chain"], {"n": [100, "1e3"]}, workers=2, out=str(out),
                    **TINY)
    return rows, out


def test_every_cell_is_present_and_valid(grid: tuple[list[dict], Path]) -> None:
    rows, out = grid
    cells = {(r["workload"], r.get("n"), r["mode"]) for r in rows}
    assert cells == {("scalar", None, "eager"), ("scalar", None, "compiled"),
                     ("chain", 100, "eager"), ("chain", 100, "compiled"),
                     ("chain", 1000, "eager"), ("chain", 1000, "compiled")}
    for r in rows:
        assert r["status"] == "ok", r["error"]
        assert r["eager_time"] > 0 and r["threads"] == 1 and r["dtype"] == "float32"
        if r["mode"] == "compiled":
            assert r["speedup"] > 0 and r["compile_time"] > 0
            assert r["compile_cache"] in ("cold", "warm") and r["max_rel_error"] < 1e-4
        else:
            assert r["compiled_time"] is None
    data = json.loads(out.read_text())
    (fp,) = data["machines"].values()
    assert fp["cores"] >= 1 and fp["cpu"] and fp["libraries"]["numpy"]
    cores = {tuple(c["cores"]) for c in data["cells"]}
    assert all(len(c) == 1 for c in cores), "each worker is pinned to one core"


def test_resume_runs_only_the_missing_cells(grid: tuple[list[dict], Path], tmp_path: Path,
                                            cluster: str, capsys: pytest.CaptureFixture
                                            ) -> None:
    _, out = grid
    data = json.loads(out.read_text())
    dropped = next(c for c in data["cells"] if c["workload"] == "chain"
                   and c["mode"] == "eager" and c["params"]["n"] == 100)
    data["cells"].remove(dropped)  # as if the sweep had been interrupted before it
    partial = tmp_path / "partial.json"
    partial.write_text(json.dumps(data))
    before = {c["key"]: c["pid"] for c in data["cells"]}
    png = tmp_path / "sweep.png"
    assert main(["sweep", "--workload", "scalar", "--workload", "chain", "--param",
                 "n=100,1e3", "--scheduler", cluster, "--out", str(partial), "--plot",
                 str(png), *FLAGS]) == 0
    assert "chain" in capsys.readouterr().out
    after = {c["key"]: c["pid"] for c in json.loads(partial.read_text())["cells"]}
    assert set(after) == set(before) | {dropped["key"]}
    assert {k: after[k] for k in before} == before, "finished cells were run again"
    assert png.stat().st_size > 1000 and png.read_bytes()[:4] == b"\x89PNG"


def test_resume_is_the_default_and_fresh_starts_over(tmp_path: Path, monkeypatch:
                                                     pytest.MonkeyPatch) -> None:
    import dualgraph.sweeps as sweeps

    seen = []
    monkeypatch.setattr(sweeps, "sweep", lambda *a, **k: seen.append(k) or [])
    args = ["sweep", "--workload", "scalar", "--out", str(tmp_path / "s.json")]
    assert main(args) == 0 and main(args + ["--resume"]) == 0
    assert main(args + ["--fresh"]) == 0
    assert [k["fresh"] for k in seen] == [False, False, True]
    out = tmp_path / "old.json"
    out.write_text(json.dumps({"version": 1, "machines": {},
                               "cells": [{"key": "k", "status": "ok"}]}))
    assert sweeps.Store(str(out)).done("k") and not sweeps.Store(str(out), fresh=True).done("k")


def test_a_killed_workers_cell_is_retried(cluster: str, tmp_path: Path) -> None:
    marker = tmp_path / "killed"
    rows = dg.sweep("scalar", modes=["eager"], scheduler=cluster, retries=2,
                    cell_options={runner.CRASH_ONCE: str(marker)}, out=str(tmp_path / "k.json"),
                    **TINY)
    assert marker.exists(), "the first attempt did not run"
    (r,) = rows
    assert r["status"] == "ok"
    (cell,) = json.loads((tmp_path / "k.json").read_text())["cells"]
    assert cell["worker_pid"] != int(marker.read_text()), "not rerun by another worker"


def test_a_cell_that_keeps_failing_is_recorded(cluster: str, tmp_path: Path) -> None:
    rows = dg.sweep("scalar", modes=["eager"], threads=[1], scheduler=cluster, retries=1,
                    timeout=0.001, **TINY)
    (r,) = rows
    assert r["status"] == "failed" and "timed out" in r["error"]


def test_a_bad_parameter_is_refused_before_anything_runs(tmp_path: Path, monkeypatch:
                                                         pytest.MonkeyPatch, capsys:
                                                         pytest.CaptureFixture) -> None:
    monkeypatch.setattr(runner, "run", lambda *a, **k: pytest.fail("a cell ran"))
    out = tmp_path / "never.json"
    with pytest.raises(SweepError, match="'size'.*chain: n, dtype"):
        dg.sweep("chain", {"size": [1]}, out=str(out))
    with pytest.raises(SweepError, match="parameter 'n'.*positive integer"):
        dg.sweep("chain", {"n": ["big"]})
    assert main(["sweep", "--workload", "chain", "--param", "width=3", "--out",
                 str(out)]) == 2
    assert "valid parameters (chain: n, dtype)" in capsys.readouterr().err
    assert not out.exists()


def test_plot_and_frame(grid: tuple[list[dict], Path], tmp_path: Path) -> None:
    rows, _ = grid
    png = tmp_path / "p.png"
    assert plot(rows, str(png)) == ["n"]
    assert png.read_bytes()[:4] == b"\x89PNG"
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame(rows)
    assert {"speedup", "break_even", "n", "dtype"} <= set(df.columns)


def test_import_dualgraph_does_not_import_dask() -> None:
    import subprocess
    import sys

    code = "import sys, dualgraph; print('distributed' in sys.modules, 'dask' in sys.modules)"
    env = dict(os.environ, PYTHONPATH=str(Path(dg.__file__).parents[1]))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, check=True).stdout
    assert out.split() == ["False", "False"]
