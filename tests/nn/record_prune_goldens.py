"""Record the pruning goldens from PyTorch: ``python tests/nn/record_prune_goldens.py``."""

from __future__ import annotations

import pathlib
import sys

import numpy as np
import torch
import torch.nn.utils.prune as prune

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2]))
from tests.nn.prune_cases import build, prune_globally, prune_locally, record  # noqa: E402


def main() -> None:
    out = {}
    for tag, how in (("local", prune_locally), ("global", prune_globally)):
        m = build(torch)
        how(m, prune)
        for k, v in record(m, torch).items():
            out[f"{tag}_{k}"] = v
    np.savez(pathlib.Path(__file__).with_name("prune_goldens.npz"), **out)


if __name__ == "__main__":
    main()
