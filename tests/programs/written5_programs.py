"""A fifth set of programs written for these tests in the manner of public PyTorch
programs (in ``written5/``): see `harness.ProgramSet`.

Record torch's side (a Python with torch, from the repository root):
``python -m tests.programs.written5_programs [NAME ...]`` writes ``goldens/written5/``.
"""

from __future__ import annotations

import sys

from .harness import ProgramSet

PROGRAMS = ("imagenet_resnet", "makemore_bn", "wavenet", "annotated_transformer",
            "nerf_mlp", "ddpm_toy", "moe", "clip_loss", "moduledict", "lit_model",
            "siamese", "einsum_pool")
SET = ProgramSet("written5", PROGRAMS)
load, run, golden = SET.load, SET.run, SET.golden

if __name__ == "__main__":
    SET.record(sys.argv[1:])
