"""Record torch's results for tests/distributions/test_distributions.py.

Run from the repository root with a Python that has torch:
``python -m tests.distributions.record_goldens`` (writes tests/distributions/goldens.npz).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .._support.recording import record_arrays
from .cases import CASES, KL, run, run_kl, run_mixture

OUT = Path(__file__).with_name("goldens.npz")


def results(torch: Any) -> Iterator[tuple[str, dict]]:
    for i, case in enumerate(CASES):
        yield case[0], run(torch, i)
    for i, case in enumerate(KL):
        yield f"kl-{case[0]}", run_kl(torch, i)
    yield "mixture", run_mixture(torch)


def main() -> None:
    record_arrays(OUT, results)


if __name__ == "__main__":
    main()
