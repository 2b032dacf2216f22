"""``Embedding(max_norm=, norm_type=)`` and ``F.embedding(max_norm=)``: looked-up rows are
renormalised in place before the lookup, as torch's (goldens from
record_norm_param_goldens.py), eagerly and in a compiled training step (the renormalised
weight is written back; the gradient reaches the weight)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.testing import assert_close

from . import norm_param_cases as cases

GOLD = np.load(Path(__file__).with_name("norm_param_goldens.npz"))
KEYS = [k for k in GOLD.files if k.startswith("emb_")]


@pytest.fixture(scope="module")
def ours() -> dict:
    return cases.run_embedding(dg)


@pytest.mark.parametrize("key", KEYS)
def test_matches_torch(ours: dict, key: str) -> None:
    want, got = GOLD[key], ours[key]
    if want.dtype.kind == "U":
        assert str(got) == str(want)
    else:
        assert_close(got, want, rtol=1e-12, atol=1e-14, check_dtype=False, msg=key)
    assert sorted(ours) == sorted(KEYS)


def test_rows_not_looked_up_and_short_rows_are_untouched() -> None:
    w = np.array([[3.0, 4.0], [0.3, 0.4], [6.0, 8.0]])
    e = dg.nn.Embedding.from_pretrained(dg.tensor(w), max_norm=1.0)
    e(dg.tensor([1, 1]))
    np.testing.assert_array_equal(e.weight.numpy(), w)  # row 1 is within the norm
    e(dg.tensor([0]))
    assert_close(e.weight.numpy()[0], np.array([0.6, 0.8]), rtol=1e-6, atol=0.0)
    np.testing.assert_array_equal(e.weight.numpy()[2], w[2])


def test_errors() -> None:
    with pytest.raises(NotImplementedError, match="scale_grad_by_freq"):
        dg.nn.Embedding(4, 2, scale_grad_by_freq=True)


def _model(seed: int = 0):
    dg.manual_seed(seed)
    emb = dg.nn.Embedding(10, 4, max_norm=1.0)
    with dg.no_grad():
        emb.weight.mul_(2.0)  # most rows above the norm
    return dg.nn.Sequential(emb, dg.nn.Flatten(), dg.nn.Linear(12, 1))


def test_compiled_step_equals_eager() -> None:
    rng = np.random.default_rng(2)
    data = [(dg.tensor(rng.integers(0, 10, (5, 3))), dg.tensor(rng.standard_normal((5, 1)),
                                                                  dtype=dg.float32))
            for _ in range(3)]
    runs = []
    for compiled in (False, True):
        net = _model()
        opt = dg.optim.SGD(net.parameters(), lr=0.5)

        def step(i, y, net=net, opt=opt):
            opt.zero_grad()
            loss = ((net(i) - y) ** 2).mean()
            loss.backward()
            opt.step()
            return loss

        f = dg.compile(step) if compiled else step
        losses = [f(i, y).item() for i, y in data]
        runs.append((losses, net.state_dict(), f))
    (le, se, _), (lc, sc, f) = runs
    assert_close(lc, le, rtol=1e-5, atol=0.0)
    for k in se:
        assert_close(sc[k], se[k], rtol=1e-5, atol=1e-6, msg=k)
    assert f.stats.traces == 1


def test_compiled_forward_then_eager_backward() -> None:
    """The compiled call's own backward (no backward inside): the gradient of the
    renormalised rows reaches the weight, and the renorm is written back."""
    i = dg.tensor([[1, 3, 3], [3, 7, 0]])
    grads = []
    for compiled in (False, True):
        net = _model()
        fwd = dg.compile(net) if compiled else net
        fwd(i).sum().backward()
        grads.append((net[0].weight.grad.numpy(), net[0].weight.detach().numpy()))
    for a, b in zip(*grads):
        assert_close(b, a, rtol=1e-6, atol=1e-7)
