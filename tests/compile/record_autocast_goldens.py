"""Record torch's CPU autocast runs for tests/compile/test_autocast.py.

Run from the repository root with a Python that has torch:
``python -m tests.compile.record_autocast_goldens`` (writes
tests/compile/autocast_goldens.json).
"""

from __future__ import annotations

import json
from pathlib import Path

from .autocast_cases import run

OUT = Path(__file__).with_name("autocast_goldens.json")


def main() -> None:
    import torch

    runs = {d: run(torch, d) for d in ("bfloat16", "float16")}
    OUT.write_text(json.dumps({"torch": torch.__version__, "runs": runs}, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
