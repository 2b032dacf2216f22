"""Record torch's side of tests/programs: initial weights and per-step losses.

Run from the repository root with a Python that has torch:
``python -m tests.programs.record_goldens [NAME ...]`` (writes tests/programs/goldens/).
With names, only those programs are recorded and added to losses.json; the other entries
are kept as they are (re-recording one changes its last digits).
"""

from __future__ import annotations

import json
import sys

import numpy as np

from . import runners, runners_examples, runners_tutorials
from .harness import GOLDENS

PROGRAMS = ("mingpt", "nanogpt", "mnist", "vae", "regression", "dcgan", "mnist_rnn",
            "gat", "gcn") + tuple(
    f"makemore-{t}" for t in runners.MAKEMORE_TYPES) + runners_examples.PROGRAMS + \
    runners_tutorials.PROGRAMS


def runner(name: str) -> object:
    """The function that runs program ``name`` (``makemore-<type>``: makemore's)."""
    program = name.partition("-")[0]
    for module in (runners, runners_examples, runners_tutorials):
        if hasattr(module, program):
            return getattr(module, program)
    raise KeyError(name)


def run(torch: object, name: str) -> dict:
    """Program ``name`` under ``torch`` (``makemore-<type>`` is makemore's model type)."""
    variant = name.partition("-")[2]
    kwargs = {"model_type": variant} if variant else {}
    return runner(name)(torch, **kwargs)


def main(names: list[str]) -> None:
    import torch

    GOLDENS.mkdir(exist_ok=True)
    path = GOLDENS / "losses.json"
    meta = json.loads(path.read_text()) if names and path.exists() else \
        {"torch": torch.__version__, "programs": {}}
    for name in names or PROGRAMS:
        torch.manual_seed(0)
        out = run(torch, name)
        if name == "regression":
            # What torch would draw next, for a run that takes a few more batches to reach
            # the script's stopping criterion (rounding differs after hundreds of steps).
            out["draws"] += [torch.randn(32).numpy() for _ in range(2000)]
        arrays = dict(out["weights"])
        for i, d in enumerate(out.get("draws") or []):
            arrays[f"__draw{i}"] = d
        np.savez(GOLDENS / f"{name}.npz", **arrays)
        meta["programs"][name] = {"losses": out["losses"], "printed": out.get("printed")}
        print(name, len(out["losses"]), out["losses"][:10])
    path.write_text(json.dumps(meta, indent=1))


if __name__ == "__main__":
    main(sys.argv[1:])
