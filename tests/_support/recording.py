"""Writing PyTorch's results to a golden file (the ``record_*`` scripts; needs torch)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np


def record_arrays(out: Path,
                  results: Callable[[Any], Iterable[tuple[str, dict[str, np.ndarray]]]]) -> None:
    """Write ``results(torch)``, pairs of a case name and its named arrays, to ``out`` as a
    compressed ``.npz`` of ``"name/key"`` arrays, and say how many there were."""
    import torch

    arrays = {f"{name}/{key}": value
              for name, values in results(torch) for key, value in values.items()}
    np.savez_compressed(out, **arrays)
    print(len(arrays), "arrays", "torch", torch.__version__)
