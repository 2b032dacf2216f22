"""A third set of programs written for these tests in the manner of public PyTorch
programs (in ``written3/``): see `harness.ProgramSet`.

Record torch's side (a Python with torch, from the repository root):
``python -m tests.programs.written3_programs [NAME ...]`` writes ``goldens/written3/``.
"""

from __future__ import annotations

import sys

from .harness import ProgramSet

PROGRAMS = ("dqn", "transformer_lm", "char_rnn", "fgsm", "wgan_gp", "simclr", "distill",
            "vqvae", "unet", "lora", "word2vec", "tabular", "mdn", "translation_transformer",
            "style_transfer")
SET = ProgramSet("written3", PROGRAMS)
load, run, golden = SET.load, SET.run, SET.golden

if __name__ == "__main__":
    SET.record(sys.argv[1:])
