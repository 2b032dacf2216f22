"""Record torch's results for tests/distributions/test_porting_distributions.py.

Run from the repository root with a Python that has torch:
``python -m tests.distributions.record_porting_goldens`` (writes
tests/distributions/porting_goldens.npz).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .._support.recording import record_arrays
from .porting_cases import CASES, run

OUT = Path(__file__).with_name("porting_goldens.npz")


def results(torch: Any) -> Iterator[tuple[str, dict]]:
    torch.set_default_dtype(torch.float64)
    for i, (name, _, _) in enumerate(CASES):
        yield name, run(torch, i)


def main() -> None:
    record_arrays(OUT, results)


if __name__ == "__main__":
    main()
