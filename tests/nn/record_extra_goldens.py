"""Record torch's results for tests/nn/test_layers_extra.py.

Run from the repository root with a Python that has torch:
``python -m tests.nn.record_extra_goldens`` (writes tests/nn/extra_goldens.npz).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from .._support.recording import case_results, record_beside
from .extra_cases import BAGS, CASES, run, run_bag


def results(torch: Any) -> Iterator[tuple[str, dict]]:
    yield from case_results(CASES, run)(torch)
    for i, (name, *_) in enumerate(BAGS):
        yield f"bag-{name}", run_bag(torch, i)


if __name__ == "__main__":
    record_beside(__file__, "extra_goldens.npz", results)
