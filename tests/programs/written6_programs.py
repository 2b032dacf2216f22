"""A sixth set of programs written for these tests in the manner of public PyTorch
programs (in ``written6/``): see `harness.ProgramSet`.

Record torch's side (a Python with torch, from the repository root):
``python -m tests.programs.written6_programs [NAME ...]`` writes ``goldens/written6/``.
"""

from __future__ import annotations

import sys

from .harness import ProgramSet

PROGRAMS = ("d2l_softmax", "d2l_cnns", "d2l_rnn_scratch", "d2l_attention", "d2l_bert",
            "char_rnn_names", "optim_zoo", "autoencoders", "mpnn_graph", "seq2seq_tf",
            "lstm_forecast", "detect_triplet")
SET = ProgramSet("written6", PROGRAMS)
load, run, golden = SET.load, SET.run, SET.golden

if __name__ == "__main__":
    SET.record(sys.argv[1:])
