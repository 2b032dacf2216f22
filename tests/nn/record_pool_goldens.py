"""Record torch's max_pool3d indices and max_unpool results for tests/nn/test_unpool.py.

Run from the repository root with a Python that has torch:
``python -m tests.nn.record_pool_goldens`` (writes tests/nn/pool_goldens.npz).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

OUT = Path(__file__).with_name("pool_goldens.npz")

# (input shape, max_pool3d keywords); inputs of small integers have many ties.
CASES = [
    ((2, 3, 5, 6, 7), {"kernel_size": 2}),
    ((2, 3, 5, 6, 7), {"kernel_size": (3, 2, 2), "stride": (2, 1, 2), "padding": 1}),
    ((3, 5, 6, 7), {"kernel_size": 2, "stride": 1, "dilation": 2}),
    ((1, 2, 5, 5, 5), {"kernel_size": (1, 3, 3), "stride": 2, "ceil_mode": True}),
    ((1, 1, 4, 4, 4), {"kernel_size": 3, "padding": 1, "stride": 2, "ceil_mode": True}),
]


def inputs(i: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(i)
    shape = CASES[i][0]
    return rng.standard_normal(shape), rng.integers(0, 3, shape).astype(np.float64)


def main() -> None:
    import torch
    import torch.nn.functional as F

    arrays = {}
    for i, (_, kw) in enumerate(CASES):
        for j, x in enumerate(inputs(i)):
            values, index = F.max_pool3d(torch.tensor(x), return_indices=True, **kw)
            arrays[f"{i}/{j}/values"] = values.numpy()
            arrays[f"{i}/{j}/indices"] = index.numpy()
            if not kw.get("padding") and not kw.get("dilation"):
                arrays[f"{i}/{j}/unpooled"] = F.max_unpool3d(
                    values, index, kw["kernel_size"], kw.get("stride"),
                    output_size=x.shape[-3:]).numpy()
    np.savez_compressed(OUT, **arrays)
    print(len(arrays), "arrays", "torch", torch.__version__)


if __name__ == "__main__":
    main()
