"""Record torch's results for tests/nn/test_functional_surface.py.

Run from the repository root with a Python that has torch:
``python -m tests.nn.record_functional_goldens`` (writes tests/nn/functional_goldens.npz).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .functional_cases import CASES, run

OUT = Path(__file__).with_name("functional_goldens.npz")


def main() -> None:
    import torch

    torch.set_default_dtype(torch.float64)
    arrays = {}
    for i, (name, _, _) in enumerate(CASES):
        for k, v in run(torch, i).items():
            arrays[f"{name}/{k}"] = v
    np.savez_compressed(OUT, **arrays)
    print(len(arrays), "arrays", "torch", torch.__version__)


if __name__ == "__main__":
    main()
