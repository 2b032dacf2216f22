"""Record PyTorch's answers for `view_cases` into ``view_goldens.json``: per case, the
view's values, or None where PyTorch raises. Run by hand where torch is installed (not
in CI): ``python -m tests.ops.record_view_goldens``."""

from __future__ import annotations

import json
import pathlib

import torch

from .view_cases import build, cases

VIEW_ERROR = "view size is not compatible with input tensor's size and stride"


def main() -> None:
    out = []
    for case in cases():
        x = build(torch, case["base"], case["ops"])
        try:
            got = x.view(*case["shape"]).flatten().tolist()
        except RuntimeError as e:
            assert VIEW_ERROR in str(e), e
            got = None
        out.append({**case, "torch": got})
    path = pathlib.Path(__file__).with_name("view_goldens.json")
    path.write_text(json.dumps(out, separators=(",", ":")) + "\n")
    raised = sum(c["torch"] is None for c in out)
    print(f"{len(out)} cases, {raised} raise, written to {path}")


if __name__ == "__main__":
    main()
