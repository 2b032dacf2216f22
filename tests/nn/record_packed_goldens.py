"""Record torch's packed-sequence results for tests/nn/test_packed.py.

Run from the repository root with a Python that has torch:
``python -m tests.nn.record_packed_goldens`` (writes tests/nn/packed_goldens.npz).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from .._support.recording import record_beside
from .packed_cases import cases, name, run


def results(torch: Any) -> Iterator[tuple[str, dict]]:
    torch.manual_seed(0)
    for i, case in enumerate(cases()):
        yield name(case), run(torch, case, seed=i)


if __name__ == "__main__":
    record_beside(__file__, "packed_goldens.npz", results)
