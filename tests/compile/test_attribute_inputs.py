"""A module's plain tensor attribute (``self.h``, not a parameter or buffer) is a compiled
input read through the attribute at each call, guarded on its shape, dtype and
``requires_grad``: a hidden state the step rebinds every call (``self.h = h.detach()``)
compiles once and stays equal to eager mode. An attribute whose tensor something else
also names, or that the step writes in place, is guarded by identity instead."""

from __future__ import annotations

import numpy as np
import pytest

import dualgraph as dg


class Carry(dg.nn.Module):
    """An RNN-like layer that carries its state across calls on ``self``."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = dg.nn.Linear(4, 4)
        self.h = dg.zeros(2, 4)

    def forward(self, x: dg.Tensor) -> dg.Tensor:
        h = dg.tanh(self.lin(x) + self.h)
        self.h = h.detach()
        return h.square().sum()


def _train(compiled: bool) -> tuple:
    dg.manual_seed(0)
    model = Carry()
    opt = dg.optim.SGD(model.parameters(), lr=0.1)

    def step(x: dg.Tensor) -> dg.Tensor:
        opt.zero_grad()
        loss = model(x)
        loss.backward()
        opt.step()
        return loss

    fn = dg.compile(step) if compiled else step
    rng = np.random.default_rng(0)
    losses = [fn(dg.tensor(rng.standard_normal((2, 4)), dtype=dg.float32)).item()
              for _ in range(6)]
    return losses, model.h.numpy(), fn


def test_state_rebound_every_call_compiles_once_and_equals_eager() -> None:
    eager, h_eager, _ = _train(False)
    losses, h, fn = _train(True)
    dg.testing.assert_close(losses, eager, rtol=1e-6, atol=0.0, check_dtype=False)
    dg.testing.assert_close(h, h_eager, rtol=1e-6, atol=0.0, check_dtype=False)
    assert fn.stats.traces == 1


def test_attribute_set_to_none_retraces_with_a_reason() -> None:
    m = Carry()
    f = dg.compile(m)
    x = dg.ones(2, 4)
    f(x)
    m.h = None  # forward then fails eagerly as well: the trace must not be reused
    try:
        f(x)
    except TypeError:
        pass
    assert f.stats.retrace_reasons and "Carry.h" in f.stats.retrace_reasons[0]


class Shared(dg.nn.Module):
    """``self.alias`` names the same tensor as the buffer ``scale``."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("scale", dg.full((3,), 2.0))
        self.alias = self.scale

    def forward(self, x: dg.Tensor) -> dg.Tensor:
        return x * self.alias + self.scale


class Bump(dg.nn.Module):
    """The step writes its attribute tensor in place."""

    def __init__(self) -> None:
        super().__init__()
        self.count = dg.zeros(3)

    def forward(self, x: dg.Tensor) -> dg.Tensor:
        self.count.add_(1)
        return x + self.count


def test_attribute_also_named_elsewhere_or_written_is_guarded_by_identity() -> None:
    for module, rebind in ((Shared(), lambda m: setattr(m, "alias", dg.full((3,), 5.0))),
                           (Bump(), lambda m: setattr(m, "count", dg.full((3,), 7.0)))):
        f = dg.compile(module)
        x = dg.ones(3)
        f(x)
        rebind(module)
        got = f(x).numpy()
        want = module(x).numpy()  # eager mode: and the eager call bumps a Bump once more
        if isinstance(module, Bump):
            want = want - 1
        np.testing.assert_array_equal(got, want)
        assert f.stats.traces == 2
        assert "rebound to another tensor" in f.stats.retrace_reasons[0]


class Bookkeeping(dg.nn.Module):
    """A policy network keeping its episode's rewards and a counter on ``self``, as the
    pytorch/examples reinforcement-learning programs do; its methods never read them."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = dg.nn.Linear(3, 2)
        self.rewards: list = []
        self.calls = 0
        self.scale = 2.0

    def forward(self, x: dg.Tensor) -> dg.Tensor:
        return self.lin(x) * self.scale


def test_attributes_the_class_never_names_do_not_retrace() -> None:
    m = Bookkeeping()
    f = dg.compile(m)
    x = dg.ones(1, 3)
    for _ in range(4):
        m.rewards.append(1.0)
        m.calls += 1
        np.testing.assert_array_equal(f(x).numpy(), m(x).numpy())
    assert f.stats.traces == 1
    m.scale = 3.0  # read by forward: guarded
    np.testing.assert_array_equal(f(x).numpy(), m(x).numpy())
    assert f.stats.traces == 2
    assert f.stats.retrace_reasons == ["Bookkeeping.scale is 3.0 (traced with 2.0)"]


def test_attributes_the_compiled_function_names_are_guarded() -> None:
    m = Bookkeeping()

    def step(x: dg.Tensor) -> dg.Tensor:
        return m(x).sum() * len(m.rewards)

    f = dg.compile(step)
    x = dg.ones(1, 3)
    for _ in range(3):
        m.rewards.append(1.0)
        assert f(x).item() == step(x).item()
    assert f.stats.traces == 3


class TupleState(dg.nn.Module):
    """An LSTM language model keeping its hidden state ``(h, c)`` on ``self`` between
    calls, as the training loop's ``repackage_hidden`` leaves it."""

    def __init__(self) -> None:
        super().__init__()
        self.lstm = dg.nn.LSTM(3, 4)
        self.head = dg.nn.Linear(4, 2)
        self.hidden = (dg.zeros(1, 2, 4), dg.zeros(1, 2, 4))

    def forward(self, x: dg.Tensor) -> dg.Tensor:
        out, self.hidden = self.lstm(x, self.hidden)
        return self.head(out).square().mean()


def _train_tuple(compiled: bool, detach_in_forward: bool) -> tuple:
    dg.manual_seed(0)
    model = TupleState()
    opt = dg.optim.SGD(model.parameters(), lr=0.1)

    def step(x: dg.Tensor) -> dg.Tensor:
        if not detach_in_forward:  # the word language model's repackage_hidden
            model.hidden = tuple(h.detach() for h in model.hidden)
        opt.zero_grad()
        loss = model(x)
        loss.backward()
        opt.step()
        if detach_in_forward:
            model.hidden = [h.detach() for h in model.hidden][0], model.hidden[1].detach()
        return loss

    f = dg.compile(step) if compiled else step
    rng = np.random.default_rng(0)
    losses, states = [], []
    for _ in range(4):
        losses.append(f(dg.tensor(rng.standard_normal((5, 2, 3)).astype(np.float32))).item())
        states.append([h.numpy().copy() for h in model.hidden])
    return losses, states, model, f


@pytest.mark.parametrize("detach_in_forward", [False, True])
def test_a_tuple_state_on_self_is_written_back_and_read_anew(detach_in_forward: bool) -> None:
    """``self.hidden = (h, c)`` set inside the compiled step is written back after each
    call as a tuple of real tensors, read again (item by item) by the next call, and
    equals eager mode over several steps with one trace."""
    want, want_states, _, _ = _train_tuple(False, detach_in_forward)
    got, got_states, model, f = _train_tuple(True, detach_in_forward)
    dg.testing.assert_close(got, want, rtol=1e-5, atol=0, check_dtype=False)
    for g, w in zip(got_states, want_states):
        assert len(g) == 2
        dg.testing.assert_close(g[0], w[0], rtol=1e-5, atol=1e-6, check_dtype=False)
        dg.testing.assert_close(g[1], w[1], rtol=1e-5, atol=1e-6, check_dtype=False)
    assert f.stats.traces == 1 and f.stats.calls == 4
    assert type(model.hidden) is tuple and isinstance(model.hidden[0], dg.Tensor)
    # Another structure (a list, or None: the model's state reset) retraces, saying why.
    model.hidden = [dg.zeros(1, 2, 4), dg.zeros(1, 2, 4)]
    f(dg.ones(5, 2, 3))
    assert f.stats.traces == 2
    assert "TupleState.hidden holds a list of 2 now (traced with a tuple of 2)" in \
        f.stats.retrace_reasons[-1]
    assert type(model.hidden) is tuple  # the LSTM's (h, c) again


def test_a_container_state_that_requires_grad_is_refused_without_backward() -> None:
    """Stored from a compiled function that does not call ``backward()``, a state that
    requires grad cannot be handed out: a clear `TraceError` naming the item, and the
    module keeps its eager tuple (no traced values leak out)."""

    class Cell(dg.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lstm = dg.nn.LSTM(1, 4)
            self.hidden_cell = (dg.zeros(1, 1, 4), dg.zeros(1, 1, 4))

        def forward(self, x: dg.Tensor) -> dg.Tensor:
            out, self.hidden_cell = self.lstm(x.view(len(x), 1, -1), self.hidden_cell)
            return out.sum()

    m = Cell()
    before = m.hidden_cell
    with pytest.raises(dg.TraceError, match=r"Cell\.hidden_cell\[0\] was set to a value that "
                                            r"requires grad .* does not call backward"):
        dg.compile(m)(dg.ones(3))
    assert m.hidden_cell is before


def test_a_container_mixing_traced_tensors_and_other_values_is_refused_clearly() -> None:
    class Mixed(dg.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = dg.nn.Linear(2, 2)
            self.last = None

        def forward(self, x: dg.Tensor) -> dg.Tensor:
            y = self.lin(x)
            self.last = {"out": y.detach(), "step": 3}
            return y.sum()

    m = Mixed()
    with pytest.raises(dg.TraceError, match=r"Mixed\.last was set to a dict holding traced "
                                            r"tensors and other values \(Mixed\.last\['step'\]\)"):
        dg.compile(m)(dg.ones(2))
    assert m.last is None


def test_a_state_detached_by_the_step_before_the_model_runs_compiles_once() -> None:
    """``m.h = m.h.detach()`` in the step, then ``forward`` stores ``self.h = h`` (which
    requires grad) and the step calls ``backward()``: the model the step names is
    remembered as it was before the trace, so the state is read through ``m.h`` on every
    call and written back after it; one trace, eager's values."""

    class Stateful(dg.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.cell = dg.nn.RNNCell(3, 3)
            self.h = dg.zeros(2, 3)

        def forward(self, x: dg.Tensor) -> dg.Tensor:
            self.h = self.cell(x, self.h)
            return self.h

    def run(compiled: bool) -> tuple:
        dg.manual_seed(0)
        m = Stateful()
        opt = dg.optim.SGD(m.parameters(), lr=0.1)

        def step(x: dg.Tensor) -> dg.Tensor:
            m.h = m.h.detach()
            opt.zero_grad()
            loss = m(x).square().sum()
            loss.backward()
            opt.step()
            return loss

        f = dg.compile(step) if compiled else step
        xs = np.random.default_rng(0).standard_normal((4, 2, 3)).astype(np.float32)
        return [f(dg.tensor(x)).item() for x in xs], m.h.numpy().copy(), f

    want, want_h, _ = run(False)
    got, got_h, f = run(True)
    dg.testing.assert_close(got, want, rtol=1e-5, atol=0, check_dtype=False)
    dg.testing.assert_close(got_h, want_h, rtol=1e-5, atol=1e-6, check_dtype=False)
    assert f.stats.traces == 1 and f.stats.tier1_calls == 4
