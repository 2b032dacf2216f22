"""Record torch's packed-sequence results for tests/nn/test_packed.py.

Run from the repository root with a Python that has torch:
``python -m tests.nn.record_packed_goldens`` (writes tests/nn/packed_goldens.npz).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .packed_cases import cases, name, run

OUT = Path(__file__).with_name("packed_goldens.npz")


def main() -> None:
    import torch

    torch.manual_seed(0)
    arrays = {}
    for i, case in enumerate(cases()):
        for k, v in run(torch, case, seed=i).items():
            arrays[f"{name(case)}/{k}"] = v
    np.savez_compressed(OUT, **arrays)
    print(len(arrays), "arrays", "torch", torch.__version__)


if __name__ == "__main__":
    main()
