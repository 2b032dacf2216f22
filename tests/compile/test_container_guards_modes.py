"""State held in short containers (a closure's dict or list, a global list) is read on every
call, eagerly, compiled blocking and compiled tiered alike: swapping a module, a tensor or an
optimizer inside the container gives the answer eager gives, after tier 0 as before it."""

from __future__ import annotations

import numpy as np
import pytest

import dualgraph as dg

from .conftest import traces


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    # An empty cache per test, so a tiered call really starts at tier 0 and swaps.
    monkeypatch.setenv("DUALGRAPH_CACHE_DIR", str(tmp_path))


class _Scale(dg.nn.Module):
    def __init__(self, w: list[float]) -> None:
        super().__init__()
        self.weight = dg.nn.Parameter(np.array(w, np.float32))

    def forward(self, x):
        return x * self.weight


def test_a_module_swapped_in_a_closure_dict_is_the_one_called(runner):
    box = {"model": _Scale([1.0, 2.0])}
    f = runner(lambda x: box["model"](x) + 1.0)
    x = dg.ones(2)
    assert f(x).tolist() == [2.0, 3.0]
    assert f(x).tolist() == [2.0, 3.0]
    box["model"] = _Scale([5.0, 7.0])
    assert f(x).tolist() == [6.0, 8.0]
    assert f(x).tolist() == [6.0, 8.0]
    if runner.mode != "eager":
        assert traces(f) == 2


_HELD = [dg.tensor([1.0, 2.0])]


def test_a_tensor_swapped_in_a_global_list_is_the_one_read(runner):
    f = runner(lambda x: x * _HELD[0])
    x = dg.ones(2)
    try:
        assert f(x).tolist() == [1.0, 2.0]
        assert f(x).tolist() == [1.0, 2.0]
        _HELD[0] = dg.tensor([3.0, 4.0])
        assert f(x).tolist() == [3.0, 4.0]
        assert f(x).tolist() == [3.0, 4.0]
    finally:
        _HELD[0] = dg.tensor([1.0, 2.0])


def test_an_optimizer_swapped_in_a_closure_list_steps_the_new_parameters(runner):
    a = _Scale([1.0, 1.0])
    b = _Scale([1.0, 1.0])
    opts = [dg.optim.SGD(a.parameters(), lr=0.5)]
    models = [a]

    def step(x):
        opts[0].zero_grad()
        loss = models[0](x).sum()
        loss.backward()
        opts[0].step()
        return loss

    f = runner(step)
    x = dg.ones(2)
    f(x)
    f(x)
    assert a.weight.tolist() == [0.0, 0.0]  # two steps of lr 0.5 on a gradient of 1
    models[0], opts[0] = b, dg.optim.SGD(b.parameters(), lr=0.25)
    f(x)
    f(x)
    assert a.weight.tolist() == [0.0, 0.0]  # the old model is left alone
    assert b.weight.tolist() == [0.5, 0.5]
