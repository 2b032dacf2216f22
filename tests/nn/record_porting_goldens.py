"""Record torch's results for tests/nn/test_porting_goldens.py.

Run from the repository root with a Python that has torch:
``python -m tests.nn.record_porting_goldens`` (writes tests/nn/porting_goldens.npz).
"""

from __future__ import annotations

from .._support.recording import case_results, record_beside
from .porting_cases import CASES, run

results = case_results(CASES, run, float64=True)

if __name__ == "__main__":
    record_beside(__file__, "porting_goldens.npz", results)
