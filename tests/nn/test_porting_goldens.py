"""Functional forms ported programs use (tests/nn/porting_cases.py): values and gradients
equal torch's (float64 goldens from record_porting_goldens.py), gradients equal finite
differences, and compiled equals eager."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.testing import assert_close, gradcheck

from .porting_cases import CASES, arguments, run

GOLD = np.load(Path(__file__).with_name("porting_goldens.npz"))
NAMES = [c[0] for c in CASES]
F = dg.nn.functional


@pytest.mark.parametrize("i", range(len(CASES)), ids=NAMES)
def test_matches_torch(i: int) -> None:
    name = NAMES[i]
    want = {k[len(name) + 1:]: GOLD[k] for k in GOLD.files if k.startswith(name + "/")}
    got = run(dg, i)
    assert sorted(got) == sorted(want)
    for k, v in want.items():
        assert_close(got[k], v, rtol=1e-9, atol=1e-11, msg=f"{name}: {k}")


@pytest.mark.parametrize("i", range(len(CASES)), ids=NAMES)
def test_gradients_match_finite_differences(i: int) -> None:
    _, fn, _ = CASES[i]
    (x,) = arguments(dg, i)
    assert gradcheck(lambda x: fn(dg, x), x.detach().requires_grad_(), atol=1e-6, rtol=1e-5)


def test_bicubic_compiled_equals_eager_in_float32():
    def f(x):
        return (F.interpolate(x, size=(7, 5), mode="bicubic"),
                F.interpolate(x, scale_factor=2, mode="bicubic", align_corners=True))

    c = dg.compile(f, tiered=False)
    x = dg.tensor(np.linspace(-1, 1, 24, dtype=np.float32).reshape(1, 2, 3, 4),
                  requires_grad=True)
    eager, compiled = f(x), c(x)
    for e, k in zip(eager, compiled):
        assert_close(k, e, rtol=1e-6, atol=1e-6)
    ge = dg.grad(sum(e.sum() * 1.5 for e in eager), x)[0]
    gc = dg.grad(sum(k.sum() * 1.5 for k in compiled), x)[0]
    assert_close(gc, ge, rtol=1e-5, atol=1e-6)
    assert c.stats.traces == 1


def test_bicubic_wants_a_4d_input():
    with pytest.raises(NotImplementedError, match="bicubic mode needs 4D"):
        F.interpolate(dg.ones(1, 1, 3), size=5, mode="bicubic")
