"""Record PyTorch's optimizer and scheduler runs (``tests/optim/programs.py``) into
``optim.json``. Run with a Python that has torch, from the repository root:

    PYTHONPATH=. /work/venv/bin/python tests/goldens/optim_record.py
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from tests.optim.programs import (
    LBFGS_RUNS,
    OPTIMIZERS,
    opt_name,
    run_lbfgs,
    run_optimizer,
    run_scheduler,
    schedulers,
)

OUT = Path(__file__).resolve().parent / "optim.json"


def main() -> None:
    optimizers = {opt_name(n, kw, dt): run_optimizer(torch, n, kw, dt)
                  for n, kw in OPTIMIZERS for dt in ("float32", "float64")}
    scheds = {name: run_scheduler(torch, name) for name in schedulers(torch)}
    lbfgs = {f"{n}/{dt}": run_lbfgs(torch, kw, dt) for n, kw in LBFGS_RUNS
             for dt in ("float32", "float64")}
    data = {"_torch_version": torch.__version__, "optimizers": optimizers,
            "schedulers": scheds, "lbfgs": lbfgs}
    OUT.write_text(json.dumps(data, sort_keys=True, indent=0) + "\n")
    print(f"wrote {len(optimizers)} optimizer runs and {len(scheds)} scheduler runs to {OUT}")


if __name__ == "__main__":
    main()
