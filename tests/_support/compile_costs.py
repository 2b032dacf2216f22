"""Where a test run's CPU goes, test by test: a pytest plugin, off unless asked for.

    python -m pytest -p tests._support.compile_costs -n 2            # top 30
    python -m pytest -p tests._support.compile_costs --compile-costs=100

For each test (its fixtures' setup included, so a module-scoped fixture counts against
the first test that needs it) it counts Numba's compiles, the ones that built machine code
and not those loaded from a disk cache, with the process CPU time they took, and the CPU
time of the whole test. The summary lists the tests, then the files, by CPU time; with
pytest-xdist each worker's counts go to the controller, which prints one summary. Run it
with an empty kernel cache (``DUALGRAPH_TEST_CACHE_DIR``) to see a cold run's costs:
a test whose CPU is mostly compiles is one where a shared kernel (fewer distinct shapes,
one compiled function checked on many inputs) saves time.
"""

from __future__ import annotations

import collections
import os
import time
from typing import Any

import pytest
from numba.core import event

# test id -> [compiles, compile CPU s, test CPU s, test wall s]
_COSTS: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0, 0.0, 0.0])
_CURRENT = ["(collection)"]


class _Compiles(event.Listener):
    """Times the outermost compile only: a kernel's compile includes those of the
    functions it calls."""

    def __init__(self) -> None:
        self.depth = 0
        self.start = 0.0

    def on_start(self, ev: Any) -> None:
        self.depth += 1
        if self.depth == 1:
            self.start = time.process_time()

    def on_end(self, ev: Any) -> None:
        self.depth -= 1
        if self.depth == 0:
            row = _COSTS[_CURRENT[0]]
            row[0] += 1
            row[1] += time.process_time() - self.start


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--compile-costs", type=int, default=30, metavar="N",
                     help="compile_costs: how many tests and files the summary lists")


def pytest_configure(config: pytest.Config) -> None:
    event.register("numba:compile", _Compiles())


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Any:
    _CURRENT[0] = item.nodeid
    cpu, wall = time.process_time(), time.perf_counter()
    yield
    row = _COSTS[item.nodeid]
    row[2] += time.process_time() - cpu
    row[3] += time.perf_counter() - wall
    _CURRENT[0] = "(between tests)"


def pytest_sessionfinish(session: pytest.Session) -> None:
    out = getattr(session.config, "workeroutput", None)
    if out is not None:  # an xdist worker: hand the counts to the controller
        out["compile_costs"] = {k: list(v) for k, v in _COSTS.items()}


@pytest.hookimpl(optionalhook=True)  # an xdist hook
def pytest_testnodedown(node: Any, error: Any) -> None:
    for test, row in getattr(node, "workeroutput", {}).get("compile_costs", {}).items():
        mine = _COSTS[test]
        for k, v in enumerate(row):
            mine[k] += v


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    if hasattr(config, "workeroutput") or not _COSTS:
        return
    n = config.getoption("compile_costs")
    tr = terminalreporter
    rows = sorted(_COSTS.items(), key=lambda kv: -kv[1][2])
    total = [sum(r[k] for _, r in rows) for k in range(4)]
    tr.section(f"compile costs (pid {os.getpid()}): CPU s of tests and of Numba's compiles")
    tr.write_line(f"all tests: {total[2]:.1f} s CPU, {int(total[0])} compiles taking "
                  f"{total[1]:.1f} s CPU")
    tr.write_line(f"{'CPU s':>8} {'compile s':>9} {'compiles':>8} {'wall s':>8}  test")
    for test, (count, comp, cpu, wall) in rows[:n]:
        tr.write_line(f"{cpu:8.1f} {comp:9.1f} {int(count):8d} {wall:8.1f}  {test}")
    files: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0, 0.0, 0.0])
    for test, row in rows:
        f = files[test.split("::")[0]]
        for k, v in enumerate(row):
            f[k] += v
    tr.write_line(f"{'CPU s':>8} {'compile s':>9} {'compiles':>8} {'wall s':>8}  file")
    for name, (count, comp, cpu, wall) in sorted(files.items(), key=lambda kv: -kv[1][2])[:n]:
        tr.write_line(f"{cpu:8.1f} {comp:9.1f} {int(count):8d} {wall:8.1f}  {name}")
