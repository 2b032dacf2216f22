"""`dg.multiprocessing`, `Module.share_memory` and `dg.random.fork_rng`."""

from __future__ import annotations

import multiprocessing
import os

import pytest

import dualgraph as dg
import dualgraph.multiprocessing as mp
from dualgraph.testing import assert_close


def _train(rank: int, model: dg.nn.Module) -> None:
    opt = dg.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):
        opt.zero_grad()
        model(dg.ones(4, 3)).sum().backward()
        opt.step()


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(),
                    reason="needs the fork start method")
def test_a_forked_worker_trains_the_shared_model() -> None:
    model = dg.nn.Linear(3, 1)
    assert not model.weight.is_shared()
    assert model.share_memory() is model
    assert all(p.is_shared() for p in model.parameters())
    twin = dg.nn.Linear(3, 1)
    twin.load_state_dict(model.state_dict())
    _train(0, twin)
    p = mp.get_context("fork").Process(target=_train, args=(0, model))
    p.start()
    p.join()
    assert p.exitcode == 0
    assert_close(model.weight, twin.weight)
    assert_close(model.bias, twin.bias)


@pytest.mark.skipif(not hasattr(os, "memfd_create"), reason="needs memfd_create (Linux)")
def test_a_spawned_worker_trains_the_shared_model() -> None:
    # the model is pickled to the new process: its shared tensors travel as descriptors
    # of the same memory, as PyTorch's do
    model = dg.nn.Linear(3, 1).share_memory()
    twin = dg.nn.Linear(3, 1)
    twin.load_state_dict(model.state_dict())
    _train(0, twin)
    mp.spawn(_train, args=(model,), nprocs=1)
    assert_close(model.weight, twin.weight)
    assert_close(model.bias, twin.bias)
    assert isinstance(model.weight, dg.nn.Parameter) and model.weight.is_shared()


def test_sharing_strategies() -> None:
    assert mp.get_sharing_strategy() in mp.get_all_sharing_strategies()
    mp.set_sharing_strategy("file_system")
    assert mp.get_sharing_strategy() == "file_system"
    mp.set_sharing_strategy("file_descriptor")
    with pytest.raises(ValueError, match="invalid sharing strategy"):
        mp.set_sharing_strategy("carrier pigeon")
    t = dg.arange(6.0).reshape(2, 3)
    t.share_memory_()
    assert t.is_shared()
    assert_close(t, dg.arange(6.0).reshape(2, 3))


def test_fork_rng_restores_the_stream() -> None:
    dg.manual_seed(3)
    with dg.random.fork_rng():
        a = dg.rand(3)
    assert_close(dg.rand(3), a)
    with dg.random.fork_rng(enabled=False):
        b = dg.rand(3)
    assert not bool((dg.rand(3) == b).all())
    assert dg.random.initial_seed() == 3
