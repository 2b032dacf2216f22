"""Record torch's results for tests/ops/test_decomp.py.

Run from the repository root with a Python that has torch:
``python -m tests.ops.record_decomp_goldens`` (writes tests/ops/decomp_goldens.npz).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .decomp_programs import PROGRAMS

OUT = Path(__file__).with_name("decomp_goldens.npz")


def main() -> None:
    import torch

    torch.set_default_dtype(torch.float64)
    arrays = {f"{name}/{k}": v for name, fn in PROGRAMS.items() for k, v in fn(torch).items()}
    np.savez_compressed(OUT, **arrays)
    print(len(arrays), "arrays", "torch", torch.__version__)


if __name__ == "__main__":
    main()
