"""Record torch's results for tests/nn/test_layers_extra.py.

Run from the repository root with a Python that has torch:
``python -m tests.nn.record_extra_goldens`` (writes tests/nn/extra_goldens.npz).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .._support.recording import record_arrays
from .extra_cases import BAGS, CASES, run, run_bag

OUT = Path(__file__).with_name("extra_goldens.npz")


def results(torch: Any) -> Iterator[tuple[str, dict]]:
    for i, (name, _, _) in enumerate(CASES):
        yield name, run(torch, i)
    for i, (name, *_) in enumerate(BAGS):
        yield f"bag-{name}", run_bag(torch, i)


def main() -> None:
    record_arrays(OUT, results)


if __name__ == "__main__":
    main()
