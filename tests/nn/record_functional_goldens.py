"""Record torch's results for tests/nn/test_functional_surface.py.

Run from the repository root with a Python that has torch:
``python -m tests.nn.record_functional_goldens`` (writes tests/nn/functional_goldens.npz).
"""

from __future__ import annotations

from .._support.recording import case_results, record_beside
from .functional_cases import CASES, run

results = case_results(CASES, run, float64=True)

if __name__ == "__main__":
    record_beside(__file__, "functional_goldens.npz", results)
