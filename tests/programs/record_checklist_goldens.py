"""Record torch's results for tests/programs/test_checklist.py.

Run from the repository root with a Python that has torch:
``python -m tests.programs.record_checklist_goldens`` (writes
tests/programs/checklist_goldens.npz).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from .._support.recording import record_beside
from .checklist_cases import CASES


def results(torch: Any) -> Iterator[tuple[str, dict]]:
    for name, fn in CASES:
        torch.manual_seed(0)
        yield name, fn(torch)


if __name__ == "__main__":
    record_beside(__file__, "checklist_goldens.npz", results)
