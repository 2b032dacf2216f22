"""Programs written for these tests in the manner of public PyTorch programs (in
``written/``): see `harness.ProgramSet`.

Record torch's side (a Python with torch, from the repository root):
``python -m tests.programs.written_programs [NAME ...]`` writes ``goldens/written/``.
"""

from __future__ import annotations

import sys

from .harness import ProgramSet

PROGRAMS = ("nn_tutorial", "lpwe", "blitz", "reinforce", "actor_critic", "vit", "siamese",
            "transfer", "per_sample", "maml", "checkpointed", "swa", "dirichlet_vae", "hogwild",
            "lstm_lm", "sac", "accum_resume", "bn_resnet", "tagger", "realnvp")
SET = ProgramSet("written", PROGRAMS)
load, run, golden = SET.load, SET.run, SET.golden

if __name__ == "__main__":
    SET.record(sys.argv[1:])
