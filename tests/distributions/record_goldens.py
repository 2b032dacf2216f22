"""Record torch's results for tests/distributions/test_distributions.py.

Run from the repository root with a Python that has torch:
``python -m tests.distributions.record_goldens`` (writes tests/distributions/goldens.npz).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .cases import CASES, KL, run, run_kl

OUT = Path(__file__).with_name("goldens.npz")


def main() -> None:
    import torch

    arrays = {}
    for i, case in enumerate(CASES):
        for k, v in run(torch, i).items():
            arrays[f"{case[0]}/{k}"] = v
    for i, case in enumerate(KL):
        for k, v in run_kl(torch, i).items():
            arrays[f"kl-{case[0]}/{k}"] = v
    np.savez_compressed(OUT, **arrays)
    print(len(arrays), "arrays", "torch", torch.__version__)


if __name__ == "__main__":
    main()
