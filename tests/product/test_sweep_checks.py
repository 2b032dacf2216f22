"""What ``dualgraph sweep`` / `dg.sweep` check before any cell runs: the results file (never
overwrite a file that is not one, name a damaged one), the numbers given on the command
line, ``as_frame`` without pandas, and thread counts above the cores the process may use
(warned, and the real count recorded in the cell). No Dask needed."""

from __future__ import annotations

import builtins
import json
import os

import pytest

import dualgraph as dg
from dualgraph.cli import main
from dualgraph.sweeps import SweepError, cell, report, runner, short_threads

ARGS = ["sweep", "--workload", "scalar", "--serial", "--repeats", "1", "--budget", "0.01"]


@pytest.fixture
def no_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """Running any cell is an error: the checks must come first."""
    def boom(*args, **kwargs):
        raise AssertionError("a cell ran")

    monkeypatch.setattr(runner, "run", boom)


@pytest.mark.parametrize("content, words", [
    ('{"name": "my settings", "values": [1, 2]}', "is not a sweep results file"),
    ("[1, 2, 3]", "is not a sweep results file"),
    ('{"format": "dualgraph-sweep", "version": 1, "machines": {}, "cells": [{"ke',
     "is damaged"),
    ('{"version": 1, "machines": {}, "cells": [{"status": "ok"}]}', "is damaged"),
    ("\x00\x01binary\xff", "not JSON"),
])
@pytest.mark.parametrize("fresh", [[], ["--fresh"]])
def test_out_that_is_not_a_results_file_is_refused(tmp_path, capsys, no_run, content, words,
                                                    fresh):
    out = tmp_path / "settings.json"
    out.write_bytes(content.encode("latin-1"))
    assert main(ARGS + ["--out", str(out)] + fresh) == 2
    err = capsys.readouterr().err
    assert str(out) in err and words in err and "Traceback" not in err
    assert out.read_bytes() == content.encode("latin-1")  # untouched


def test_python_api_refuses_it_too(tmp_path, no_run):
    out = tmp_path / "notes.json"
    out.write_text('{"a": 1}')
    with pytest.raises(SweepError, match="is not a sweep results file"):
        dg.sweep("scalar", scheduler="serial", out=str(out), progress=False)
    with pytest.raises(SweepError, match="is not a sweep results file"):
        dg.sweep("scalar", scheduler="serial", out=str(out), fresh=True, progress=False)


def test_a_results_file_and_an_empty_file_are_accepted(tmp_path, monkeypatch):
    ran = []
    monkeypatch.setattr(runner, "run", lambda todo, *a, **k: ran.append(len(todo)))
    old = tmp_path / "old.json"  # written before the format field existed
    old.write_text(json.dumps({"version": 1, "machines": {}, "cells": []}))
    empty = tmp_path / "empty.json"
    empty.write_text("")
    for out in (old, empty):
        dg.sweep("scalar", scheduler="serial", out=str(out), progress=False)
    assert ran == [2, 2]  # eager and compiled, each time


@pytest.mark.parametrize("flag, value", [("--retries", "-1"), ("--budget", "-1"),
                                         ("--budget", "0"), ("--timeout", "0"),
                                         ("--timeout", "-5"), ("--budget", "nan")])
def test_bad_numbers_are_refused_by_the_parser(capsys, no_run, flag, value):
    with pytest.raises(SystemExit) as e:
        main(ARGS + [flag, value])
    assert e.value.code == 2
    assert flag in capsys.readouterr().err


def test_retries_zero_is_fine(capsys, monkeypatch):
    seen = {}

    def fake_run(todo, store, scheduler, workers, retries, progress):
        seen["retries"] = retries

    monkeypatch.setattr(runner, "run", fake_run)
    assert main(ARGS + ["--retries", "0"]) == 0
    assert seen["retries"] == 0


def test_as_frame_without_pandas_is_refused_before_running(monkeypatch, no_run):
    real_import = builtins.__import__

    def no_pandas(name, *args, **kwargs):
        if name == "pandas":
            raise ImportError("No module named 'pandas'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pandas)
    with pytest.raises(SweepError, match="as_frame=True needs pandas"):
        dg.sweep("scalar", scheduler="serial", as_frame=True, progress=False)


@pytest.fixture
def one_core(monkeypatch: pytest.MonkeyPatch) -> None:
    if not hasattr(os, "sched_getaffinity"):
        pytest.skip("no CPU affinity on this platform")
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0})


def test_more_threads_than_usable_cores_warns(one_core, capsys, monkeypatch):
    assert short_threads([1]) is None
    msg = short_threads([1, 2, 4])
    assert "may use 1 core(s)" in msg and "--threads 2,4" in msg and "threads_used" in msg
    monkeypatch.setattr(runner, "run", lambda *a, **k: None)
    assert main(ARGS + ["--threads", "1,2"]) == 0
    assert "warning: this process may use 1 core(s)" in capsys.readouterr().err
    with pytest.warns(RuntimeWarning, match="may use 1 core"):
        dg.sweep("scalar", threads=(2,), scheduler="serial", progress=False)


def test_the_cell_records_the_threads_it_really_had(one_core):
    rec = cell.run({"workload": "scalar", "params": {"dtype": "float32"}, "mode": "eager",
                    "threads": 2, "repeats": 1, "budget": 0.01})
    assert rec["status"] == "ok", rec.get("error")
    assert rec["threads_used"] == 1
    rec.update(workload="scalar", params={"dtype": "float32"}, mode="eager", threads=2,
               key="k", machine=rec["machine"]["id"])  # as the results file keeps it
    (row,) = report.rows([rec])
    assert row["threads"] == 2 and row["threads_used"] == 1
    line = next(ln for ln in report.table([row]).splitlines() if ln.startswith("scalar"))
    assert " 2(1) " in line
