"""A ninth set of programs written for these tests in the manner of public PyTorch
programs (in ``written9/``): see `harness.ProgramSet`.

Record torch's side with ``python -m tests.programs.written_sets written9 [NAME ...]``.
"""

from __future__ import annotations

from .harness import ProgramSet

PROGRAMS = ("cyclegan", "efficientnet", "neural_ode", "graphsage", "performer", "mixup_cutmix", "t5_relpos", "pixelcnn", "gp_regression", "set_transformer")
SET = ProgramSet("written9", PROGRAMS, atol=1e-7)
