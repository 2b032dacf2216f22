"""Record torch's packed-sequence results for tests/nn/test_packed.py.

Run from the repository root with a Python that has torch:
``python -m tests.nn.record_packed_goldens`` (writes tests/nn/packed_goldens.npz).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .._support.recording import record_arrays
from .packed_cases import cases, name, run

OUT = Path(__file__).with_name("packed_goldens.npz")


def results(torch: Any) -> Iterator[tuple[str, dict]]:
    torch.manual_seed(0)
    for i, case in enumerate(cases()):
        yield name(case), run(torch, case, seed=i)


def main() -> None:
    record_arrays(OUT, results)


if __name__ == "__main__":
    main()
