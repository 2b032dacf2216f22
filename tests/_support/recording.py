"""Writing PyTorch's results to a golden file (the ``record_*`` scripts; needs torch).

A recorder names its output and the results to write, and runs `record_beside` when run
as a module::

    results = case_results(CASES, run, float64=True)

    if __name__ == "__main__":
        record_beside(__file__, "functional_goldens.npz", results)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

Results = Callable[[Any], Iterable[tuple[str, dict[str, np.ndarray]]]]


def record_arrays(out: Path, results: Results) -> None:
    """Write ``results(torch)``, pairs of a case name and its named arrays, to ``out`` as a
    compressed ``.npz`` of ``"name/key"`` arrays, and say how many there were."""
    import torch

    arrays = {f"{name}/{key}": value
              for name, values in results(torch) for key, value in values.items()}
    np.savez_compressed(out, **arrays)
    print(len(arrays), "arrays", "torch", torch.__version__)


def record_beside(recorder: str, name: str, results: Results) -> None:
    """`record_arrays` into file ``name`` next to the recorder script ``recorder``
    (its ``__file__``)."""
    record_arrays(Path(recorder).with_name(name), results)


def case_results(cases: Sequence, run: Callable[[Any, int], dict],
                 float64: bool = False) -> Results:
    """The results of a case table whose rows start with their name: ``(name, run(torch,
    i))`` for row ``i`` (with ``float64``, under torch's default dtype float64)."""
    def results(torch: Any) -> Iterator[tuple[str, dict]]:
        if float64:
            torch.set_default_dtype(torch.float64)
        for i, case in enumerate(cases):
            yield case[0], run(torch, i)
    return results
