"""A function that draws from Python's ``random`` module (or NumPy's global generator)
while it is traced would have those draws baked into its graph and repeated on every
call (PyTorch's tutorial DynamicNet: ``for exp in range(4, random.randint(4, 6))``).
``dg.compile`` runs such a signature eagerly with a warning naming the way out, and the
trace leaves both generators as it found them, so the eager calls draw what they would
have drawn without ``dg.compile``."""

from __future__ import annotations

import random

import numpy as np
import pytest

import dualgraph as dg


def _dynamic(x: dg.Tensor) -> dg.Tensor:
    y = x * 2
    for _ in range(random.randint(0, 3)):
        y = y + x
    return y.sum()


def _numpy_noise(x: dg.Tensor) -> dg.Tensor:
    return x.sum() + float(np.random.rand())


@pytest.mark.parametrize("fn, seed", [(_dynamic, random.seed), (_numpy_noise, np.random.seed)])
def test_global_random_draws_run_eagerly_and_equal_eager_mode(fn, seed) -> None:
    x = dg.ones(3)
    seed(0)
    want = [fn(x).item() for _ in range(6)]
    f = dg.compile(fn)
    seed(0)
    with pytest.warns(RuntimeWarning, match="draws from .*random.*pass them as arguments"):
        got = [f(x).item() for _ in range(6)]
    assert got == want
    assert len(set(want)) > 1  # the draws do change the result


def test_strict_raises_a_trace_error() -> None:
    f = dg.compile(_dynamic, strict=True)
    state = random.getstate()
    with pytest.raises(dg.TraceError, match="Python's random module"):
        f(dg.ones(3))
    assert random.getstate() == state
