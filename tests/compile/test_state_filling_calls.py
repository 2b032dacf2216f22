"""A call whose trace fills an attribute that held nothing (None, a Python number, or
absent) runs eagerly, and the next call is traced: a state made on first use compiles one
trace, and every call's answer is eager mode's."""

from __future__ import annotations

import dualgraph as dg
from dualgraph.testing import assert_close


class Acc(dg.nn.Module):
    """A running sum made on first use and updated after: the first trace must not be
    reused for later calls, or the sum would restart from zeros."""

    def __init__(self) -> None:
        super().__init__()
        self.acc = None

    def forward(self, x: dg.Tensor) -> dg.Tensor:
        if self.acc is None:
            self.acc = dg.zeros(x.shape)
        self.acc = self.acc + x
        return self.acc.sum()


def test_state_made_on_first_use_compiles_once_with_eager_answers() -> None:
    m, e = Acc(), Acc()
    f = dg.compile(m, tiered=False)
    for k in range(4):
        x = dg.full((3,), float(k + 1))
        assert_close(f(x), e(x))
        assert_close(m.acc, e.acc)
    assert f.stats.traces == 1 and f.stats.state_filling_calls == 1
    assert f.stats.tier1_calls == 3


def test_only_the_first_filling_call_runs_eagerly_and_strict_compiles_it() -> None:
    m, e = Acc(), Acc()
    f = dg.compile(m, tiered=False)
    for k in range(5):
        if k == 3:  # the state reset by the user: the next call fills it again, traced
            m.acc = e.acc = None
        x = dg.full((3,), float(k + 1))
        assert_close(f(x), e(x))
        assert_close(m.acc, e.acc)
    assert f.stats.state_filling_calls == 1 and f.stats.traces == 2

    strict = dg.compile(Acc(), tiered=False, strict=True)
    strict(dg.ones(3))
    assert strict.stats.traces == 1 and strict.stats.state_filling_calls == 0


class LogPrior(dg.nn.Module):
    """A Bayesian layer's log-probability, a number until the first forward sets it to a
    tensor (Bayes by Backprop's ``self.log_prior = 0``)."""

    def __init__(self) -> None:
        super().__init__()
        self.w = dg.nn.Parameter(dg.tensor([0.5, -1.0]))
        self.log_prior = 0

    def forward(self, x: dg.Tensor) -> dg.Tensor:
        self.log_prior = -(self.w ** 2).sum()
        return (x * self.w).sum() - self.log_prior


def test_an_attribute_holding_a_number_set_to_a_tensor_compiles_once() -> None:
    m, e = LogPrior(), LogPrior()
    opt = dg.optim.SGD(m.parameters(), lr=0.1)
    opt_e = dg.optim.SGD(e.parameters(), lr=0.1)

    def step(model, optimizer, x):
        optimizer.zero_grad()
        loss = model(x)
        loss.backward()
        optimizer.step()
        return loss

    f = dg.compile(lambda x: step(m, opt, x), tiered=False)
    for k in range(3):
        x = dg.full((2,), float(k + 1))
        assert_close(f(x), step(e, opt_e, x))
        assert_close(m.log_prior.detach(), e.log_prior.detach())
        assert m.log_prior.requires_grad
    assert f.stats.traces == 1 and f.stats.state_filling_calls == 1
