"""``p.data`` (and ``p.detach()``) of a captured tensor is ``p`` itself inside a compiled
function, as it is eagerly: a write through one is read through the other and through
``p``, in order (a Polyak-averaged target network, ``mul_`` then ``add_``), and ``p.data``
read after an optimizer step sees the stepped value."""

from __future__ import annotations

import copy

import pytest

import dualgraph as dg
from dualgraph.compile.plan import CapturedTensor
from dualgraph.eager.internal import storage_of


def _polyak(compiled: bool, variant: str) -> tuple:
    dg.manual_seed(0)
    net = dg.nn.Linear(3, 2)
    targ = copy.deepcopy(net)
    for p in targ.parameters():
        p.requires_grad = False
    opt = dg.optim.SGD(net.parameters(), lr=0.1)

    def step(x: dg.Tensor) -> dg.Tensor:
        opt.zero_grad()
        loss = (net(x) - targ(x)).square().sum() + net(x).sum()
        loss.backward()
        opt.step()
        with dg.no_grad():
            for p, pt in zip(net.parameters(), targ.parameters()):
                if variant == "mul_add":
                    pt.data.mul_(0.9)
                    pt.data.add_(0.1 * p.data)
                elif variant == "copy":
                    pt.data.copy_(0.9 * pt.data + 0.1 * p.data)
                else:  # through detach(), which shares the data as .data does
                    pt.detach().mul_(0.9).add_(0.1 * p.detach())
        return loss

    f = dg.compile(step) if compiled else step
    x = dg.ones(4, 3)
    losses = [f(x).item() for _ in range(3)]
    return losses, targ.weight.numpy().copy(), net.weight.numpy().copy(), f


@pytest.mark.parametrize("tier", ["blocking", "tiered"])
@pytest.mark.parametrize("variant", ["mul_add", "copy", "detach"])
def test_writes_through_data_of_a_captured_tensor_equal_eager(
        variant: str, tier: str, request: pytest.FixtureRequest) -> None:
    """Both tiers: the graph itself must say that ``pt.data`` is ``pt`` (the interpreter
    of tier 0 does not share memory between inputs as the kernels do)."""
    if tier == "tiered":
        request.getfixturevalue("tiered")
    want, want_t, want_w, _ = _polyak(False, variant)
    got, got_t, got_w, f = _polyak(True, variant)
    dg.testing.assert_close(got, want, rtol=1e-6, atol=0, check_dtype=False)
    dg.testing.assert_close(got_t, want_t, rtol=1e-6, atol=0, check_dtype=False)
    dg.testing.assert_close(got_w, want_w, rtol=1e-6, atol=0, check_dtype=False)
    assert f.stats.traces == 1 and f.stats.calls == 3
    if tier == "blocking":
        assert f.stats.tier1_calls == 3
    # One input per value: ``pt.data`` is read as ``pt``, not as a second input holding
    # the same memory (which the interpreter and the kernels could read apart).
    held = [src.tensor for src in f.entries()[0].sources if isinstance(src, CapturedTensor)]
    assert len({storage_of(t) for t in held}) == len(held) == 4


def test_manual_update_through_data_keeps_the_gradient_of_the_parameter() -> None:
    """``p.data.add_(...)`` on a parameter that requires grad, then a differentiable read
    of ``p``: the read sees the new value and its gradient still reaches ``p``."""
    w = dg.tensor([1.0, 2.0], requires_grad=True)

    def step(x: dg.Tensor) -> dg.Tensor:
        w.data.add_(x)
        loss = (w * w).sum()
        loss.backward()
        return loss

    f = dg.compile(step)
    loss = f(dg.tensor([0.5, 0.5]))
    assert loss.item() == pytest.approx(1.5 ** 2 + 2.5 ** 2)
    dg.testing.assert_close(w.numpy(), [1.5, 2.5], rtol=1e-7, atol=0, check_dtype=False)
    dg.testing.assert_close(w.grad.numpy(), [3.0, 5.0], rtol=1e-7, atol=0, check_dtype=False)


@pytest.mark.parametrize("make", ["zeros", "new_zeros", "tensor"])
def test_a_buffer_made_inside_the_step_and_written_in_place_starts_afresh(make: str) -> None:
    """``acc = zeros(n); acc += ...`` inside a compiled step (a flow's log-determinant
    accumulator): the buffer is a constant of the program, so every call starts from
    zeros, as every eager call does, and nothing is written back to it."""

    def run(compiled: bool) -> tuple:
        dg.manual_seed(0)
        lin = dg.nn.Linear(2, 2)
        opt = dg.optim.SGD(lin.parameters(), lr=0.01)

        def step(x: dg.Tensor) -> dg.Tensor:
            acc = (dg.zeros(x.shape[0]) if make == "zeros" else
                   x.new_zeros(x.shape[0]) if make == "new_zeros" else
                   dg.tensor([0.0, 0.0, 0.0, 0.0]))
            acc += lin(x).sum(1)
            acc += lin(x * 2).sum(1)
            loss = acc.square().mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            return loss

        f = dg.compile(step) if compiled else step
        return [f(dg.ones(4, 2)).item() for _ in range(3)], f

    want, _ = run(False)
    got, f = run(True)
    dg.testing.assert_close(got, want, rtol=1e-5, atol=0, check_dtype=False)
    assert f.stats.traces == 1 and f.stats.tier1_calls == 3


def test_a_buffer_made_inside_and_kept_outside_is_written_back() -> None:
    """A tensor made inside the step and kept by something outside (a hand-written
    optimizer's momentum buffer made on the first call, then changed in place) is state:
    its writes are written back, and later calls read it, as eagerly."""

    def run(compiled: bool) -> tuple:
        dg.manual_seed(0)
        lin = dg.nn.Linear(2, 1)
        state: dict = {}

        def step(x: dg.Tensor) -> tuple:
            loss = lin(x).square().mean()
            loss.backward()
            with dg.no_grad():
                for p in lin.parameters():
                    if p not in state:
                        state[p] = dg.zeros_like(p)
                    buf = state[p]
                    buf.mul_(0.9).add_(p.grad)
                    p.sub_(0.1 * buf)
                    p.grad = None
            return loss, buf

        f = dg.compile(step) if compiled else step
        x = dg.ones(3, 2)
        return [f(x)[0].item() for _ in range(4)], [b.numpy().copy() for b in state.values()]

    want, want_bufs = run(False)
    got, got_bufs = run(True)
    dg.testing.assert_close(got, want, rtol=1e-5, atol=0, check_dtype=False)
    for g, w in zip(got_bufs, want_bufs):
        dg.testing.assert_close(g, w, rtol=1e-5, atol=0, check_dtype=False)
