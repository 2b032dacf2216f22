"""What the ``written5`` set's programs (run by ``test_written_programs.py``) found, each as a
small case: rebound attributes of plain objects and modules, shapes that depend on the
data, an unused int argument."""

from __future__ import annotations

import pytest

import dualgraph as dg


class _RunningMean:
    def __init__(self) -> None:
        self.running_mean = dg.zeros(3)

    def __call__(self, x: dg.Tensor) -> dg.Tensor:
        with dg.no_grad():
            self.running_mean = 0.9 * self.running_mean + 0.1 * x.mean(0)
        return x * 2


def test_rebound_attribute_of_plain_object_compiles() -> None:
    def run(compiled: bool) -> dg.Tensor:
        bn = _RunningMean()
        w = dg.ones(3, requires_grad=True)

        def step(x):
            y = bn(x * w).sum()
            y.backward()
            return y

        f = dg.compile(step) if compiled else step
        for i in range(3):
            f(dg.ones(4, 3) * i)
        return bn.running_mean

    dg.testing.assert_close(run(True), run(False))


def test_nonzero_in_compiled_step_runs_eagerly_with_a_warning() -> None:
    def smooth(x, t):
        d = x.detach().clone()
        d.index_fill_(0, dg.nonzero(t == 0).squeeze(), 0.0)
        return (x * d).sum()

    x, t = dg.ones(4, 2), dg.tensor([0, 1, 0, 2])
    with pytest.warns(RuntimeWarning, match="shape that depends on the data"):
        got = dg.compile(smooth)(x, t)
    dg.testing.assert_close(got, smooth(x, t))


def test_where_of_mask_in_compiled_step_runs_eagerly_with_a_warning() -> None:
    def dispatch(x, idx):
        token, _ = dg.where(idx == 1)
        return x[token].sum()

    x, idx = dg.ones(4, 2), dg.tensor([[0, 1], [1, 2], [2, 3], [3, 0]])
    with pytest.warns(RuntimeWarning, match="shape that depends on the data"):
        got = dg.compile(dispatch)(x, idx)
    dg.testing.assert_close(got, dispatch(x, idx))


def test_unused_int_argument_traces_once() -> None:
    # As torch.compile's automatic dynamic: the first value is baked in, the second
    # traces once more with the int as an input; no later value traces.
    f = dg.compile(lambda x, i: (x * 2).sum())
    for i in range(10):
        dg.testing.assert_close(f(dg.ones(3), i), dg.tensor(6.0))
    assert f.stats.traces == 2




class _LabelSmoothing(dg.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.criterion = dg.nn.KLDivLoss(reduction="sum")
        self.true_dist = None

    def forward(self, x, target):
        true_dist = x.data.clone()
        true_dist.fill_(0.1)
        true_dist.scatter_(1, target.data.unsqueeze(1), 0.9)
        true_dist[:, 2] = 0
        self.true_dist = true_dist
        return self.criterion(x, true_dist.clone().detach())


class _LossCompute:
    def __init__(self, generator, criterion) -> None:
        self.generator = generator
        self.criterion = criterion

    def __call__(self, x, y, norm):
        x = self.generator(x)
        sloss = self.criterion(x.contiguous().view(-1, x.size(-1)), y.contiguous().view(-1)) / norm
        return sloss.data * norm, sloss


def test_module_attribute_rebound_each_call_does_not_retrace() -> None:
    lin = dg.nn.Linear(4, 5)
    compute = _LossCompute(lambda x: dg.nn.functional.log_softmax(lin(x), dim=-1),
                           _LabelSmoothing())
    opt = dg.optim.Adam(lin.parameters())

    def step(x, y, norm):
        loss, node = compute(x, y, norm)
        node.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    f = dg.compile(step)
    for i in range(4):
        f(dg.ones(2, 3, 4) * i, dg.tensor([[0, 1, 3], [4, 1, 0]]), dg.tensor(5))
    assert not any("rebound" in r for r in f.stats.retrace_reasons), f.stats.retrace_reasons
