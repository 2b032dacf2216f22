"""The compile worker and the first compiled call, from the outside: the worker imports
only dualgraph's code and the interpreter's packages (never the caller's working
directory), a Ctrl-C while Numba is first imported leaves later calls working, and the
tier counters count calls as they run."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import dualgraph as dg
from dualgraph.compile import specialize

ROOT = Path(__file__).resolve().parents[2]


def _python(code: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    full = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=cwd, env=full,
                          capture_output=True, text=True, timeout=600)


def test_worker_never_imports_the_callers_working_directory(tmp_path):
    """A `pickle.py` and a `numpy.py` in the directory the user's script runs from (its
    working directory when the worker starts) must not run inside the worker."""
    evil = tmp_path / "project"
    evil.mkdir()
    marker = tmp_path / "MARKER"
    # (Not numba.py: the calling process imports Numba after the chdir, through its own
    # path, which is the user's business.)
    for name in ("pickle", "numpy", "struct"):
        (evil / f"{name}.py").write_text(f"open({str(marker)!r}, 'a').write('{name} ')\n")
    code = f"""
        import os
        import dualgraph as dg
        from dualgraph.compile import tiered
        os.chdir({str(evil)!r})
        f = dg.compile(lambda x: x * 3 + 1, tiered=True)
        assert f(dg.ones(3)).tolist() == [4.0, 4.0, 4.0]
        assert tiered.wait(f, 300), f.stats.tier_failure
        assert f(dg.ones(3)).tolist() == [4.0, 4.0, 4.0]
        assert f.entries()[0].tier0 is False
        print("tier1")
    """
    r = _python(code, tmp_path, {"DUALGRAPH_CACHE_DIR": str(tmp_path / "cache"),
                                 "DUALGRAPH_TIERED": "1", "PYTHONPATH": f"{ROOT}{os.pathsep}."})
    assert r.returncode == 0, r.stderr
    assert "tier1" in r.stdout
    assert not marker.exists(), marker.read_text()


def test_worker_command_puts_no_working_directory_on_the_path():
    from dualgraph.compile import tiered

    cmd = tiered.worker_command()
    assert "-m" not in cmd
    env = tiered.worker_env()
    assert all(os.path.isabs(p) for p in env.get("PYTHONPATH", "/").split(os.pathsep))


def test_interrupted_numba_import_leaves_later_calls_working(tmp_path):
    """Ctrl-C while the first compiled call imports Numba (simulated: a KeyboardInterrupt
    raised by an import hook when ``numba.core.typing`` is first imported)."""
    code = """
        import sys
        import dualgraph as dg

        class Interrupt:
            fired = False
            def find_spec(self, name, path=None, target=None):
                if name == "numba.core.typing" and not Interrupt.fired:
                    Interrupt.fired = True
                    raise KeyboardInterrupt
                return None

        sys.meta_path.insert(0, Interrupt())
        f = dg.compile(lambda x: x * 2, tiered=False)
        try:
            f(dg.ones(2))
        except KeyboardInterrupt:
            print("interrupted")
        g = dg.compile(lambda x: x + 1, tiered=False)
        print(g(dg.ones(2)).tolist(), f(dg.ones(2)).tolist(), g.stats.kernels)
    """
    r = _python(code, tmp_path, {"DUALGRAPH_CACHE_DIR": str(tmp_path / "cache")})
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[:2] == ["interrupted", "[2.0, 2.0] [2.0, 2.0] 1"]


def test_tier1_calls_count_only_calls_served_compiled(tiered, monkeypatch, tmp_path):
    """While the first call is still being set up (its trace counted, the worker job being
    submitted), ``tier1_calls`` is 0: no call has run compiled."""
    monkeypatch.setenv("DUALGRAPH_CACHE_DIR", str(tmp_path / "cache"))
    seen = []
    start = specialize.tiered_start

    def spy(entry, *args, **kwargs):
        seen.append((f.stats.traces, f.stats.tier1_calls))
        return start(entry, *args, **kwargs)

    monkeypatch.setattr(specialize, "tiered_start", spy)
    # A graph no other test compiles: a kernel another test left in this process's memory
    # cache would serve the first call compiled.
    f = dg.compile(lambda x: x * 3.0625 - 1.4375)
    f(dg.ones(2))
    assert seen == [(1, 0)]
    assert f.stats.tier1_calls == 0 and f.stats.tier0_calls == 1
    from dualgraph.compile import tiered as tiering

    assert tiering.wait(f, 300), f.stats.tier_failure
    f(dg.ones(2))
    f(dg.ones(2))
    assert f.stats.tier1_calls == 2 and f.stats.tier0_calls == 1
    tiering.shutdown()
