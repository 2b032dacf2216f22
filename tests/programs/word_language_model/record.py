"""Record PyTorch's initial weights and ten training-step losses of the word language model
(model.py, with step.py's training step) into ``goldens.npz``.

Run with a Python that has torch, from the repository root:

    PYTHONPATH=. /work/venv/bin/python tests/programs/word_language_model/record.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[2]))

from tests.programs.word_language_model.config import VARIANTS, setup  # noqa: E402


def main() -> None:
    out: dict[str, np.ndarray] = {"_torch_version": np.array(torch.__version__)}
    for variant in VARIANTS:
        model_mod, step, data = setup(torch, variant)
        for key, value in step.model.state_dict().items():
            out[f"{variant}/param.{key}"] = value.detach().numpy().copy()
        out[f"{variant}/data"] = data
        losses = []
        hidden = None if variant == "Transformer" else step.model.init_hidden(step.args.batch_size)
        source = torch.from_numpy(data)
        for i in range(0, step.args.steps * step.args.bptt, step.args.bptt):
            batch, targets = step.get_batch(source, i)
            loss, hidden = step.train_step(batch, targets, hidden)
            losses.append(loss.item())
        out[f"{variant}/losses"] = np.array(losses)
        print(variant, losses)
    np.savez_compressed(HERE / "goldens.npz", **out)


if __name__ == "__main__":
    main()
