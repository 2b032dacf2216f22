"""What a compiled function guards, passes in at run time, and treats as constant.

Each test compiles a small function, changes something the trace read (a module flag, a
rebound tensor, a hyperparameter) and checks that the compiled result follows eager mode,
with the counters that say whether it retraced.
"""

from __future__ import annotations

import numpy as np
import pytest

import dualgraph as dg

from .._support.compiled import B3


# ------------------------------------------------------------------ no_grad and detach
def _no_grad_fn(x):
    with dg.no_grad():
        c = x * 2
    return (x * c).sum()


def _detach_fn(x):
    return (x * (x * 2).detach()).sum()


@pytest.mark.parametrize("fn", [_no_grad_fn, _detach_fn])
def test_no_grad_values_are_constants_in_train_mode(fn):
    x = dg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    fn(x).backward()
    expected = x.grad.numpy()
    x.grad = None
    f = dg.compile(fn)
    f(x).backward()
    dg.testing.assert_close(x.grad.numpy(), expected, equal_nan=True, **B3[expected.dtype])
    dg.testing.assert_close(expected, np.array([2.0, 4.0, 6.0], np.float32), equal_nan=True,
                            **B3[np.float32])
    assert f.stats.traces == 1


def test_no_grad_values_are_constants_in_step_mode():
    def step(x):
        loss = _no_grad_fn(x)
        loss.backward()
        return loss

    x = dg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    f = dg.compile(step)
    f(x)
    assert f.stats.traces == 1
    dg.testing.assert_close(x.grad.numpy(), np.array([2.0, 4.0, 6.0], np.float32), equal_nan=True,
                            **B3[np.float32])


# ------------------------------------------------------------------ module state guards
class _Mode(dg.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.weight = dg.nn.Parameter(np.array([1.0, 2.0], np.float32))

    def forward(self, x):
        scale = 2.0 if self.training else 3.0  # a Python branch on the flag
        return x * self.weight * scale


def test_eval_after_first_call_retraces_and_runs_the_eval_graph():
    m = _Mode()
    f = dg.compile(m)
    x = dg.ones(2)
    assert f(x).tolist() == [2.0, 4.0]
    m.eval()
    assert f(x).tolist() == [3.0, 6.0]
    assert f.stats.traces == 2
    assert "training is False" in f.stats.retrace_reasons[-1]
    m.train()
    assert f(x).tolist() == [2.0, 4.0]
    assert f.stats.traces == 2  # the training-mode entry is reused


def test_rebinding_a_parameter_uses_the_new_tensor():
    m = _Mode()
    f = dg.compile(m)
    x = dg.ones(2)
    assert f(x).tolist() == [2.0, 4.0]
    m.weight = dg.nn.Parameter(np.array([5.0, 7.0], np.float32))
    assert f(x).tolist() == [10.0, 14.0]
    assert f.stats.traces == 2
    assert "weight was rebound" in f.stats.retrace_reasons[-1]
    assert f(x).tolist() == [10.0, 14.0]
    assert f.stats.traces == 2


@pytest.mark.parametrize("held", ["dict", "list", "nested"])
def test_a_module_swapped_inside_a_container_a_closure_names_retraces(held):
    m1 = _Mode()
    m2 = _Mode()
    m2.weight = dg.nn.Parameter(np.array([5.0, 7.0], np.float32))
    box = {"model": m1} if held == "dict" else [m1] if held == "list" else {"run": [m1]}

    def pick():
        return box["model"] if held == "dict" else box[0] if held == "list" else box["run"][0]

    def swap(m):
        if held == "dict":
            box["model"] = m
        elif held == "list":
            box[0] = m
        else:
            box["run"][0] = m

    f = dg.compile(lambda x: pick()(x))
    x = dg.ones(2)
    assert f(x).tolist() == [2.0, 4.0]
    swap(m2)  # resuming from a checkpoint into a fresh model
    assert f(x).tolist() == [10.0, 14.0]
    assert f.stats.traces == 2
    assert "was replaced" in f.stats.retrace_reasons[-1]
    assert f(x).tolist() == [10.0, 14.0]
    assert f.stats.traces == 2


_W = dg.tensor([1.0, 2.0])


def _uses_global(x):
    return x * _W


def test_rebinding_a_captured_global_tensor_uses_the_new_tensor():
    global _W
    f = dg.compile(_uses_global)
    x = dg.ones(2)
    assert f(x).tolist() == [1.0, 2.0]
    _W = dg.tensor([3.0, 4.0])
    assert f(x).tolist() == [3.0, 4.0]
    assert f.stats.traces == 2
    assert "global '_W' was rebound" in f.stats.retrace_reasons[-1]


_V = dg.tensor([1.0, 2.0])


def _uses_v(x):
    return x * _V


def test_a_deleted_global_misses_the_call_path_and_raises_as_eager():
    global _V
    f = dg.compile(_uses_v, tiered=False)
    x = dg.ones(2)
    assert [f(x).tolist() for _ in range(2)] == [[1.0, 2.0]] * 2
    served = f.stats.fast_calls
    assert served == 1  # the second call took the generated path
    kept = _V
    del _V
    try:
        # The generated path's guard read fails: the general path runs, as eager does.
        with pytest.raises(NameError, match="_V"):
            f(x)
    finally:
        _V = kept
    assert f.stats.fast_calls == served
    assert f(x).tolist() == [1.0, 2.0]


def test_rebinding_a_closure_tensor_uses_the_new_tensor():
    w = dg.tensor([1.0, 2.0])

    def g(x):
        return x * w

    f = dg.compile(g)
    assert f(dg.ones(2)).tolist() == [1.0, 2.0]
    w = dg.tensor([3.0, 4.0])  # noqa: F841 - rebinds the closure cell g reads
    assert f(dg.ones(2)).tolist() == [3.0, 4.0]
    assert f.stats.traces == 2


# ------------------------------------------------------------ optimizer hyperparameters
def _run_schedule(compiled: bool, make_opt, steps: int = 5):
    rng = np.random.default_rng(0)
    net = dg.nn.Linear(3, 2)
    with dg.no_grad():
        for p in net.parameters():
            p.copy_(dg.tensor(rng.normal(size=p.shape).astype(np.float32)))
    opt = make_opt(net.parameters())
    x = dg.tensor(rng.normal(size=(4, 3)).astype(np.float32))
    y = dg.tensor(rng.normal(size=(4, 2)).astype(np.float32))

    def step(x, y):
        opt.zero_grad()
        loss = ((net(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        return loss

    run = dg.compile(step) if compiled else step
    losses = []
    for k in range(steps):
        for group in opt.param_groups:  # a StepLR-like schedule, and others changing too
            group["lr"] = 0.1 * 0.5 ** k
            if "momentum" in group:
                group["momentum"] = 0.9 - 0.1 * k
                group["weight_decay"] = 0.01 * (k + 1)
            else:
                group["betas"] = (0.9 - 0.05 * k, 0.999 - 0.01 * k)
                group["eps"] = 1e-8 * 10 ** k
                group["weight_decay"] = 0.01 * (k + 1)
        losses.append(run(x, y).item())
    return losses, [p.numpy() for p in net.parameters()], run


@pytest.mark.parametrize("make_opt", [
    lambda ps: dg.optim.SGD(ps, lr=0.1, momentum=0.9, weight_decay=0.01),
    lambda ps: dg.optim.Adam(ps, lr=0.1, weight_decay=0.01),
], ids=["sgd_momentum", "adam"])
def test_hyperparameter_schedule_runs_one_kernel_and_matches_eager(make_opt):
    eager_losses, eager_params = _run_schedule(False, make_opt)[:2]
    losses, params, run = _run_schedule(True, make_opt)
    assert run.stats.traces == 1
    dg.testing.assert_close(losses, eager_losses, rtol=1e-5, atol=0, equal_nan=True,
                            check_dtype=False)
    for p, q in zip(params, eager_params):
        dg.testing.assert_close(p, q, equal_nan=True, **B3[q.dtype])


def test_turning_weight_decay_on_retraces():
    p = dg.nn.Parameter(np.ones(2, np.float32))
    opt = dg.optim.SGD([p], lr=0.25)

    @dg.compile
    def step():
        opt.zero_grad()
        (p * p).sum().backward()
        opt.step()
        return p * 1

    assert step().tolist() == [0.5, 0.5]  # 1 - 0.25 * 2
    opt.param_groups[0]["weight_decay"] = 1.0
    assert step().tolist() == [0.125, 0.125]  # 0.5 - 0.25 * (2 * 0.5 + 1.0 * 0.5)
    assert step.stats.traces == 2
    assert "weight_decay" in step.stats.retrace_reasons[-1]
