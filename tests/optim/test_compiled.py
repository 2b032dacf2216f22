"""Optimizers and schedulers inside a compiled training step: the same parameters as eager
mode at every step, with learning rates (and momenta, betas, ...) changed between calls by
a scheduler or by hand, in one trace; for the built-in optimizers and for optimizers and
schedulers a user writes, blocking and tiered."""

from __future__ import annotations

import copy
import warnings

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.compile import tiered

from .._support.compiled import B3

STEPS = 8
TIMEOUT = 300.0  # bound on waiting for the tiered worker (a loaded machine compiles slowly)


# ----------------------------------------------------------- optimizers a user writes
class MomentumSGD(dg.optim.Optimizer):
    """Written as a PyTorch user writes one: hyperparameters read from the group in
    ``step``, the buffer created on the first step from the gradient."""

    def __init__(self, params, lr=0.1, momentum=0.9):
        super().__init__(params, {"lr": lr, "momentum": momentum})

    @dg.no_grad()
    def step(self):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if "momentum_buffer" not in state:
                    buf = state["momentum_buffer"] = p.grad.clone()
                else:
                    buf = state["momentum_buffer"]
                    buf.mul_(group["momentum"]).add_(p.grad)
                p.add_(buf, alpha=-group["lr"])


class SignAdam(dg.optim.Optimizer):
    """Zero-initialised state and a tensor step count: the first step runs the same ops as
    later ones."""

    def __init__(self, params, lr=0.01, betas=(0.9, 0.99), weight_decay=0.0):
        super().__init__(params, {"lr": lr, "betas": betas, "weight_decay": weight_decay})

    @dg.no_grad()
    def step(self):
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if len(state) == 0:
                    state["step"] = dg.zeros(())
                    state["m"] = dg.zeros_like(p)
                g = p.grad
                if group["weight_decay"] != 0:
                    g = g + group["weight_decay"] * p
                state["step"] += 1
                state["m"].mul_(beta1).add_(g * (1 - beta1))
                scale = group["lr"] / (1 - beta2 ** state["step"])
                p.sub_(dg.sign(state["m"]) * scale)


class PythonStepCounter(dg.optim.Optimizer):
    """Keeps its step count as a Python int in state: a compiled call cannot repeat that."""

    def __init__(self, params, lr=0.1):
        super().__init__(params, {"lr": lr})

    @dg.no_grad()
    def step(self):
        for group in self.param_groups:
            for p in group["params"]:
                state = self.state[p]
                state["step"] = state.get("step", 0) + 1
                p.sub_(p.grad * (group["lr"] / state["step"]))


class HalvingEvery(dg.optim.lr_scheduler.LRScheduler):
    """A user's scheduler: halves every ``k`` epochs, reading the groups' lr."""

    def __init__(self, optimizer, k):
        self.k = k
        super().__init__(optimizer)

    def get_lr(self):
        if self.last_epoch == 0 or self.last_epoch % self.k:
            return [g["lr"] for g in self.optimizer.param_groups]
        return [g["lr"] * 0.5 for g in self.optimizer.param_groups]


S = dg.optim.lr_scheduler
optim = dg.optim
CASES = {
    "sgd_nesterov/step": (lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True,
                                           weight_decay=0.01),
                          lambda o: S.StepLR(o, step_size=2, gamma=0.5)),
    "sgd_dampening/step": (lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9, dampening=0.5),
                           lambda o: S.StepLR(o, step_size=2, gamma=0.5)),
    "sgd_maximize/exp": (lambda ps: optim.SGD(ps, lr=0.05, maximize=True),
                         lambda o: S.ExponentialLR(o, 0.7)),
    "adam_amsgrad/cosine": (lambda ps: optim.Adam(ps, lr=0.05, amsgrad=True),
                            lambda o: S.CosineAnnealingLR(o, T_max=3)),
    "adamw_groups/onecycle": (lambda ps: optim.AdamW([{"params": ps[:1]},
                                                  {"params": ps[1:], "weight_decay": 0.0}],
                                                 lr=0.05, weight_decay=0.1),
                              lambda o: S.OneCycleLR(o, max_lr=0.1, total_steps=STEPS + 1)),
    "sgd_momentum/onecycle": (lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9),
                              lambda o: S.OneCycleLR(o, max_lr=0.2, total_steps=STEPS + 1)),
    "rmsprop_centered/multistep": (lambda ps: optim.RMSprop(ps, lr=0.01, centered=True,
                                                        momentum=0.5),
                                   lambda o: S.MultiStepLR(o, [2, 5], 0.3)),
    "adagrad/lambda": (lambda ps: optim.Adagrad(ps, lr=0.1, lr_decay=0.01),
                       lambda o: S.LambdaLR(o, lambda e: 1 / (1 + e))),
    "adadelta/step": (lambda ps: optim.Adadelta(ps, lr=0.5, weight_decay=0.01),
                      lambda o: S.StepLR(o, 3, 0.5)),
    "adamax/linear": (lambda ps: optim.Adamax(ps, lr=0.05), lambda o: S.LinearLR(o, 0.5, 1.0, 4)),
    "nadam/step": (lambda ps: optim.NAdam(ps, lr=0.05, weight_decay=0.01),
                   lambda o: S.StepLR(o, 2, 0.5)),
    "radam/cyclic": (lambda ps: optim.RAdam(ps, lr=0.05, weight_decay=0.01),
                     lambda o: S.CyclicLR(o, base_lr=0.01, max_lr=0.05, step_size_up=2)),
    "rprop/chained": (lambda ps: optim.Rprop(ps, lr=0.02),
                      lambda o: S.ChainedScheduler([S.ConstantLR(o, 0.5, 2),
                                                    S.ExponentialLR(o, 0.9)])),
    "asgd/warm_restarts": (lambda ps: optim.ASGD(ps, lr=0.05, t0=2, lambd=0.01),
                           lambda o: S.CosineAnnealingWarmRestarts(o, T_0=3, T_mult=2)),
    "user_adam/step": (lambda ps: SignAdam(ps, lr=0.05, weight_decay=0.01),
                       lambda o: S.StepLR(o, step_size=2, gamma=0.5)),
    "user_adam/user_scheduler": (lambda ps: SignAdam(ps, lr=0.05),
                                 lambda o: HalvingEvery(o, 3)),
    "user_momentum/step": (lambda ps: MomentumSGD(ps, lr=0.1),
                           lambda o: S.StepLR(o, step_size=2, gamma=0.5)),
}
# A momentum buffer that starts at the gradient but is then dampened (the user's optimizer,
# SGD with dampening) takes its first-step branch once: a second trace, then none.
# A hand-written optimizer's ``if len(state) == 0:`` (SignAdam) reads the state's length
# and fills the state: that first call runs eagerly, and the one trace, taken at the second
# call, is guarded on the filled length (torch.compile traces both lengths).
TRACES = {"user_momentum/step": 2, "sgd_dampening/step": 2}


def _setup(batch: int = 5):
    rng = np.random.default_rng(0)
    net = dg.nn.Sequential(dg.nn.Linear(3, 4), dg.nn.Tanh(), dg.nn.Linear(4, 2))
    with dg.no_grad():
        for p in net.parameters():
            p.copy_(dg.tensor(rng.normal(size=p.shape).astype(np.float32)))
    x = dg.tensor(rng.normal(size=(batch, 3)).astype(np.float32))
    y = dg.tensor(rng.normal(size=(batch, 2)).astype(np.float32))
    return net, x, y


def _training_step(net, opt):
    def step(x, y):
        opt.zero_grad()
        loss = ((net(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
        return loss
    return step


def train(mode: str, make_opt, make_sched, steps: int = STEPS, by_hand: bool = False,
          batch: int = 5):
    """Losses and parameters after each step; ``mode`` is eager, blocking or tiered."""
    net, x, y = _setup(batch)
    params = list(net.parameters())
    opt = make_opt(params)
    sched = make_sched(opt)
    step = _training_step(net, opt)
    run = step if mode == "eager" else dg.compile(step, tiered=mode == "tiered")
    out = []
    for k in range(steps):
        loss = run(x, y).item()
        out.append((loss, [p.numpy().copy() for p in params]))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a user's scheduler may warn as PyTorch's does
            sched.step()
        if by_hand:
            for g in opt.param_groups:
                g["lr"] = g["lr"] * (1.5 if k % 2 else 0.6)
        if mode == "tiered" and k == 2:
            assert tiered.wait(run, TIMEOUT), run.stats.tier_failure
    return out, run


def _compare(got, want) -> None:
    for k, ((loss, ps), (eloss, eps)) in enumerate(zip(got, want)):
        dg.testing.assert_close(loss, eloss, rtol=1e-5, atol=0, equal_nan=True, check_dtype=False,
                                msg=f"step {k}")
        for p, q in zip(ps, eps):
            dg.testing.assert_close(p, q, equal_nan=True, msg=f"step {k}", **B3[q.dtype])


@pytest.mark.parametrize("case", sorted(CASES))
def test_compiled_step_follows_the_schedule(case) -> None:
    make_opt, make_sched = CASES[case]
    want, _ = train("eager", make_opt, make_sched)
    got, run = train("blocking", make_opt, make_sched)
    _compare(got, want)
    assert run.stats.traces == TRACES.get(case, 1), run.stats.retrace_reasons


def test_lr_changed_by_hand_between_calls() -> None:
    make_opt, make_sched = CASES["user_momentum/step"]
    want, _ = train("eager", make_opt, make_sched, by_hand=True)
    got, run = train("blocking", make_opt, make_sched, by_hand=True)
    _compare(got, want)
    assert run.stats.traces == 2


@pytest.fixture(scope="module")
def cold_tiered(tmp_path_factory: pytest.TempPathFactory):
    """Tiered compiles into an empty kernel cache, so the first calls really run at tier 0."""
    mp = pytest.MonkeyPatch()
    mp.setenv("DUALGRAPH_TIERED", "1")
    mp.setenv("DUALGRAPH_CACHE_DIR", str(tmp_path_factory.mktemp("optim-tiered")))
    yield
    tiered.shutdown()
    mp.undo()


@pytest.mark.parametrize("case", ["adamw_groups/onecycle", "user_adam/step"])
def test_tiered_step_follows_the_schedule_at_both_tiers(cold_tiered, case) -> None:
    make_opt, make_sched = CASES[case]
    # A batch size no other test compiles: kernels already in memory would skip tier 0.
    want, _ = train("eager", make_opt, make_sched, batch=7)
    got, run = train("tiered", make_opt, make_sched, batch=7)
    _compare(got, want)
    st = run.stats
    assert st.traces == TRACES.get(case, 1) and st.tier0_calls >= 1
    assert st.swap_call is not None
    assert st.calls - st.tier0_calls >= STEPS - 3  # the later steps ran the kernels


def test_python_number_in_state_runs_eagerly_with_a_warning() -> None:
    make_sched = CASES["user_momentum/step"][1]
    want, _ = train("eager", lambda ps: PythonStepCounter(ps), make_sched, steps=4)
    with pytest.warns(RuntimeWarning, match="optimizer state"):
        got, run = train("blocking", lambda ps: PythonStepCounter(ps), make_sched, steps=4)
    _compare(got, want)


def test_scheduler_inside_the_compiled_step_runs_eagerly() -> None:
    """A scheduler stepped inside the compiled function would change the lr once, at the
    trace; that call runs eagerly instead (with a warning), so the schedule is kept."""
    def run(mode):
        net, x, y = _setup()
        opt = optim.SGD(net.parameters(), lr=0.1)
        sched = S.StepLR(opt, 1, 0.5)

        def step(x, y):
            opt.zero_grad()
            ((net(x) - y) ** 2).mean().backward()
            opt.step()
            sched.step()

        f = step if mode == "eager" else dg.compile(step)
        for _ in range(4):
            f(x, y)
        return [p.numpy() for p in net.parameters()], opt.param_groups[0]["lr"]

    want = run("eager")
    with pytest.warns(RuntimeWarning, match="scheduler"):
        got = run("blocking")
    assert got[1] == want[1] == 0.1 * 0.5 ** 4
    for p, q in zip(got[0], want[0]):
        dg.testing.assert_close(p, q, equal_nan=True, **B3[q.dtype])


def test_an_update_written_in_the_compiled_function_reads_the_lr_each_call() -> None:
    net, x, y = _setup()
    opt = optim.SGD(net.parameters(), lr=0.1)

    def step(x, y):
        loss = ((net(x) - y) ** 2).mean()
        for p in net.parameters():
            p.grad = None
        loss.backward()
        with dg.no_grad():
            for group in opt.param_groups:
                for p in group["params"]:
                    p -= group["lr"] * p.grad
        return loss

    f = dg.compile(step)
    eager_net, ex, ey = _setup()
    eager_opt = optim.SGD(eager_net.parameters(), lr=0.1)
    for k in range(5):
        lr = 0.1 * 0.5 ** k
        opt.param_groups[0]["lr"] = eager_opt.param_groups[0]["lr"] = lr
        a = f(x, y).item()
        loss = ((eager_net(ex) - ey) ** 2).mean()
        for p in eager_net.parameters():
            p.grad = None
        loss.backward()
        with dg.no_grad():
            for p in eager_net.parameters():
                p -= lr * p.grad
        dg.testing.assert_close(a, loss.item(), rtol=1e-5, atol=0, equal_nan=True,
                                check_dtype=False)
    for p, q in zip(net.parameters(), eager_net.parameters()):
        dg.testing.assert_close(p.numpy(), q.numpy(), equal_nan=True, **B3[q.dtype])
    assert f.stats.traces == 1


class MomentumThenPythonCount(MomentumSGD):
    """A dampened momentum buffer created from a traced value (``buf = g`` on the first step,
    ``buf = momentum * buf + g / 2`` later), then a Python number stored in state: the
    traced step fails after the buffer was stored, and the call runs eagerly."""

    @dg.no_grad()
    def step(self):
        for group in self.param_groups:
            for p in group["params"]:
                state = self.state[p]
                if "momentum_buffer" not in state:
                    buf = state["momentum_buffer"] = p.grad.clone()
                else:
                    buf = state["momentum_buffer"]
                    buf.mul_(group["momentum"]).add_(p.grad * 0.5)
                p.sub_(buf * group["lr"])
                state["calls"] = state.get("calls", 0) + 1


def test_a_failed_traced_step_leaves_no_unfilled_state() -> None:
    make_sched = CASES["user_momentum/step"][1]
    want, _ = train("eager", lambda ps: MomentumThenPythonCount(ps, lr=0.1), make_sched,
                    steps=4)
    with pytest.warns(RuntimeWarning, match="optimizer state"):
        got, _ = train("blocking", lambda ps: MomentumThenPythonCount(ps, lr=0.1), make_sched,
                       steps=4)
    _compare(got, want)


def test_lazy_state_changed_between_calls_follows_eager() -> None:
    """``if len(state) == 0:`` with the state cleared, a parameter group added and a state
    dict loaded between calls: each call gives eager's loss and parameters; a call that
    finds another length traces again (the guard on the length stays)."""
    def run(mode):
        net, x, y = _setup()
        params = list(net.parameters())
        opt = SignAdam(params[:2], lr=0.05)
        step = _training_step(net, opt)
        f = step if mode == "eager" else dg.compile(step, tiered=False)
        out, saved = [], None
        for k in range(8):
            if k == 2:
                opt.state.clear()
            if k == 3:
                opt.add_param_group({"params": params[2:]})
            if k == 6:
                opt.load_state_dict(saved)
            out.append((f(x, y).item(), [p.numpy().copy() for p in params]))
            if k == 4:
                saved = copy.deepcopy(opt.state_dict())
        return out, f

    want, _ = run("eager")
    got, f = run("blocking")
    _compare(got, want)
    st = f.stats
    assert st.state_filling_calls == 1, st.retrace_reasons
    # The first call fills the state eagerly; then one trace each for: the filled state,
    # the cleared one (its first call, traced empty), the added group (its state empty),
    # that group filled, the loaded state dict.
    assert st.traces == 5, st.retrace_reasons
