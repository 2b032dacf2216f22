"""`dg.utils.checkpoint`: the values and gradients of the plain call, PyTorch's reentrant
rule (no history when no input requires grad) and its keyword checks."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.testing import assert_close
from dualgraph.utils.checkpoint import checkpoint, checkpoint_sequential


def _seq() -> dg.nn.Sequential:
    dg.manual_seed(0)
    return dg.nn.Sequential(*[dg.nn.Linear(4, 4) if i % 2 == 0 else dg.nn.Tanh()
                              for i in range(6)])


def _grads(m: dg.nn.Module) -> list:
    return [p.grad.clone() for p in m.parameters()]


def test_checkpoint_equals_the_plain_call_with_gradients() -> None:
    m = _seq()
    x = dg.tensor(np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32),
                  requires_grad=True)
    m(x).sum().backward()
    want, want_x = _grads(m), x.grad.clone()
    m.zero_grad()
    x.grad = None
    checkpoint(m, x, use_reentrant=False).sum().backward()
    for g, w in zip(_grads(m), want):
        assert_close(g, w)
    assert_close(x.grad, want_x)
    for reentrant in (True, False):
        m.zero_grad()
        out = checkpoint_sequential(m, 2, x, use_reentrant=reentrant)
        assert_close(out, m(x))
        out.sum().backward()
        for g, w in zip(_grads(m), want):
            assert_close(g, w)


def test_reentrant_checkpoint_without_grad_inputs_records_no_history() -> None:
    m = _seq()
    x = dg.ones(2, 4)
    with pytest.warns(UserWarning, match="None of the inputs have requires_grad=True"):
        y = checkpoint(m, x, use_reentrant=True)
    assert not y.requires_grad
    assert checkpoint(m, x, use_reentrant=False).requires_grad
    with pytest.warns(UserWarning, match="use_reentrant parameter should be passed"):
        checkpoint(m, x.requires_grad_())


def test_checkpoint_keyword_arguments() -> None:
    def f(a, *, scale):
        return a * scale

    x = dg.ones(2, requires_grad=True)
    assert_close(checkpoint(f, x, scale=3.0, use_reentrant=False), dg.full((2,), 3.0))
    with pytest.raises(ValueError, match="Unexpected keyword arguments: scale"):
        checkpoint(f, x, scale=3.0, use_reentrant=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValueError, match="Unexpected keyword arguments"):
            checkpoint_sequential(_seq(), 2, x, use_reentrant=False, scale=1.0)


def test_checkpoint_in_a_compiled_step() -> None:
    m = dg.nn.Linear(3, 2)
    x = dg.ones(4, 3)

    def step(a):
        h = a
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = checkpoint(m, h, use_reentrant=True)  # no input needs grad: no history
        return out.sum(), checkpoint(m, h, use_reentrant=False).sum()

    f = dg.compile(step)
    a, b = f(x)
    ea, eb = step(x)
    assert_close(a, ea)
    assert_close(b, eb)
    assert not a.requires_grad and b.requires_grad
