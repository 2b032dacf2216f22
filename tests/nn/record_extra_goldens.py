"""Record torch's results for tests/nn/test_layers_extra.py.

Run from the repository root with a Python that has torch:
``python -m tests.nn.record_extra_goldens`` (writes tests/nn/extra_goldens.npz).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .extra_cases import BAGS, CASES, run, run_bag

OUT = Path(__file__).with_name("extra_goldens.npz")


def main() -> None:
    import torch

    arrays = {}
    for i, (name, _, _) in enumerate(CASES):
        for k, v in run(torch, i).items():
            arrays[f"{name}/{k}"] = v
    for i, (name, *_) in enumerate(BAGS):
        for k, v in run_bag(torch, i).items():
            arrays[f"bag-{name}/{k}"] = v
    np.savez_compressed(OUT, **arrays)
    print(len(arrays), "arrays", "torch", torch.__version__)


if __name__ == "__main__":
    main()
