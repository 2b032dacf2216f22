"""Same program, same answer: defaults holding arrays or tensors, an object's class or its
class's numbers changed between calls, optimizer state stored and changed in place inside
a traced step, parameter groups shared between optimizers or kept by the caller, a tensor
hyperparameter replaced, the persistence of a buffer, and `dg.explain` while a kernel
loads in the background. Each case runs eagerly and compiled (`test_probe_round4`'s
harness) and must give the same results; cases share their compiled functions between
checks."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

import dualgraph as dg

from .test_probe_fidelity import _same
from .test_probe_round4 import _outcome, eager_and_compiled

nn = dg.nn


# ------------------------------------------------------------------ defaults
def defaults_holding_arrays_and_tensors(wrap):
    """Defaults set anew (positional, keyword-only, in place in ``__kwdefaults__``, of a
    helper): the next call binds the new ones, as eager mode does, instead of comparing
    an array's elements for a truth value."""
    def f(x, w=dg.tensor([1.0, 2.0]), *, a=np.array([1.0, 1.0]), n=2):  # noqa: B008 - the case
        return x * w * dg.tensor(a) * n

    def helper(v, k=dg.tensor([1.0, -1.0])):  # noqa: B008 - the case
        return v * k

    g = wrap(f)
    h = wrap(lambda x: helper(x) + 1)
    x = dg.ones(2)
    out = [g(x), g(x), h(x), h(x)]
    f.__defaults__ = (dg.tensor([3.0, 4.0]),)
    out += [g(x), g(x)]
    f.__kwdefaults__ = {"a": np.array([2.0, 5.0]), "n": 2}
    out += [g(x)]
    f.__kwdefaults__["n"] = 3
    out += [g(x), g(x)]
    helper.__defaults__ = (dg.tensor([5.0, 6.0]),)
    return out + [h(x), h(x)]


# ------------------------------------------------------------------ classes
class _Twice:
    scale = 2.0

    def act(self, v):
        return v * 2


class _Thrice:
    scale = 3.0

    def act(self, v):
        return v * 3


def plain_object_class_and_class_numbers_changed(wrap):
    """``obj.__class__ = Other`` runs the other class's methods; a number the class holds,
    read through the object, is read as it is now; one the object then sets hides it."""
    o = _Twice()
    f = wrap(lambda x: o.act(x) + o.scale)
    x = dg.ones(2)
    out = [f(x), f(x)]
    o.__class__ = _Thrice
    out += [f(x), f(x)]
    saved = _Thrice.scale
    try:
        _Thrice.scale = 7.0
        out += [f(x)]
        o.scale = -1.0
        out += [f(x), f(x)]
    finally:
        _Thrice.scale = saved
    return out


# ------------------------------------------------------------------ optimizers
class _KeepsBuffer(dg.optim.Optimizer):
    """A user's optimizer that stores a value it computes, then changes it in place and
    reads it back through the optimizer's state."""

    def __init__(self, params, lr=0.1):
        super().__init__(params, {"lr": lr})

    def step(self):
        seen = []
        with dg.no_grad():
            for group in self.param_groups:
                for p in group["params"]:
                    st = self.state[p]
                    if "buf" not in st:
                        buf = p.grad.clone()
                        st["buf"] = buf
                        buf.mul_(0.5)
                        seen.append(self.state[p]["buf"] * 1)
                        seen.append(self.state_dict()["state"][0]["buf"] * 1)
                    else:
                        st["buf"].mul_(0.9).add_(p.grad)
                    p.sub_(st["buf"] * group["lr"])
        return seen


def state_stored_then_changed_in_place_inside_a_step(wrap):
    w = nn.Parameter(dg.tensor([1.0, -2.0, 3.0]))
    opt = _KeepsBuffer([w])

    def step(x):
        opt.zero_grad()
        (w * x).pow(2).sum().backward()
        return opt.step(), opt.state[w]["buf"] * 1

    f = wrap(step)
    out = [f(dg.tensor([0.5, 1.0, -1.0]) * (k + 1)) for k in range(3)]
    return out + [w, opt.state[w]["buf"]]


def parameter_groups_shared_and_kept_by_the_caller(wrap):
    """``SGD(opt1.param_groups)`` shares the group dicts; a dict the caller passed is the
    group (PyTorch fills it in place and reads it on every step)."""
    w = nn.Parameter(dg.tensor([1.0, 2.0]))
    v = nn.Parameter(dg.tensor([-1.0, 0.5]))
    groups = [{"params": [w]}, {"params": [v], "lr": 0.2}]
    opt = dg.optim.SGD(groups, lr=0.1)
    opt2 = dg.optim.SGD(opt.param_groups, lr=0.5, momentum=0.9)

    def step(x):
        opt.zero_grad()
        ((w * x).sum() + (v * x * x).sum()).backward()
        opt.step()
        return w * 1, v * 1

    f = wrap(step)
    out = []
    for k in range(4):
        out.append(f(dg.ones(2) * (k + 1)))
        groups[1]["lr"] = 0.05 * k
        if k == 1:
            opt2.param_groups[0]["lr"] = 1.0
    return out + [groups[0]["lr"], sorted(groups[1]), opt2.param_groups[0]["momentum"],
                  opt2.param_groups[0] is opt.param_groups[0], groups[1]["params"][0] is v]


def tensor_learning_rate_changed_and_replaced(wrap):
    w = nn.Parameter(dg.tensor([1.0, 2.0]))
    lr = dg.tensor(0.5)
    opt = dg.optim.SGD([w], lr=lr)

    def step(x):
        opt.zero_grad()
        (w * x).sum().backward()
        opt.step()
        return w * 1

    f = wrap(step)
    out = [f(dg.ones(2))]
    lr.fill_(0.1)
    out.append(f(dg.ones(2)))
    opt.param_groups[0]["lr"] = dg.tensor(2.0)
    return out + [f(dg.ones(2)), f(dg.ones(2))]


# ------------------------------------------------------------------ modules
class _Scaled(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("s", dg.tensor(2.0))

    def forward(self, x):
        return x * self.s, sorted(self.state_dict())


def buffer_made_non_persistent_between_calls(wrap):
    m = _Scaled()
    f = wrap(lambda x: m(x))
    x = dg.ones(2)
    out = [_outcome(f, x)]
    m.register_buffer("s", m.s, persistent=False)
    out.append(_outcome(f, x))
    m.register_buffer("s", m.s)
    return out + [_outcome(f, x)]


CASES = {f.__name__: f for f in (
    defaults_holding_arrays_and_tensors, plain_object_class_and_class_numbers_changed,
    state_stored_then_changed_in_place_inside_a_step,
    parameter_groups_shared_and_kept_by_the_caller, tensor_learning_rate_changed_and_replaced,
    buffer_made_non_persistent_between_calls)}


@pytest.mark.parametrize("name", sorted(CASES))
def test_compiled_gives_the_eager_answer(name):
    _same(*eager_and_compiled(CASES[name]))


# ------------------------------------------------------------------ torch's group dicts
def test_parameter_groups_are_the_dicts_given_as_in_pytorch():
    w, v = nn.Parameter(dg.ones(2)), nn.Parameter(dg.ones(2))
    opt = dg.optim.SGD([w], lr=0.1)
    opt2 = dg.optim.SGD(opt.param_groups, lr=0.5)
    assert opt2.param_groups[0] is opt.param_groups[0]
    assert opt2.param_groups[0]["params"] is opt.param_groups[0]["params"]
    opt.param_groups[0]["lr"] = 0.3
    assert opt2.param_groups[0]["lr"] == 0.3
    mine = {"params": (v,), "lr": 0.2}
    opt3 = dg.optim.SGD([mine], lr=0.5)
    # Filled in place, as PyTorch fills it: a list of parameters, the defaults added.
    assert type(mine["params"]) is not tuple and list(mine["params"]) == [v]
    assert mine["momentum"] == 0 and mine["lr"] == 0.2
    mine["lr"] = 0.7
    assert opt3.param_groups[0]["lr"] == 0.7
    opt3.param_groups[0]["lr"] = 0.9
    assert mine["lr"] == 0.9
    assert opt3.state_dict()["param_groups"][0]["lr"] == 0.9


# ------------------------------------------------------------------ messages
def test_a_signature_that_runs_eagerly_says_so_once():
    def reseeds(x):
        dg.manual_seed(0)
        return x + dg.rand(2)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dg.compile(reseeds, tiered=False)(dg.ones(2))
    (w,) = [w for w in caught if "seeds" in str(w.message)]
    assert str(w.message).lower().count("runs eagerly") == 1, w.message
    with pytest.raises(dg.EagerOnlyError) as e:
        dg.compile(reseeds, strict=True)(dg.ones(2))
    assert "Seed outside" in str(e.value)


def test_explain_while_the_backend_loads_in_another_thread():
    """A kernel load in the background (the tiered worker's reader) and `dg.explain`
    import the Numba backend at once: neither finds it half imported. A fresh process,
    where nothing has imported it yet."""
    code = textwrap.dedent("""
        import threading
        import dualgraph as dg
        from dualgraph.backend import import_backend

        errors = []

        def load():
            try:
                import_backend()
            except ImportError as e:
                errors.append(e)

        t = threading.Thread(target=load)
        t.start()
        dg.explain(lambda x: (x.sin() * 2).sum(), dg.ones(3, requires_grad=True))
        t.join()
        assert not errors, errors
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
