"""The fuzz tests count the random programs they run; the count is printed at the end of
the session. (The kernel cache directory is set for the whole suite in tests/conftest.py.)
"""

from __future__ import annotations

from collections import Counter

# What the fuzz tests ran, by check ("interpreter", "compiled"); shown in the summary.
PROGRAMS: Counter = Counter()


def pytest_terminal_summary(terminalreporter, exitstatus, config):  # noqa: ARG001
    if PROGRAMS:
        counts = ", ".join(f"{k}: {v}" for k, v in sorted(PROGRAMS.items()))
        terminalreporter.write_line(f"dualgraph fuzz: random programs run ({counts})")
