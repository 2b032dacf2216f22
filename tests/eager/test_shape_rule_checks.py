"""Eager mode takes a result's shape and dtype from NumPy, but an op's shape rule still
checks its arguments: what it refuses, eager refuses too, as tracing does."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.eager import tensor as eager_tensor
from dualgraph.nn import functional as F
from dualgraph.ops import OPS


def test_a_check_only_the_shape_rule_makes_raises_eagerly():
    # NumPy computes a layer norm of integers happily; the rule (and PyTorch) refuse it.
    x = dg.tensor([[1, 2, 3]])
    with pytest.raises(TypeError, match="layer_norm: expected a floating-point input"):
        F.layer_norm(x, (3,))


def test_eager_and_tracing_refuse_the_same_call():
    x = dg.tensor([[1, 2, 3]])
    with pytest.raises(TypeError) as eager:
        F.layer_norm(x, (3,))
    with pytest.raises(TypeError) as traced:
        dg.trace(lambda t: F.layer_norm(t, (3,)), x)
    assert str(eager.value) == str(traced.value)


@pytest.fixture
def counted_rule(monkeypatch):
    """Counts the calls of layer_norm's shape rule."""
    op = OPS["layer_norm"]
    calls = []

    def infer(*args, **attrs):
        calls.append(1)
        return op.infer(*args, **attrs)

    counted = dataclasses.replace(op, infer=infer)
    monkeypatch.setattr(eager_tensor, "_CHECKED", {})
    return counted, calls


def test_the_rule_runs_once_per_signature(counted_rule):
    op, calls = counted_rule
    x = dg.randn(4, 3)
    for _ in range(3):
        dg.modes.bind(op, x, 1.0, 0.0, ndim=1, eps=1e-5)
    assert len(calls) == 1
    dg.modes.bind(op, dg.randn(5, 3), 1.0, 0.0, ndim=1, eps=1e-5)  # another shape
    dg.modes.bind(op, x.double(), 1.0, 0.0, ndim=1, eps=1e-5)  # another dtype
    dg.modes.bind(op, x, 1.0, 0.0, ndim=1, eps=1e-3)  # another attribute
    dg.modes.bind(op, x, 2, 0.0, ndim=1, eps=1e-5)  # another literal type
    assert len(calls) == 5


def test_a_refused_signature_keeps_raising(counted_rule):
    op, calls = counted_rule
    x = dg.tensor(np.arange(6).reshape(2, 3))
    for _ in range(2):
        with pytest.raises(TypeError):
            dg.modes.bind(op, x, 1.0, 0.0, ndim=1, eps=1e-5)
    assert len(calls) == 2


def test_the_cache_is_bounded(counted_rule, monkeypatch):
    op, calls = counted_rule
    monkeypatch.setattr(eager_tensor, "_CHECKED_MAX", 4)
    x = dg.randn(2, 3)
    for k in range(10):  # a literal that changes on every call (a schedule's value)
        dg.modes.bind(op, x, 1.0, float(k), ndim=1, eps=1e-5)
    assert len(eager_tensor._CHECKED) <= 4
    assert len(calls) == 10


def test_gradient_rules_ops_are_not_rechecked(monkeypatch):
    monkeypatch.setattr(eager_tensor, "_CHECKED", {})
    x = dg.randn(4, 3, requires_grad=True)
    loss = (F.layer_norm(x, (3,)) * x).sum()
    forward = set(eager_tensor._CHECKED)
    loss.backward()  # the rules' ops take checked forward values: no new signatures
    assert set(eager_tensor._CHECKED) == forward
    assert x.grad is not None


def test_a_hooks_ops_are_checked():
    x = dg.randn(2, 3, requires_grad=True)
    bad = dg.tensor([[1, 2, 3]])

    def hook(g):
        F.layer_norm(bad, (3,))  # user code inside backward: the rule still refuses it

    x.register_hook(hook)
    with pytest.raises(TypeError, match="layer_norm"):
        (x * 2).sum().backward()
