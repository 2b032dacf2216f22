"""Record torch's TransformedDistribution results:
``python -m tests.distributions.record_transform_goldens`` (writes transform_goldens.npz)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
import torch.distributions as D

from .transform_cases import run


def main() -> None:
    out = {k: v.numpy() for k, v in run(torch, D).items()}
    np.savez(Path(__file__).with_name("transform_goldens.npz"), **out)


if __name__ == "__main__":
    main()
