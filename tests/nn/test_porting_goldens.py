"""Functional forms ported programs use (tests/nn/porting_cases.py): values and gradients
equal torch's (float64 goldens from record_porting_goldens.py), gradients equal finite
differences, and compiled equals eager."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.testing import assert_close, gradcheck

from .._support.recording import assert_case_matches
from .porting_cases import CASES, arguments, run

GOLD = np.load(Path(__file__).with_name("porting_goldens.npz"))
NAMES = [c[0] for c in CASES]
F = dg.nn.functional


@pytest.mark.parametrize("i", range(len(CASES)), ids=NAMES)
def test_matches_torch(i: int) -> None:
    name = NAMES[i]
    assert_case_matches(run(dg, i), GOLD, name, rtol=1e-9, atol=1e-11)


# Scaled grids may land near a pixel centre or a reflection point, where the function has
# a kink and finite differences mean nothing; torch's gradients (above) cover those cases.
KINKED = {n for n in NAMES if n.startswith("grid_sample-reflection")}


@pytest.mark.parametrize("i", range(len(CASES)), ids=NAMES)
def test_gradients_match_finite_differences(i: int) -> None:
    if NAMES[i] in KINKED:
        pytest.skip("a kinked grid: compared with torch's gradient instead")
    _, fn, _ = CASES[i]
    (x,) = arguments(dg, i)
    assert gradcheck(lambda x: fn(dg, x), x.detach().requires_grad_(), atol=1e-6, rtol=1e-5)


def test_compiled_equals_eager_in_float32():
    def f(x, g):
        return (F.interpolate(x, size=(7, 5), mode="bicubic"),
                F.interpolate(x, scale_factor=2, mode="bicubic", align_corners=True),
                F.grid_sample(x, g, padding_mode="reflection", align_corners=False))

    c = dg.compile(f, tiered=False)
    x = dg.tensor(np.linspace(-1, 1, 24, dtype=np.float32).reshape(1, 2, 3, 4),
                  requires_grad=True)
    g = dg.tensor(np.linspace(-2.3, 2.1, 24, dtype=np.float32).reshape(1, 3, 4, 2),
                  requires_grad=True)
    eager, compiled = f(x, g), c(x, g)
    for e, k in zip(eager, compiled):
        assert_close(k, e, rtol=1e-6, atol=1e-6)
    weights = (1.5, -0.5, 2.0)
    ge = dg.grad(sum(e.sum() * s for e, s in zip(eager, weights)), (x, g))
    gc = dg.grad(sum(k.sum() * s for k, s in zip(compiled, weights)), (x, g))
    for a, b in zip(gc, ge):
        assert_close(a, b, rtol=1e-5, atol=1e-5)
    assert c.stats.traces == 1


def test_bicubic_wants_a_4d_input():
    with pytest.raises(NotImplementedError, match="bicubic mode needs 4D"):
        F.interpolate(dg.ones(1, 1, 3), size=5, mode="bicubic")
