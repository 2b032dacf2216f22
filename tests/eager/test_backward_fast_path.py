"""``loss.backward()`` on a compiled scalar loss over leaves hands its precomputed gradients
to ``.grad`` without the engine; anything the engine handles (hooks, retained gradients,
``create_graph``, a non-leaf input, anomaly mode, a freed node, an explicit gradient) goes
through the engine, and both give the same bits."""

from __future__ import annotations

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.eager import tensor as eager_tensor


def _loss(x, y):
    return (x * y + y * y * 0.5).sum()


F = dg.compile(_loss, tiered=False)


def _leaves(seed: int = 0):
    rng = np.random.default_rng(seed)
    return (dg.tensor(rng.standard_normal(5).astype(np.float32), requires_grad=True),
            dg.tensor(rng.standard_normal(5).astype(np.float32), requires_grad=True))


@pytest.fixture
def engine_calls(monkeypatch):
    """Counts the backward passes that went through the engine."""
    calls = []
    real = eager_tensor.run_backward

    def counted(*args, **kwargs):
        calls.append(args[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(eager_tensor, "run_backward", counted)
    return calls


def _bits(t):
    return t.grad.numpy().tobytes()


def test_leaves_skip_the_engine_with_the_engine_bits(engine_calls):
    x, y = _leaves()
    loss = F(x, y)
    assert loss.grad_fn.name() == "CompiledFunctionBackward"
    loss.backward()
    assert engine_calls == []
    x2, y2 = _leaves()
    dg.autograd.backward(F(x2, y2))  # the module function always runs the engine
    assert len(engine_calls) == 1
    assert _bits(x) == _bits(x2) and _bits(y) == _bits(y2)
    dg.testing.assert_close(x.grad.numpy(), y.numpy(), rtol=1e-6, atol=0, equal_nan=True,
                            check_dtype=False)


def test_accumulation_matches_the_engine(engine_calls):
    x, y = _leaves()
    x2, y2 = _leaves()
    for _ in range(3):
        F(x, y).backward()
        dg.autograd.backward(F(x2, y2))
    assert len(engine_calls) == 3
    assert _bits(x) == _bits(x2) and _bits(y) == _bits(y2)


def test_the_grad_is_the_leafs_own_array():
    x, y = _leaves()
    F(x, y).backward()
    gx = x.grad.numpy()
    assert gx.flags.writeable and gx.flags.c_contiguous
    assert not np.shares_memory(gx, y.grad.numpy())
    x.grad.zero_()  # writable: the optimizer's zero_grad(set_to_none=False) path
    assert not x.grad.numpy().any()


def test_retain_graph_twice_gives_fresh_arrays(engine_calls):
    x, y = _leaves()
    loss = F(x, y)
    loss.backward(retain_graph=True)
    first = x.grad
    x.grad = None
    loss.backward()
    assert engine_calls == []
    assert not np.shares_memory(first.numpy(), x.grad.numpy())
    np.testing.assert_array_equal(first.numpy(), x.grad.numpy())
    with pytest.raises(RuntimeError, match="retain_graph"):
        loss.backward()  # freed: the engine raises


def test_a_hook_on_a_leaf_uses_the_engine(engine_calls):
    x, y = _leaves()
    x.register_hook(lambda g: g * 2)
    F(x, y).backward()
    assert len(engine_calls) == 1
    dg.testing.assert_close(x.grad.numpy(), 2 * y.numpy(), rtol=1e-6, atol=0, equal_nan=True,
                            check_dtype=False)


def test_a_hook_on_the_loss_uses_the_engine(engine_calls):
    x, y = _leaves()
    loss = F(x, y)
    loss.register_hook(lambda g: g * 3)
    loss.backward()
    assert len(engine_calls) == 1
    dg.testing.assert_close(x.grad.numpy(), 3 * y.numpy(), rtol=1e-6, atol=0, equal_nan=True,
                            check_dtype=False)


def test_retain_grad_uses_the_engine(engine_calls):
    x, y = _leaves()
    loss = F(x, y)
    loss.retain_grad()
    loss.backward()
    assert len(engine_calls) == 1
    assert loss.grad.item() == 1.0


def test_create_graph_uses_the_engine(engine_calls):
    x, y = _leaves()
    with pytest.raises(RuntimeError, match="through a compiled function is not supported"):
        F(x, y).backward(create_graph=True)
    assert len(engine_calls) == 1


def test_an_explicit_gradient_uses_the_engine(engine_calls):
    x, y = _leaves()
    F(x, y).backward(dg.tensor(2.0))
    assert len(engine_calls) == 1
    dg.testing.assert_close(x.grad.numpy(), 2 * y.numpy(), rtol=1e-6, atol=0, equal_nan=True,
                            check_dtype=False)


def test_a_non_leaf_input_uses_the_engine(engine_calls):
    x, y = _leaves()
    F(x * 1.0, y).backward()
    assert len(engine_calls) == 1
    dg.testing.assert_close(x.grad.numpy(), y.numpy(), rtol=1e-6, atol=0, equal_nan=True,
                            check_dtype=False)


def test_anomaly_mode_uses_the_engine(engine_calls):
    x, y = _leaves()
    loss = F(x, y)
    with dg.detect_anomaly():
        loss.backward()
    assert len(engine_calls) == 1


def test_an_input_changed_in_place_raises_as_the_engine_does(engine_calls):
    x, y = _leaves()
    loss = F(x, y)
    with dg.no_grad():
        y += 1
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        loss.backward()
    assert engine_calls == []


def test_a_dead_leaf_is_skipped():
    x, y = _leaves()
    loss = F(x, y)
    del x
    loss.backward()
    assert y.grad is not None
