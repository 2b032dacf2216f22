"""Record torch's numbers for tests/nn/test_norm_params.py and
tests/nn/test_embedding_renorm.py.

Run from the repository root with a Python that has torch:
``python -m tests.nn.record_norm_param_goldens`` (writes tests/nn/norm_param_goldens.npz).
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np

from .norm_param_cases import run, run_embedding, run_orthogonal

OUT = Path(__file__).with_name("norm_param_goldens.npz")


def main() -> None:
    import torch

    warnings.simplefilter("ignore", FutureWarning)  # torch's old weight_norm is deprecated
    np.savez_compressed(OUT, torch=np.array(torch.__version__), **run(torch),
             **run_embedding(torch), **run_orthogonal(torch))


if __name__ == "__main__":
    main()
