"""Record torch's results for tests/programs/test_checklist.py.

Run from the repository root with a Python that has torch:
``python -m tests.programs.record_checklist_goldens`` (writes
tests/programs/checklist_goldens.npz).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .._support.recording import record_arrays
from .checklist_cases import CASES

OUT = Path(__file__).with_name("checklist_goldens.npz")


def results(torch: Any) -> Iterator[tuple[str, dict]]:
    for name, fn in CASES:
        torch.manual_seed(0)
        yield name, fn(torch)


def main() -> None:
    record_arrays(OUT, results)


if __name__ == "__main__":
    main()
