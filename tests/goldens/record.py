"""Record PyTorch's results for the parity programs into ``goldens.json``.

Run with a Python that has torch (never the project's venv), from the repository root:

    PYTHONPATH=. /work/venv-torch/bin/python tests/goldens/record.py

Each program in ``programs.py`` runs once in PyTorch; its outputs, the gradients of its
inputs, dtypes, shapes and any exception (type and message) are written as JSON. A
program's ``match`` phrase must occur in PyTorch's message, so the phrase dualgraph is held
to is one PyTorch really says.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from programs import PROGRAMS, execute  # noqa: E402

GOLDENS = HERE / "goldens.json"


def record() -> dict:
    torch.set_default_dtype(torch.float32)
    results = {}
    for name, prog in PROGRAMS.items():
        r = execute(torch, F, prog)
        r.pop("exception", None)
        err = r.get("error")
        if prog.match is not None:
            if err is None:
                raise SystemExit(f"{name}: has match={prog.match!r} but PyTorch did not raise")
            if prog.match.lower() not in err["message"].lower():
                raise SystemExit(f"{name}: PyTorch's message does not contain "
                                 f"{prog.match!r}: {err['message']!r}")
        results[name] = r
    return results


def main() -> None:
    results = record()
    lines = [f"  {json.dumps(k)}: {json.dumps(v, sort_keys=True)}" for k, v in results.items()]
    text = ("{\n" + f'  "_torch_version": {json.dumps(torch.__version__)},\n'
            + ",\n".join(lines) + "\n}\n")
    GOLDENS.write_text(text)
    errors = sum(1 for r in results.values() if "error" in r)
    print(f"wrote {len(results)} programs ({errors} raise in PyTorch) to {GOLDENS}")


if __name__ == "__main__":
    main()
