"""Every set of programs written for these tests in the manner of public PyTorch programs
(`harness.ProgramSet`), run by ``test_written_programs.py``. A new set is a module beside
these defining its ``SET``, and one line in `SETS`.

Record torch's side (a Python with torch, from the repository root):
``python -m tests.programs.written_sets DIRECTORY [NAME ...]`` writes
``goldens/<DIRECTORY>/``.
"""

from __future__ import annotations

import sys

from . import (
    written3_programs,
    written4_programs,
    written5_programs,
    written6_programs,
    written7_programs,
    written8_programs,
    written9_programs,
    written10_programs,
    written11_programs,
    written12_programs,
    written13_programs,
    written_programs,
)

SETS = (
    written_programs.SET,
    written3_programs.SET,
    written4_programs.SET,
    written5_programs.SET,
    written6_programs.SET,
    written7_programs.SET,
    written8_programs.SET,
    written9_programs.SET,
    written10_programs.SET,
    written11_programs.SET,
    written12_programs.SET,
    written13_programs.SET,
)

if __name__ == "__main__":
    {s.directory: s for s in SETS}[sys.argv[1]].record(sys.argv[2:])
