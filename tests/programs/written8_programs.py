"""An eighth set of programs written for these tests in the manner of public PyTorch
programs (in ``written8/``): see `harness.ProgramSet`.

Record torch's side with ``python -m tests.programs.written_sets written8 [NAME ...]``.
"""

from __future__ import annotations

from .harness import ProgramSet

PROGRAMS = ("hf_gpt2", "hf_bert_finetune", "diffusion_unet", "moco_simsiam", "barlow_lars",
            "custom_optim", "chatbot", "speech_ctc", "transe", "tabnet")
SLOW = ()
SET = ProgramSet("written8", PROGRAMS, slow=SLOW, atol=1e-7)
