"""Record torch's results for tests/distributions/test_distributions.py.

Run from the repository root with a Python that has torch:
``python -m tests.distributions.record_goldens`` (writes tests/distributions/goldens.npz).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from .._support.recording import case_results, record_beside
from .cases import CASES, KL, run, run_kl, run_mixture


def results(torch: Any) -> Iterator[tuple[str, dict]]:
    yield from case_results(CASES, run)(torch)
    for i, case in enumerate(KL):
        yield f"kl-{case[0]}", run_kl(torch, i)
    yield "mixture", run_mixture(torch)


if __name__ == "__main__":
    record_beside(__file__, "goldens.npz", results)
