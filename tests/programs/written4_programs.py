"""A fourth set of programs written for these tests in the manner of public PyTorch
programs (in ``written4/``): see `harness.ProgramSet`.

Record torch's side (a Python with torch, from the repository root):
``python -m tests.programs.written4_programs [NAME ...]`` writes ``goldens/written4/``.
"""

from __future__ import annotations

import sys

from .harness import ProgramSet

PROGRAMS = ("yunjey_basics", "yunjey_cnn", "yunjey_birnn", "yunjey_lm", "yunjey_gan",
            "yunjey_resnet", "quickstart", "d2l_scratch", "packed_rnn",
            "mha_seq2seq", "textcnn", "recsys", "dist_policy", "sn_gan")
SET = ProgramSet("written4", PROGRAMS)
load, run, golden = SET.load, SET.run, SET.golden

if __name__ == "__main__":
    SET.record(sys.argv[1:])
