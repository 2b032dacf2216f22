"""The word language model's small synthetic setting, shared by the recorder (PyTorch) and
the test (dualgraph): main.py's arguments, its model construction and its data layout."""

from __future__ import annotations

from argparse import Namespace
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from tests.programs.harness import import_program_file

HERE = Path(__file__).resolve().parent

NTOKENS = 16
VARIANTS = ("LSTM", "GRU", "RNN_TANH", "Transformer")


def args_for(variant: str) -> Namespace:
    """main.py's arguments, scaled down (its defaults for clip and nhead). Dropout 0 so that
    both libraries compute the same losses (their random streams differ); learning rate 2,
    not 20: at 20 the losses jump from step to step and float32 rounding differences between
    any two implementations grow about tenfold a step."""
    return Namespace(model=variant, emsize=8, nhid=16 if variant == "Transformer" else 8,
                     nlayers=2, lr=2.0, clip=0.25, batch_size=3, bptt=4, dropout=0.0,
                     tied=False, nhead=2, use_optimizer=False, steps=10)


def setup(torch: Any, variant: str, seed: int = 1111) -> tuple[ModuleType, ModuleType, Any]:
    """Import model.py and step.py with ``torch`` bound to ``torch``, build main.py's model
    and criterion for ``variant`` and bind them into step.py; returns the two modules and
    the token data (main.py's batchify layout: (time, batch) int64)."""
    tag = torch.__name__.replace(".", "_")
    model_mod = import_program_file(HERE / "model.py", torch, f"wlm_model_{tag}_{variant}")
    step = import_program_file(HERE / "step.py", torch, f"wlm_step_{tag}_{variant}")
    args = args_for(variant)
    torch.manual_seed(seed)
    if variant == "Transformer":
        model = model_mod.TransformerModel(NTOKENS, args.emsize, args.nhead, args.nhid,
                                           args.nlayers, args.dropout)
        # nn.Transformer's own layers keep their default dropout (0.1) whatever the model's
        # argument; switched off for the same reason as above.
        for m in model.modules():
            if type(m).__name__ == "Dropout":
                m.p = 0.0
            if type(m).__name__ == "MultiheadAttention":
                m.dropout = 0.0
    else:
        model = model_mod.RNNModel(variant, NTOKENS, args.emsize, args.nhid, args.nlayers,
                                   args.dropout, args.tied)
    step.args, step.model, step.criterion = args, model, torch.nn.NLLLoss()
    step.lr, step.ntokens = args.lr, NTOKENS
    if args.use_optimizer:
        step.optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    rng = np.random.default_rng(seed)
    data = rng.integers(0, NTOKENS, (args.steps * args.bptt + 1, args.batch_size))
    return model_mod, step, data.astype(np.int64)
