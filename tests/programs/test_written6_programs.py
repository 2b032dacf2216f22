"""The library behaviour the sixth written set (``written6/``, run by
``test_written_programs.py``; its programs are listed in ``written6_programs.py``) found
missing, each on its own: a branch on a traced value compiles, guarded on its outcome (a
plain trace raises naming the line), ``flip`` and ``permute`` take ``dims=``,
``torch.Tensor(list)`` is float, ``unsqueeze_`` of an argument and a scheduler stepped
inside a compiled step run eagerly, Python's ``random`` keeps its stream."""

from __future__ import annotations

import random

import pytest

import dualgraph as dg


def test_branch_on_traced_value_compiles_guarded_and_trace_raises_naming_the_line() -> None:
    w = dg.ones(3, requires_grad=True)

    def clip_step(x):
        w.grad = None
        loss = (w * x).sum()
        loss.backward()
        norm = dg.sqrt((w.grad ** 2).sum())
        if norm > 1:
            w.grad[:] *= 1 / norm
        return w.grad * 1

    want = clip_step(dg.ones(3) * 2)
    dg.testing.assert_close(dg.compile(clip_step)(dg.ones(3) * 2), want)
    # A plain trace has no value to branch on.
    with pytest.raises(dg.TraceError, match="truth value") as info:
        dg.trace(lambda x: x * 2 if x.sum() > 1 else x, dg.ones(3))
    assert "x.sum() > 1" in str(info.value) and "dg.where" in str(info.value)


def test_flip_and_permute_take_dims_keyword() -> None:
    x = dg.arange(6).reshape(2, 3)
    dg.testing.assert_close(dg.flip(x, dims=[1]), dg.tensor([[2, 1, 0], [5, 4, 3]]))
    dg.testing.assert_close(x.flip(dims=(0,)), x.flip(0))
    assert dg.permute(x, dims=(1, 0)).shape == x.permute(dims=[1, 0]).shape == (3, 2)
    with pytest.raises(TypeError, match="multiple values"):
        dg.flip(x, 0, dims=[1])


def test_legacy_tensor_constructor_of_a_list_is_float() -> None:
    # torch.Tensor([0]) is float32 (torch.tensor([0]) is int64): ``loss = torch.Tensor([0])``
    # then ``loss += l`` accumulates float losses.
    assert dg.Tensor([0]).dtype == dg.float32
    assert dg.Tensor([[1, 2], [3, 4]]).dtype == dg.float32
    loss = dg.Tensor([0])
    loss += dg.tensor(0.5)
    dg.testing.assert_close(loss, dg.tensor([0.5]))


def test_unsqueeze_of_argument_runs_eagerly_with_a_warning() -> None:
    def f(t):
        t.unsqueeze_(-1)
        return t * 2

    with pytest.warns(RuntimeWarning, match="unsqueeze_"):
        got = dg.compile(f)(dg.ones(3))
    assert got.shape == (3, 1)


def test_scheduler_stepped_in_compiled_step_steps_once_per_call() -> None:
    w = dg.nn.Parameter(dg.ones(2))
    opt = dg.optim.SGD([w], lr=1.0)
    sched = dg.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)

    def step():
        opt.zero_grad()
        loss = (w * w).sum()
        loss.backward()
        opt.step()
        sched.step()
        return loss

    f = dg.compile(step)
    with pytest.warns(RuntimeWarning, match="scheduler"):
        for _ in range(3):
            f()
    assert sched.last_epoch == 3
    assert opt.param_groups[0]["lr"] == 0.125


def test_random_draw_in_compiled_step_keeps_python_stream() -> None:
    def pick(x):
        return x * 2 if random.random() < 0.5 else x * 3

    random.seed(7)
    want = [pick(dg.ones(1)) for _ in range(4)]
    random.seed(7)
    f = dg.compile(pick)
    with pytest.warns(RuntimeWarning, match="random"):
        got = [f(dg.ones(1)) for _ in range(4)]
    dg.testing.assert_close(got, want)
