"""A fourth set of programs written for these tests in the manner of public PyTorch
programs (in ``written4/``), run like ``written_programs``: each
``run(weights=None, compiled=False)`` trains on small synthetic data and returns
``{"losses", "weights", "fn"}``.

Record torch's side (a Python with torch, from the repository root):
``python -m tests.programs.written4_programs [NAME ...]`` writes ``goldens/written4/``.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from .harness import GOLDENS, bound_torch

WRITTEN = Path(__file__).resolve().parent / "written4"
GOLD = GOLDENS / "written4"
PROGRAMS = ("yunjey_basics", "yunjey_cnn", "yunjey_birnn", "yunjey_lm", "yunjey_gan",
            "yunjey_resnet", "quickstart", "d2l_scratch", "packed_rnn",
            "mha_seq2seq", "textcnn", "recsys", "dist_policy", "sn_gan")


def load(name: str, torch: Any) -> ModuleType:
    """``written4/<name>.py`` imported afresh with ``torch`` bound to ``torch``."""
    with bound_torch(torch):
        spec = importlib.util.spec_from_file_location(
            f"written4_{name}_{torch.__name__.replace('.', '_')}", WRITTEN / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
    return module


def run(name: str, torch: Any, compiled: bool = False, weights: Any = None) -> dict:
    """Program ``name`` under ``torch``; ``weights``: the recorded initial weights."""
    return load(name, torch).run(weights=weights, compiled=compiled)


def golden(name: str) -> tuple[dict, list]:
    """torch's initial weights and losses for ``name``."""
    with np.load(GOLD / f"{name}.npz") as f:
        weights = {k: f[k] for k in f.files}
    return weights, json.loads((GOLD / "losses.json").read_text())[name]


def main(names: list[str]) -> None:
    import torch
    import torch._dynamo  # noqa: F401 - imported before the harness rebinds torch's submodules

    torch.set_num_threads(1)
    GOLD.mkdir(exist_ok=True)
    path = GOLD / "losses.json"
    losses = json.loads(path.read_text()) if path.exists() else {}
    for name in names or PROGRAMS:
        out = run(name, torch)
        np.savez(GOLD / f"{name}.npz", **{k: np.asarray(v) for k, v in out["weights"].items()})
        losses[name] = [float(v) for v in out["losses"]]
        print(name, len(losses[name]), losses[name][:5])
    path.write_text(json.dumps(losses, indent=1) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
