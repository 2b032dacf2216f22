"""The ``dualgraph`` command: ``compare`` (table, --json, --plot, bad names), ``explain
MODULE:FUNC``, run in-process through `dualgraph.cli.main` and once as ``python -m``."""

from __future__ import annotations

import builtins
import importlib
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from dualgraph import workloads
from dualgraph.cli import main

PNG = b"\x89PNG\r\n\x1a\n"
SCALAR = ["compare", "--quick", "--workload", "scalar"]


def test_compare_quick_prints_the_table(capsys, monkeypatch):
    compare_module = sys.modules["dualgraph.compare"]  # dualgraph.compare is the function
    # As in a fresh process: the warm-up is paid (and reported) once per process, and an
    # earlier test may have paid it already.
    monkeypatch.setattr(compare_module, "_WARMED_UP", None)
    assert main(SCALAR) == 0
    out, err = capsys.readouterr()
    lines = out.splitlines()
    # The verdict first, then the table.
    assert lines[0].startswith(("scalar: compiled ", "scalar: uncertain"))
    assert lines[1] == ""
    assert lines[2].split()[:4] == ["workload", "eager", "compiled", "speed-up"]
    row = next(line for line in lines[3:] if line.startswith("scalar"))
    assert "x" in row and "trace failed" not in row
    # Nodes: the tape of x*y + y**2 has three nodes, like its trace.
    (nodes,) = [t for t in row.split() if t.count("/") == 3]  # a NOISY flag may follow
    assert nodes.startswith("3/3/")
    assert "break-even" in out and "s in all, start-up and imports included)" in out
    assert "compare" in err and "scalar" in err  # progress to stderr, the table to stdout
    # Spreads, the compile's cache state, the break-even range; warm-up charged to no row.
    assert row.count("±") == 2 and ("cold" in row or "warm" in row)
    assert row.split("x (")[1].split(")")[0].count("-") == 1  # speed-up interval
    assert "interquartile range" in out and "process warm-up" in out
    assert "95% interval" in out
    if "NOISY" in row:
        assert "NOISY rows" in out and "  scalar: " in out


def test_compare_json(tmp_path, capsys):
    js = tmp_path / "r.json"
    assert main(SCALAR + ["--json", str(js)]) == 0
    assert f"wrote {js}" in capsys.readouterr().out
    data = json.loads(js.read_text())
    assert data["classifier"] is None
    (w,) = data["workloads"]
    assert w["name"] == "scalar" and w["trace_error"] is None
    assert w["speedup"] > 0 and w["compiled_time"] > 0
    assert [n["name"] for n in w["numerics"]] == ["output 0", "grad arg 0", "grad arg 1"]
    assert w["max_rel_error"] < 1e-5
    assert w["compile_cache"] in ("cold", "warm") and isinstance(w["noisy"], bool)
    assert w["timings"]["eager"]["q1"] <= w["eager_time"] <= w["timings"]["eager"]["q3"]
    lo, hi = w["break_even_spread"]
    assert lo <= w["break_even_calls"] and (hi is None or w["break_even_calls"] <= hi)
    assert data["warm_up_seconds"] >= 0


def test_compare_plot(tmp_path, capsys):
    pytest.importorskip("matplotlib")  # the optional [plot] extra
    png = tmp_path / "r.png"
    assert main(SCALAR + ["--plot", str(png)]) == 0
    assert f"wrote {png}" in capsys.readouterr().out
    assert png.read_bytes()[:8] == PNG


@pytest.fixture
def no_run(monkeypatch):
    """Makes running any workload an error: the checks must fail before the run."""
    def boom(*args, **kwargs):
        raise AssertionError("the run started")

    monkeypatch.setattr(importlib.import_module("dualgraph.compare"), "compare", boom)


def test_plot_without_matplotlib_fails_before_the_run(tmp_path, monkeypatch, capsys, no_run):
    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name == "matplotlib" or name.startswith("matplotlib."):
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    assert main(SCALAR + ["--plot", str(tmp_path / "p.png")]) == 2
    out, err = capsys.readouterr()
    assert "--plot needs matplotlib" in err and "pip install matplotlib" in err
    assert not (tmp_path / "p.png").exists()
    assert "scalar" not in out  # nothing ran


@pytest.mark.parametrize("where, message", [
    ("missing/r.json", "no such directory"),
    ("a_file/r.json", "no such directory"),
    (".", "is a directory"),
])
def test_unwritable_json_fails_before_the_run(tmp_path, capsys, no_run, where, message):
    (tmp_path / "a_file").write_text("")
    path = tmp_path / where
    t0 = time.perf_counter()
    assert main(SCALAR + ["--json", str(path)]) == 2
    assert time.perf_counter() - t0 < 2.0
    err = capsys.readouterr().err
    assert f"--json {path}" in err and message in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a_file"]  # nothing left behind


@pytest.mark.skipif(not os.path.exists("/proc/version"), reason="needs Linux /proc")
def test_unwritable_plot_path_fails_before_the_run(capsys, no_run):
    assert main(SCALAR + ["--plot", "/proc/version"]) == 2
    assert "--plot /proc/version: cannot write" in capsys.readouterr().err


def test_writable_json_path_is_left_as_it_was(tmp_path, capsys):
    from dualgraph.cli import _check_writable

    new, old = tmp_path / "new.json", tmp_path / "old.json"
    old.write_text("keep")
    assert _check_writable(str(new), "--json") is None and not new.exists()
    assert _check_writable(str(old), "--json") is None and old.read_text() == "keep"


def test_unknown_workload_lists_the_valid_ones(capsys):
    assert main(["compare", "--workload", "resnet"]) != 0
    err = capsys.readouterr().err
    assert "unknown workload 'resnet'" in err
    for name in list(workloads.WORKLOADS) + ["classifier"]:
        assert name in err


@pytest.fixture
def user_module(tmp_path, monkeypatch):
    (tmp_path / "my_model.py").write_text(textwrap.dedent("""\
        import numpy as np
        import dualgraph as dg

        def loss(x, w):
            return dg.tanh(x @ w).sum()

        def chain(x):
            return (dg.exp(x) * 2.0).sum()

        chain.example_args = (dg.tensor(np.ones(5, np.float32), requires_grad=True),)
        """))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "my_model"
    sys.modules.pop("my_model", None)


def test_explain_module_func_with_shapes(user_module, capsys):
    assert main(["explain", f"{user_module}:loss", "--shape", "4,3", "--shape", "3,2"]) == 0
    out = capsys.readouterr().out
    assert "== forward: traced" in out and "matmul" in out and "tanh" in out
    assert "def forward(" in out and "def backward(" in out
    assert "== source map" in out and "my_model.py:5" in out


def test_explain_module_func_with_example_args(user_module, capsys):
    assert main(["explain", f"{user_module}:chain"]) == 0
    out = capsys.readouterr().out
    assert "exp" in out and "my_model.py:8" in out


@pytest.mark.parametrize("target, message", [
    ("my_model", "MODULE:FUNC"),
    ("my_model:missing", "cannot load my_model:missing"),
    ("no_such_module_xyz:f", "cannot load"),
    ("my_model:loss", "needs example inputs"),
])
def test_explain_bad_targets(user_module, capsys, target, message):
    assert main(["explain", target]) == 2
    assert message in capsys.readouterr().err


def test_python_dash_m_dualgraph(tmp_path):
    js = tmp_path / "out.json"
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    proc = subprocess.run([sys.executable, "-m", "dualgraph", *SCALAR, "--json", str(js)],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("scalar: ")
    assert json.loads(js.read_text())["workloads"][0]["name"] == "scalar"
    # The total comes last: writing the files is part of the command's time.
    *_, wrote, total = [line for line in proc.stdout.splitlines() if line]
    assert wrote == f"wrote {js}" and total.endswith(" s in all, start-up and imports included)")
    bad = subprocess.run([sys.executable, "-m", "dualgraph", "compare", "--workload", "x"],
                         capture_output=True, text=True, env=env, timeout=120)
    assert bad.returncode == 2 and "valid workloads" in bad.stderr


def test_the_total_is_the_process_wall_time_start_up_included():
    # A second spent before dualgraph is imported is in the "(N s in all)" figure.
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    code = ("import time; time.sleep(1.0); from dualgraph.cli import _process_seconds; "
            "print(_process_seconds())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, timeout=120).stdout
    assert float(out) >= 1.0


def test_eta_remembers_what_each_workload_took(tmp_path, monkeypatch, capsys):
    from dualgraph import cli

    monkeypatch.setenv("DUALGRAPH_CACHE_DIR", str(tmp_path))
    assert main(SCALAR) == 0
    past = json.loads((tmp_path / cli.TIMES_FILE).read_text())
    (key,) = [k for k in past if k.endswith(":scalar")]
    assert key.startswith("quick:") and past[key] > 0
    # The next run's estimate for that workload is what it took, not the default guess.
    eta = cli._Eta(["scalar", "chain"], key.rsplit(":", 1)[0])
    assert eta.guess == {"scalar": past[key], "chain": cli._DEFAULT_GUESS}
    # A model workload never run here starts from its own guess, above the default.
    guess = cli._Eta(["cnn"], "full:1:None").guess["cnn"]
    assert guess == cli._FIRST_GUESS["cnn"] >= cli._DEFAULT_GUESS
    list(eta)


def test_workloads_build_and_run_eagerly():
    for name, w in workloads.WORKLOADS.items():
        fn, args = w.build(True)
        out = fn(*args)
        assert out.shape == () and out.requires_grad, name


def test_classifier_learns_the_synthetic_data():
    r = workloads.train_classifier(compiled=False, epochs=2)
    assert r["accuracy"] > 0.8 and r["steps"] == 2 * (512 // 64)
    assert r["seconds"] > r["first_step_seconds"] > 0


def test_compare_classifier_trains_eager_and_compiled(tmp_path, capsys):
    js = tmp_path / "c.json"
    assert main(["compare", "--quick", "--workload", "classifier", "--json", str(js)]) == 0
    out = capsys.readouterr().out
    assert "classifier (16->32->4 MLP, Adam, synthetic blobs, 24 steps):" in out
    assert "eager:" in out and "compiled:" in out and "per step" in out
    assert "(24 steps) per step" in out and "(23 steps) per step" in out and "±" in out
    c = json.loads(js.read_text())["classifier"]
    # The whole training step compiled trains the same network to the same accuracy.
    assert c["eager"]["accuracy"] == pytest.approx(c["compiled"]["accuracy"], abs=0.02)
    assert c["eager"]["loss"] == pytest.approx(c["compiled"]["loss"], rel=1e-3)
