"""Record torch's side of tests/programs: initial weights and per-step losses.

Run from the repository root with a Python that has torch:
``python -m tests.programs.record_goldens`` (writes tests/programs/goldens/).
"""

from __future__ import annotations

import json

import numpy as np

from . import runners
from .harness import GOLDENS


def main() -> None:
    import torch

    GOLDENS.mkdir(exist_ok=True)
    meta = {"torch": torch.__version__, "programs": {}}
    for name in ("mingpt", "nanogpt", "mnist", "vae", "regression"):
        torch.manual_seed(0)
        out = getattr(runners, name)(torch)
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
    (GOLDENS / "losses.json").write_text(json.dumps(meta, indent=1))


if __name__ == "__main__":
    main()
