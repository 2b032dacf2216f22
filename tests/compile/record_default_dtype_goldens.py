"""Record torch's dtypes for tests/compile/test_default_dtype.py.

Run from the repository root with a Python that has torch:
``python -m tests.compile.record_default_dtype_goldens`` (writes
tests/compile/default_dtype_goldens.json).
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

from .default_dtype_cases import run

OUT = Path(__file__).with_name("default_dtype_goldens.json")


def main() -> None:
    import torch

    warnings.simplefilter("ignore")  # set_default_tensor_type is deprecated in torch
    OUT.write_text(json.dumps({"torch": torch.__version__, "dtypes": run(torch)}, indent=1,
                              sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
