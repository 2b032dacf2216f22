"""Record PyTorch's recurrent and transformer layers into ``rnn.npz`` and
``transformer.npz`` (the cases are in ``seq_cases.py``).

Run with a Python that has torch, from the repository root:

    PYTHONPATH=. /work/venv/bin/python tests/goldens/record_seq.py

Each case builds the module in PyTorch in float64 (seeded), and stores under
``<case>/``: ``param.<name>`` (the initial weights, which the test loads), ``input.<name>``,
``proj.<i>`` (the loss's projection of output ``i``), ``out.<i>``, ``grad.<param name>`` and
``grad.input.<name>``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from seq_cases import RNN_CASES, TRANSFORMER_CASES, make_inputs, run  # noqa: E402


def record(cases: dict) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {"_torch_version": np.array(torch.__version__)}
    for name, (kind, args, kwargs, call) in cases.items():
        torch.manual_seed(0)
        module = getattr(torch.nn, kind)(*args, **kwargs).double()
        for key, value in module.state_dict().items():
            out[f"{name}/param.{key}"] = value.numpy().copy()
        inputs = make_inputs(call, np.random.default_rng(0))
        for key, value in inputs.items():
            out[f"{name}/input.{key}"] = value
        for key, value in run(torch, module, call, inputs).items():
            out[f"{name}/{key}"] = np.asarray(value)
    return out


def main() -> None:
    for file, cases in (("rnn.npz", RNN_CASES), ("transformer.npz", TRANSFORMER_CASES)):
        np.savez_compressed(HERE / file, **record(cases))
        print("wrote", HERE / file)


if __name__ == "__main__":
    main()
