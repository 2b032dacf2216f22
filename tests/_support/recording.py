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


def case_arrays(gold: Any, name: str) -> dict[str, np.ndarray]:
    """The arrays a recorder wrote for case ``name`` (``"name/key"`` in the file), by key."""
    prefix = name + "/"
    return {k[len(prefix):]: gold[k] for k in gold.files if k.startswith(prefix)}


def assert_case_matches(got: dict, gold: Any, name: str, **tolerance: Any) -> None:
    """``got``, case ``name``'s arrays by key, has exactly the keys recorded in ``gold`` for
    it, each close to its recorded array (`dualgraph.testing.assert_close`)."""
    from dualgraph.testing import assert_close

    want = case_arrays(gold, name)
    assert sorted(got) == sorted(want)
    for k, v in want.items():
        assert_close(got[k], v, msg=f"{name}: {k}", **tolerance)
