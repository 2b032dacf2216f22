"""Losses, layers and functional forms written the same way for torch and dualgraph
(tests/nn/functional_cases.py): values and gradients equal torch's (float64 goldens from
record_functional_goldens.py), gradients equal finite differences, and the errors and
module behaviour torch documents."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.testing import gradcheck

from .._support.recording import assert_case_matches
from .functional_cases import CASES, arguments, run

GOLD = np.load(Path(__file__).with_name("functional_goldens.npz"))
F = dg.nn.functional
NAMES = [c[0] for c in CASES]


@pytest.mark.parametrize("i", range(len(CASES)), ids=NAMES)
def test_matches_torch(i: int) -> None:
    name = NAMES[i]
    assert_case_matches(run(dg, i), GOLD, name, rtol=1e-9, atol=1e-11)


# Every case's float arguments are sampled where the function is smooth (the grid cases
# keep their points off the pixel edges, the kinks), except where torch's gradient is a
# convention rather than the derivative.
CONVENTION = {"gaussian_nll-clamped": "var's clamp at eps passes its gradient through"}


@pytest.mark.parametrize("i", range(len(CASES)), ids=NAMES)
def test_gradients_match_finite_differences(i: int) -> None:
    _, fn, _ = CASES[i]
    if NAMES[i] in CONVENTION:
        pytest.skip(CONVENTION[NAMES[i]])
    args = arguments(dg, i)
    floats = [k for k, a in enumerate(args) if getattr(a, "requires_grad", False)]

    def f(*xs):
        full = list(args)
        for k, x in zip(floats, xs):
            full[k] = x
        return fn(dg, *full)

    assert gradcheck(f, *[args[k].detach() for k in floats], atol=1e-6, rtol=1e-5)
