"""Same program, same answer: small programs run eagerly and compiled, for several calls with
something changed between the calls (a global, a captured tensor written in place, a mode,
a module, an optimizer, the random state, the arguments' shapes and layouts, ...).

Each case is a function of ``wrap``: it builds its own state, wraps the program with
``wrap`` (the identity, or ``dg.compile``) and returns what the calls gave. The compiled
run must give what the eager run gave, or a documented error.
"""

from __future__ import annotations

import functools
import os
import re

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.errors import TraceError

nn = dg.nn


def _plain(x):
    """``x`` as nested lists of NumPy arrays and Python values, for comparison."""
    if isinstance(x, dg.Tensor):
        return ("tensor", x.detach().numpy().copy(), x.requires_grad)
    if isinstance(x, tuple | list):
        return [_plain(e) for e in x]
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    return x


def _same(a, b, where="result"):
    if isinstance(a, tuple) and a and a[0] == "tensor":
        assert isinstance(b, tuple) and b[0] == "tensor", f"{where}: {b!r} is not a tensor"
        dg.testing.assert_close(b[1], a[1], rtol=1e-5, atol=1e-6, equal_nan=True,
                                msg=lambda m: f"{where}: {m}")
        assert a[2] == b[2], f"{where}: requires_grad {b[2]} (eager {a[2]})"
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), f"{where}: {b!r} vs eager {a!r}"
        for k, (u, v) in enumerate(zip(a, b)):
            _same(u, v, f"{where}[{k}]")
    elif isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), f"{where}: {b!r} vs eager {a!r}"
        for k in a:
            _same(a[k], b[k], f"{where}[{k!r}]")
    elif isinstance(a, float):
        dg.testing.assert_close(b, a, rtol=1e-5, atol=1e-6, equal_nan=True, check_dtype=False,
                                msg=lambda m: f"{where}: {m}")
    else:
        assert a == b, f"{where}: {b!r} (eager {a!r})"


def _compile(fn=None, **kw):
    if fn is None:
        return lambda f: dg.compile(f, **kw)
    return dg.compile(fn, **kw)


CASES = {}


def case(fn):
    CASES[fn.__name__] = fn
    return fn


def _identity(fn=None, **kw):
    return fn if fn is not None else (lambda f: f)


# ------------------------------------------------------------------ globals and closures
G_SCALE = 2.0
G_W = None


@case
def global_number_rebound(wrap):
    global G_SCALE
    G_SCALE = 2.0
    f = wrap(lambda x: x * G_SCALE)
    x = dg.arange(3.0)
    out = [f(x)]
    G_SCALE = 3.0
    out.append(f(x))
    G_SCALE = 2.0
    out.append(f(x))
    return out


@case
def global_tensor_rebound(wrap):
    global G_W
    G_W = dg.ones(3)
    f = wrap(lambda x: x * G_W)
    x = dg.arange(3.0)
    out = [f(x)]
    G_W = dg.full((3,), 5.0)
    out.append(f(x))
    return out


@case
def closure_cell_rebound(wrap):
    k = 1.5
    w = dg.ones(2)

    def g(x):
        return x * k + w

    f = wrap(g)
    x = dg.ones(2)
    out = [f(x)]
    k = 4.0
    out.append(f(x))
    w = dg.zeros(2)  # noqa: F841 - read by g through its cell
    out.append(f(x))
    return out


# ------------------------------------------------------------------ captured tensors in place
def _captured(change):
    def run(wrap):
        w = dg.arange(4.0)
        f = wrap(lambda x: (x * w).sum())
        x = dg.ones(4)
        out = [f(x)]
        change(w)
        out.append(f(x))
        change(w)
        out.append(f(x))
        return out
    run.__name__ = change.__name__
    return run


def _add_(w):
    w.add_(1.0)


def _copy_(w):
    w.copy_(w * 2 + 1)


def _index_assign(w):
    w[1] = 7.0


def _data_assign(w):
    w.data = w.data * 3


for _c in (_add_, _copy_, _index_assign, _data_assign):
    CASES["captured" + _c.__name__.rstrip("_") + "_between_calls"] = _captured(_c)


@case
def captured_data_assign_new_shape(wrap):
    w = dg.arange(4.0)
    f = wrap(lambda x: (x * w).sum())
    out = [f(dg.ones(4))]
    w.data = dg.arange(3.0)
    out.append(f(dg.ones(3)))
    return out


# ------------------------------------------------------------------ grad modes
@case
def grad_modes_around_the_call(wrap):
    w = dg.arange(3.0, requires_grad=True)
    f = wrap(lambda x: (x * w).sum())
    x = dg.ones(3)
    out = [f(x)]
    with dg.no_grad():
        out.append(f(x))
    with dg.inference_mode():
        out.append(f(x))
    with dg.no_grad():
        with dg.enable_grad():
            y = f(x)
            y.backward()
            out += [y, w.grad]
    with dg.set_grad_enabled(False):
        out.append(f(x))
    return out


@case
def default_dtype_between_calls(wrap):
    f = wrap(lambda x: x + dg.ones(3))
    x = dg.tensor([1, 2, 3])
    out = [f(x)]
    old = dg.get_default_dtype()
    dg.set_default_dtype(dg.float64)
    try:
        y = f(x)
        out += [y, str(y.dtype)]
    finally:
        dg.set_default_dtype(old)
    y = f(x)
    out += [y, str(y.dtype)]
    return out


# ------------------------------------------------------------------ modules
def _net(seed=0):
    dg.manual_seed(seed)
    return nn.Sequential(nn.Linear(3, 4), nn.Dropout(0.5), nn.ReLU(), nn.Linear(4, 2))


@case
def module_train_eval(wrap):
    net = _net()
    net.eval()
    f = wrap(net)
    x = dg.randn(5, 3)
    out = [f(x)]
    net.train()
    dg.manual_seed(3)
    out.append(f(x))
    net.eval()
    out.append(f(x))
    return out


@case
def module_parameter_swapped(wrap):
    net = _net().eval()
    f = wrap(net)
    x = dg.randn(5, 3)
    out = [f(x)]
    net[0].weight = nn.Parameter(dg.ones(4, 3))
    out.append(f(x))
    net[3].bias = None
    out.append(f(x))
    return out


@case
def module_hook_added_removed(wrap):
    net = _net().eval()
    f = wrap(net)
    x = dg.randn(5, 3)
    out = [f(x)]
    h = net[0].register_forward_hook(lambda m, i, o: o * 2)
    out.append(f(x))
    h.remove()
    out.append(f(x))
    h = net.register_forward_pre_hook(lambda m, i: (i[0] + 1,))
    out.append(f(x))
    h.remove()
    return out


@case
def submodule_replaced(wrap):
    net = _net().eval()
    f = wrap(net)
    x = dg.randn(5, 3)
    out = [f(x)]
    net[2] = nn.Tanh()
    out.append(f(x))
    return out


@case
def dropout_p_changed(wrap):
    dg.manual_seed(0)
    drop = nn.Dropout(0.5)
    f = wrap(lambda x: drop(x))
    x = dg.ones(200)
    out = []
    for p in (0.5, 0.0, 1.0, 0.25):
        drop.p = p
        dg.manual_seed(7)
        y = f(x)
        # The draws differ by design between eager and compiled; how many survive does not.
        out += [float((y == 0).sum().item() == 200) if p == 1.0 else 0.0,
                float((y != 0).sum().item() == 200) if p == 0.0 else 0.0,
                float(set(np.unique(y.numpy()).tolist()) <= {0.0, 1 / (1 - p) if p < 1 else 0})]
    return out


@case
def compiled_method_of_module(wrap):
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(2, 2)
            self.scale = 1.0

        def score(self, x):
            return self.lin(x).sum() * self.scale

    dg.manual_seed(0)
    m = M()
    f = wrap(m.score)
    x = dg.randn(3, 2)
    out = [f(x)]
    m.scale = 2.0
    out.append(f(x))
    with dg.no_grad():
        m.lin.weight.mul_(2)
    out.append(f(x))
    return out


# ------------------------------------------------------------------ optimizers
def _training(sched):
    def run(wrap):
        dg.manual_seed(0)
        lin = nn.Linear(3, 1)
        opt = dg.optim.SGD(lin.parameters(), lr=0.1, momentum=0.9)
        s = dg.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5) if sched else None
        x = dg.randn(4, 3)

        def step(x):
            opt.zero_grad()
            loss = (lin(x) ** 2).mean()
            loss.backward()
            opt.step()
            return loss

        f = wrap(step)
        out = []
        for k in range(4):
            out.append(f(x).item())
            if s is not None:
                s.step()
            elif k == 1:
                opt.param_groups[0]["lr"] = 0.01
        out += [lin.weight, lin.bias]
        return out
    return run


CASES["optimizer_lr_through_param_groups"] = _training(False)
CASES["optimizer_lr_through_scheduler"] = _training(True)


@case
def grad_accumulation_and_zero_grad(wrap):
    w = dg.arange(3.0, requires_grad=True)
    f = wrap(lambda x: (x * w * w).sum())
    x = dg.ones(3)
    out = []
    for _ in range(2):
        f(x).backward()
        out.append(w.grad)
    w.grad.zero_()
    f(x).backward()
    out.append(w.grad)
    w.grad = None
    f(x).backward()
    out.append(w.grad)
    return out


@case
def step_with_zero_grad_set_to_none(wrap):
    dg.manual_seed(0)
    lin = nn.Linear(2, 1)
    opt = dg.optim.SGD(lin.parameters(), lr=0.1)
    x = dg.randn(3, 2)

    def step(x, none):
        opt.zero_grad(set_to_none=none)
        loss = lin(x).sum()
        loss.backward()
        opt.step()
        return loss

    f = wrap(step)
    out = []
    for none in (True, False, True, False):
        out.append(f(x, none).item())
        out.append(lin.weight.grad)
    return out


# ------------------------------------------------------------------ random state
@case
def manual_seed_between_calls(wrap):
    f = wrap(lambda x: x + dg.randn(4))
    x = dg.zeros(4)
    dg.manual_seed(5)
    a = f(x)
    b = f(x)
    dg.manual_seed(5)
    c = f(x)
    # Reseeding replays the same draws; consecutive calls draw new numbers.
    return [bool(np.array_equal(a.numpy(), c.numpy())), bool(np.array_equal(a.numpy(), b.numpy()))]


# ------------------------------------------------------------------ arguments
@case
def python_scalar_vs_0d_tensor(wrap):
    f = wrap(lambda x, s: x * s)
    x = dg.arange(3.0)
    return [f(x, 2.0), f(x, 3.0), f(x, dg.tensor(2.0)), f(x, dg.tensor(4.0)), f(x, 2),
            f(x, True)]


@case
def shapes_dtypes_strides(wrap):
    f = wrap(lambda x: (x * 2).sum(0))
    base = dg.arange(12.0).reshape(3, 4)
    return [f(base), f(base.t()), f(base[:, ::2]), f(dg.arange(3.0).expand(4, 3)),
            f(base.double()), f(dg.arange(12).reshape(4, 3))]


@case
def aliased_views_in_place(wrap):
    def g(a, b):
        a.add_(1.0)
        return b * 2

    f = wrap(g)
    out = []
    for _ in range(2):
        x = dg.arange(6.0)
        out += [f(x[1:4], x), x]
    x = dg.arange(6.0)
    out += [f(x, x), x]
    return out


@case
def in_place_on_input(wrap):
    def g(x):
        x.mul_(2)
        return x + 1

    f = wrap(g)
    out = []
    for _ in range(2):
        x = dg.arange(3.0)
        out += [f(x), x]
    return out


@case
def returning_input_and_view(wrap):
    f = wrap(lambda x: (x, x[1:], x.t()))
    x = dg.arange(6.0).reshape(2, 3)
    a, b, c = f(x)
    return [a is x, a, b, c]


@case
def exception_inside(wrap):
    def g(x, n):
        if n > 2:
            raise ValueError("too big")
        return x * n

    f = wrap(g)
    x = dg.ones(2)
    out = [f(x, 1)]
    try:
        f(x, 3)
    except ValueError as e:
        out.append(str(e))
    out.append(f(x, 2))
    return out


@case
def item_in_python_arithmetic(wrap):
    w = dg.tensor([2.0])

    def g(x):
        s = w.item()
        return x * (s * 2 + 1)

    f = wrap(g)
    x = dg.ones(2)
    out = [f(x)]
    w.fill_(5.0)
    out.append(f(x))
    return out


@case
def list_dict_tuple_arguments(wrap):
    f = wrap(lambda xs, d: sum(xs) * d["a"] + d["b"])
    a, b, c = dg.ones(2), dg.arange(2.0), dg.full((2,), 3.0)
    return [f([a, b], {"a": c, "b": 1.0}), f([a, b, c], {"a": a, "b": 1.0}),
            f((a,), {"a": b, "b": 2.0}), f([c, c], {"a": c, "b": 1.0})]


@case
def kwargs_and_defaults(wrap):
    def g(x, scale=2.0, *, shift=0.0):
        return x * scale + shift

    f = wrap(g)
    x = dg.ones(2)
    out = [f(x), f(x, 3.0), f(x, scale=4.0), f(x, shift=1.0)]
    g.__defaults__ = (5.0,)
    out.append(f(x))
    g.__kwdefaults__ = {"shift": 7.0}
    out.append(f(x))
    return out


@case
def functools_partial(wrap):
    def g(x, a, b):
        return x * a + b

    f1 = wrap(functools.partial(g, a=2.0, b=1.0))
    f2 = wrap(functools.partial(g, a=3.0, b=1.0))
    x = dg.ones(2)
    return [f1(x), f2(x), f1(x)]


@case
def recursion_on_python_values(wrap):
    def g(x, n):
        return x if n == 0 else f(x * 2, n - 1)

    f = wrap(g)
    x = dg.ones(2)
    return [f(x, 3), f(x, 1), f(x, 3)]


@case
def autocast_on_off(wrap):
    dg.manual_seed(0)
    lin = nn.Linear(2, 2)
    f = wrap(lambda x: lin(x))
    x = dg.ones(1, 2)
    out = [f(x)]
    with dg.autocast("cpu", dtype=dg.bfloat16):
        y = f(x)
        out += [str(y.dtype)]
    out.append(f(x))
    return out


@case
def deterministic_flags(wrap):
    def g(x):
        if dg.are_deterministic_algorithms_enabled():
            return x + 1
        if dg.backends.cudnn.deterministic:
            return x + 2
        if dg.backends.cudnn.benchmark:
            return x + 3
        return x

    f = wrap(g)
    x = dg.zeros(2)
    out = [f(x)]
    dg.use_deterministic_algorithms(True)
    try:
        out.append(f(x))
    finally:
        dg.use_deterministic_algorithms(False)
    out.append(f(x))
    dg.backends.cudnn.deterministic = True
    try:
        out.append(f(x))
    finally:
        dg.backends.cudnn.deterministic = False
    dg.backends.cudnn.benchmark = True
    try:
        out.append(f(x))
    finally:
        dg.backends.cudnn.benchmark = False
    out.append(f(x))
    return out


# ------------------------------------------------------------------ side effects and outside
class _Cfg:
    scale = 1.0


@case
def plain_object_attribute(wrap):
    cfg = _Cfg()
    cfg.scale = 2.0
    f = wrap(lambda x: x * cfg.scale)
    x = dg.ones(2)
    out = [f(x)]
    cfg.scale = 3.0
    out.append(f(x))
    return out


@case
def environ_read(wrap):
    os.environ["DG_PROBE_SCALE"] = "2"
    f = wrap(lambda x: x * float(os.environ.get("DG_PROBE_SCALE", "1")))
    x = dg.ones(2)
    out = [f(x)]
    os.environ["DG_PROBE_SCALE"] = "3"
    out.append(f(x))
    del os.environ["DG_PROBE_SCALE"]
    return out


@case
def retain_grad_and_hook_on_the_result(wrap):
    seen = []
    f = wrap(lambda x: x * 3)
    x = dg.arange(3.0, requires_grad=True)
    out = []
    for _ in range(2):
        x.grad = None
        h = f(x)
        h.retain_grad()
        handle = h.register_hook(lambda g: seen.append(1) or g * 2)
        (h * h).sum().backward()
        handle.remove()
        out += [h, h.grad, x.grad]
    return out + [len(seen)]


@case
def batchnorm_running_stats_train_eval(wrap):
    dg.manual_seed(0)
    bn = nn.BatchNorm1d(3)
    f = wrap(lambda x: bn(x))
    x = dg.randn(4, 3)
    out = [f(x), f(x * 2)]
    bn.eval()
    out += [f(x), bn.running_mean, bn.running_var]
    bn.momentum = 0.5
    bn.train()
    out += [f(x), bn.running_mean]
    return out


G_LIST = [1.0, 2.0]


@case
def global_list_changed_in_place(wrap):
    G_LIST[:] = [1.0, 2.0]
    f = wrap(lambda x: x * G_LIST[1])
    x = dg.ones(2)
    out = [f(x)]
    G_LIST[1] = 5.0
    out.append(f(x))
    return out


class _Settings:
    scale = 2.0


@case
def class_attribute_changed(wrap):
    _Settings.scale = 2.0
    f = wrap(lambda x: x * _Settings.scale)
    x = dg.ones(2)
    out = [f(x)]
    _Settings.scale = 4.0
    out.append(f(x))
    _Settings.scale = 2.0
    return out


@case
def numpy_argument_values_and_dynamic_number(wrap):
    f = wrap(lambda x, a, s: x * a * s, dynamic=(2,))
    x = dg.ones(3)
    a = np.arange(3.0, dtype=np.float32)
    out = [f(x, a, 2.0)]
    a[0] = 10.0
    out += [f(x, a, 3.0), f(x, a, 0.5)]
    return out


@case
def int_argument_changes(wrap):
    f = wrap(lambda x, n: x.sum(n))
    x = dg.arange(6.0).reshape(2, 3)
    return [f(x, 0), f(x, 1), f(x, -1)]


@case
def user_module_number_attribute(wrap):
    class Scaled(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(2, 2)
            self.scale = 1.0

        def forward(self, x):
            return self.lin(x) * self.scale

    dg.manual_seed(0)
    m = Scaled()
    f = wrap(m)
    x = dg.ones(1, 2)
    out = [f(x)]
    m.scale = 3.0
    out.append(f(x))
    return out


@case
def module_dict_entry_replaced(wrap):
    dg.manual_seed(0)
    heads = nn.ModuleDict({"a": nn.Linear(2, 1), "b": nn.Linear(2, 1)})
    f = wrap(lambda x: heads["a"](x) + heads["b"](x))
    x = dg.ones(1, 2)
    out = [f(x)]
    dg.manual_seed(1)
    heads["a"] = nn.Linear(2, 1)
    out.append(f(x))
    return out


class _Box:
    def __init__(self):
        self.scale = 2.0
        self.name = "a"

    def apply(self, x):
        return x * self.scale if self.name == "a" else x - self.scale


@case
def bound_method_of_plain_object(wrap):
    box = _Box()
    f = wrap(box.apply)
    x = dg.ones(2)
    out = [f(x)]
    box.scale = 5.0
    out.append(f(x))
    box.name = "b"
    out.append(f(x))
    return out


@case
def closure_list_of_tensors_item_replaced(wrap):
    ws = [dg.ones(2), dg.ones(2)]
    f = wrap(lambda x: x * ws[0] + ws[1])
    x = dg.arange(2.0)
    out = [f(x)]
    ws[1] = dg.full((2,), 9.0)
    out.append(f(x))
    return out


@case
def in_place_on_argument_view_and_base(wrap):
    def g(a, b):
        b.mul_(2)
        return a + b.sum()

    f = wrap(g)
    out = []
    for _ in range(2):
        x = dg.arange(6.0).reshape(2, 3)
        out += [f(x[0], x), x]
    return out


@case
def environ_missing_then_set(wrap):
    os.environ.pop("DG_PROBE_SHIFT", None)
    f = wrap(lambda x: x + (1.0 if "DG_PROBE_SHIFT" in os.environ else 0.0))
    x = dg.zeros(2)
    out = [f(x)]
    os.environ["DG_PROBE_SHIFT"] = "1"
    out.append(f(x))
    del os.environ["DG_PROBE_SHIFT"]
    out.append(f(x))
    return out


@case
def matmul_tf32_flag(wrap):
    f = wrap(lambda x: x * (2.0 if dg.backends.cuda.matmul.allow_tf32 else 1.0))
    x = dg.ones(2)
    out = [f(x)]
    dg.backends.cuda.matmul.allow_tf32 = True
    try:
        out.append(f(x))
    finally:
        dg.backends.cuda.matmul.allow_tf32 = False
    out.append(f(x))
    return out


class _ClassScaled(nn.Module):
    scale = 1.0  # a class attribute, read through self

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(2, 2)

    def forward(self, x):
        return self.lin(x) * self.scale


@case
def module_class_attribute_changed(wrap):
    dg.manual_seed(0)
    _ClassScaled.scale = 1.0
    m = _ClassScaled()
    f = wrap(m)
    x = dg.ones(1, 2)
    out = [f(x)]
    _ClassScaled.scale = 3.0
    try:
        out.append(f(x))
    finally:
        _ClassScaled.scale = 1.0
    return out


class _Holder:
    def __init__(self):
        self.w = dg.ones(2)
        self.k = 1


@case
def plain_object_tensor_attribute(wrap):
    h = _Holder()
    f = wrap(lambda x: x * h.w + h.k)
    x = dg.arange(2.0)
    out = [f(x)]
    h.w.add_(1.0)
    out.append(f(x))
    h.w = dg.full((2,), 7.0)
    out.append(f(x))
    h.k = 5
    out.append(f(x))
    return out


@case
def grad_mode_inside(wrap):
    w = dg.ones(2, requires_grad=True)

    def g(x):
        with dg.no_grad():
            c = x * w
        d = x * w if dg.is_grad_enabled() else x * 0
        return (c * d).sum(), x.requires_grad

    f = wrap(g)
    out = []
    for rg in (False, True):
        x = dg.arange(2.0, requires_grad=rg)
        y, flag = f(x)
        y.backward()
        out += [y, flag, w.grad]
        with dg.no_grad():
            out += list(f(x))
    return out


@case
def in_place_on_non_contiguous_argument(wrap):
    def g(a):
        a.add_(1.0)
        return a.sum(0)

    f = wrap(g)
    out = []
    for _ in range(2):
        x = dg.arange(6.0).reshape(2, 3)
        out += [f(x.t()), x]
        y = dg.arange(12.0)
        out += [f(y[::2].reshape(2, 3)), y]
    return out


@case
def buffer_replaced(wrap):
    m = nn.Module()
    m.register_buffer("shift", dg.ones(2))
    f = wrap(lambda x: x + m.shift)
    x = dg.zeros(2)
    out = [f(x)]
    m.register_buffer("shift", dg.full((2,), 4.0))
    out.append(f(x))
    m.shift = dg.full((2,), 6.0)
    out.append(f(x))
    return out


@case
def backward_hook_added(wrap):
    dg.manual_seed(0)
    lin = nn.Linear(2, 1)
    f = wrap(lambda x: lin(x).sum())
    x = dg.ones(3, 2)
    out = []
    f(x).backward()
    out.append(lin.weight.grad)
    h = lin.register_full_backward_pre_hook(lambda m, go: (go[0] * 3,))
    lin.zero_grad()
    f(x).backward()
    out.append(lin.weight.grad)
    h.remove()
    lin.zero_grad()
    f(x).backward()
    out.append(lin.weight.grad)
    return out


@case
def step_without_zero_grad_accumulates(wrap):
    dg.manual_seed(0)
    lin = nn.Linear(2, 1)
    opt = dg.optim.SGD(lin.parameters(), lr=0.1)
    x = dg.ones(3, 2)

    def step(x):
        lin(x).sum().backward()
        opt.step()

    f = wrap(step)
    out = []
    for _ in range(3):
        f(x)
        out += [lin.weight.grad, lin.weight]
    opt.zero_grad()
    f(x)
    return out + [lin.weight.grad, lin.weight]


@case
def matmul_precision_and_threads(wrap):
    def g(x):
        k = 2.0 if dg.get_float32_matmul_precision() == "high" else 1.0
        return x * k

    f = wrap(g)
    x = dg.ones(2)
    out = [f(x)]
    dg.set_float32_matmul_precision("high")
    try:
        out.append(f(x))
    finally:
        dg.set_float32_matmul_precision("highest")
    out.append(f(x))
    return out


G_GONE = 2.0


@case
def global_deleted(wrap):
    global G_GONE
    G_GONE = 2.0
    f = wrap(lambda x: x * G_GONE)
    x = dg.ones(2)
    out = [f(x)]
    del G_GONE
    try:
        f(x)
        out.append("ran")
    except NameError as e:
        out.append(str(e))
    G_GONE = 2.0
    return out


@case
def leaf_written_in_place_raises(wrap):
    def g(x):
        x.add_(1.0)
        return x

    f = wrap(g)
    x = dg.ones(2, requires_grad=True)
    try:
        f(x)
        return ["ran"]
    except RuntimeError as e:
        return [type(e).__name__, "leaf" in str(e)]


class _Fwd(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(2, 2)

    def forward(self, x):
        return self.lin(x)


@case
def forward_replaced_on_instance_and_class(wrap):
    dg.manual_seed(0)
    m = _Fwd()
    f = wrap(lambda x: m(x))
    x = dg.ones(1, 2)
    out = [f(x)]
    m.forward = lambda x: m.lin(x) * 2
    out.append(f(x))
    del m.forward
    out.append(f(x))
    saved = _Fwd.forward
    _Fwd.forward = lambda self, x: self.lin(x) - 1
    try:
        out.append(f(x))
    finally:
        _Fwd.forward = saved
    out.append(f(x))
    return out


@case
def module_cast_and_state_loaded(wrap):
    dg.manual_seed(0)
    m = _Fwd()
    f = wrap(lambda x: m(x.to(m.lin.weight.dtype)))
    x = dg.ones(1, 2)
    out = [f(x)]
    dg.manual_seed(1)
    m.load_state_dict(_Fwd().state_dict())
    out.append(f(x))
    m.double()
    y = f(x)
    out += [y, str(y.dtype)]
    return out


G_INNER = 2.0


@case
def nested_compiled_function_reads_a_global(wrap):
    global G_INNER
    G_INNER = 2.0
    inner = wrap(lambda x: x * G_INNER)
    f = wrap(lambda x: inner(x) + 1)
    x = dg.ones(2)
    out = [f(x), inner(x)]
    G_INNER = 5.0
    out += [f(x), inner(x)]
    G_INNER = 2.0
    return out


@case
def dict_argument_key_order(wrap):
    f = wrap(lambda d: d["a"] * 2 - d["b"])
    a, b = dg.ones(2), dg.arange(2.0)
    return [f({"a": a, "b": b}), f({"b": b, "a": a}), f({"a": b, "b": a})]


@case
def empty_and_nan_arguments(wrap):
    f = wrap(lambda x: (x * 2).sum() + x.numel())
    return [f(dg.zeros(0)), f(dg.tensor([float("nan"), 1.0])), f(dg.zeros(0, 3))]


@case
def no_grad_decorated_function(wrap):
    w = dg.ones(2, requires_grad=True)

    @dg.no_grad()
    def g(x):
        return x * w

    f = wrap(g)
    x = dg.ones(2)
    y = f(x)
    return [y, y.requires_grad, f(x * 3)]


@case
def training_flag_in_user_forward(wrap):
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(2, 2)

        def forward(self, x):
            y = self.lin(x)
            return y * 2 if self.training else y

    dg.manual_seed(0)
    net = Net()
    f = wrap(net)
    x = dg.ones(1, 2)
    out = [f(x)]
    net.eval()
    out.append(f(x))
    net.lin.train()  # the child alone: the parent's flag still decides
    out.append(f(x))
    net.train()
    out.append(f(x))
    return out


@case
def one_cycle_schedule_with_momentum(wrap):
    dg.manual_seed(0)
    lin = nn.Linear(3, 1)
    opt = dg.optim.SGD(lin.parameters(), lr=0.1, momentum=0.9)
    sched = dg.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.5, total_steps=6)
    x = dg.randn(4, 3)

    def step(x):
        opt.zero_grad()
        loss = (lin(x) ** 2).mean()
        loss.backward()
        opt.step()
        return loss.detach()

    f = wrap(step)
    out = []
    for _ in range(5):
        out.append(f(x))
        sched.step()
    return out + [lin.weight, opt.param_groups[0]["momentum"]]


G_MAX_NORM = 1.0


@case
def clip_grad_norm_with_a_global_bound(wrap):
    global G_MAX_NORM
    G_MAX_NORM = 1.0
    dg.manual_seed(0)
    lin = nn.Linear(3, 2)
    opt = dg.optim.SGD(lin.parameters(), lr=0.1)
    x = dg.randn(4, 3) * 10

    def step(x):
        opt.zero_grad()
        lin(x).pow(2).sum().backward()
        norm = nn.utils.clip_grad_norm_(lin.parameters(), G_MAX_NORM)
        opt.step()
        return norm

    f = wrap(step)
    out = [f(x)]
    G_MAX_NORM = 0.1
    out += [f(x), lin.weight]
    G_MAX_NORM = 1.0
    return out


@case
def int_tensor_times_int_or_float(wrap):
    f = wrap(lambda x, s: x * s)
    x = dg.arange(3)
    out = []
    for s in (2, 2.0, True, 2, 2.5):
        y = f(x, s)
        out += [y, str(y.dtype)]
    return out


@case
def param_group_added(wrap):
    dg.manual_seed(0)
    a, b = nn.Linear(2, 1), nn.Linear(2, 1)
    opt = dg.optim.SGD(a.parameters(), lr=0.1)
    x = dg.ones(3, 2)

    def step(x):
        opt.zero_grad()
        (a(x) + b(x)).sum().backward()
        opt.step()

    f = wrap(step)
    f(x)
    opt.add_param_group({"params": b.parameters(), "lr": 0.5})
    f(x)
    f(x)
    return [a.weight, b.weight, b.bias]


@case
def outputs_that_alias(wrap):
    w = dg.ones(2)

    def g(x):
        y = x * 2
        return y, y, w

    f = wrap(g)
    out = []
    for _ in range(2):
        a, b, c = f(dg.arange(2.0))
        a.add_(1.0)  # eager: b is a; c is w
        c.mul_(2.0)
        out += [a, b, c, w, a is b, c is w]
    return out


def _group_changes(make, changes):
    """A linear layer trained by ``make(params)``, with ``changes`` (``{key: value}`` for
    ``param_groups[0]``) made between steps."""
    def run(wrap):
        dg.manual_seed(0)
        lin = nn.Linear(2, 1)
        opt = make(lin.parameters())
        x = dg.ones(3, 2)

        def step(x):
            opt.zero_grad()
            (lin(x) ** 2).sum().backward()
            opt.step()
            return lin.weight.detach().clone()

        f = wrap(step)
        out = [f(x)]
        for change in changes:
            opt.param_groups[0].update(change)
            out += [f(x), f(x)]
        return out + [lin.bias]
    return run


CASES["momentum_and_weight_decay_turned_on"] = _group_changes(
    lambda p: dg.optim.SGD(p, lr=0.1), [{"momentum": 0.9}, {"weight_decay": 0.1}])
CASES["adam_betas_changed"] = _group_changes(
    lambda p: dg.optim.Adam(p, lr=0.1), [{"betas": (0.5, 0.9)}])
CASES["nesterov_and_maximize_toggled"] = _group_changes(
    lambda p: dg.optim.SGD(p, lr=0.1, momentum=0.5), [{"nesterov": True}, {"maximize": True}])


def _requires_grad_toggled(captured):
    """``requires_grad`` of a captured tensor or of the argument turned on, then off."""
    def run(wrap):
        w = dg.arange(3.0)
        x = dg.ones(3)
        f = wrap((lambda x: (x * w).sum()) if captured else (lambda x: (x * x).sum()))
        t = w if captured else x
        out = [f(x)]
        t.requires_grad_(True)
        y = f(x)
        y.backward()
        out += [y, t.grad]
        t.requires_grad_(False)
        return out + [f(x)]
    return run


CASES["captured_requires_grad_toggled"] = _requires_grad_toggled(True)
CASES["argument_requires_grad_toggled"] = _requires_grad_toggled(False)


CASE_NAMES = sorted(CASES)


@pytest.mark.parametrize("name", CASE_NAMES)
def test_compiled_gives_the_eager_answer(name):
    eager = _plain(CASES[name](_identity))
    compiled = _plain(CASES[name](_compile))
    _same(eager, compiled)


# ------------------------------------------------------------------ documented differences
def test_side_effects_run_once_per_trace():
    """Python side effects of the compiled function (``print``) run while it is traced,
    not on every call: each signature's trace runs them once. A plain value appended to a
    list from outside and a number changed in one are the exception: every compiled call
    writes them, as eagerly."""
    log, count = [], [0]

    def g(x):
        log.append(x.shape)
        count[0] += 1
        print("traced")
        return x + 1

    f = dg.compile(g)
    for _ in range(3):
        dg.testing.assert_close(f(dg.ones(2)).numpy(), np.full(2, 2.0, np.float32))
    # Neither list is guarded on what the calls write (the code only appends to ``log``).
    assert (len(log), count[0], f.stats.traces) == (3, 3, 1)
    f(dg.ones(3))  # a new signature traces again
    assert (len(log), count[0], f.stats.traces) == (4, 4, 2)
    assert log == [(2,)] * 3 + [(3,)]


def test_random_draws_reproduce_under_manual_seed():
    """Compiled draws are not eager's numbers (documented), but a seed replays them and
    every call draws anew."""
    f = dg.compile(lambda x: x + dg.rand(3))
    x = dg.zeros(3)
    dg.manual_seed(11)
    a, b = f(x).numpy(), f(x).numpy()
    after = dg.rand(2).numpy()
    dg.manual_seed(11)
    dg.testing.assert_close(f(x).numpy(), a, rtol=0, atol=0)
    dg.testing.assert_close(f(x).numpy(), b, rtol=0, atol=0)
    dg.testing.assert_close(dg.rand(2).numpy(), after, rtol=0, atol=0)
    assert not np.array_equal(a, b)
    assert ((a >= 0) & (a < 1)).all()


def test_branch_on_a_traced_value_compiles_per_side_and_a_trace_raises_naming_the_line():
    def g(x):
        if x.sum() > 0:
            return x * 2
        return x * 3

    f = dg.compile(g)
    for x in (dg.ones(2), -dg.ones(2)):
        dg.testing.assert_close(f(x), g(x))
    assert f.stats.traces == 2 and "truth value of a traced tensor" in f.stats.retrace_reasons[0]
    with pytest.raises(TraceError, match=r"test_probe_fidelity\.py:\d+.*\n.*if x\.sum\(\) > 0"):
        dg.trace(g, dg.ones(2))


def test_item_of_a_traced_value_python_compares_compiles_per_side_naming_the_line():
    # Where torch.compile breaks its graph, the call computes the read value first and
    # runs the entry traced with the same side of max(); the other side retraces.
    w = dg.tensor([2.0])
    f = dg.compile(lambda x: x * max(1.0, (w * x).sum().item()))
    dg.testing.assert_close(f(dg.full((1,), 0.25)), dg.tensor([0.25]))
    dg.testing.assert_close(f(dg.full((1,), 3.0)), dg.tensor([18.0]))
    dg.testing.assert_close(f(dg.full((1,), 2.0)), dg.tensor([8.0]))
    assert f.stats.traces == 2
    assert re.search(r"test_probe_fidelity\.py:\d+: .*\.item\(\)", f.stats.retrace_reasons[0])
    with pytest.raises(TraceError, match=r"\.item\(\)"):
        dg.trace(lambda x: x * (w * x).sum().item(), dg.ones(1))


def test_retain_grad_or_hook_inside_raises_naming_the_way_out():
    def retain(x):
        h = x * 3
        h.retain_grad()
        return h.sum()

    def hook(x):
        h = x * 3
        h.register_hook(lambda g: g)
        return h.sum()

    x = dg.ones(2, requires_grad=True)
    for fn, what in ((retain, "retain_grad"), (hook, "register_hook")):
        with pytest.raises(TraceError, match=rf"test_probe_fidelity\.py:\d+: {what}\(\).*"
                                             "return the value"):
            dg.compile(fn)(x)


def test_double_backward_through_a_compiled_call_raises_clearly():
    f = dg.compile(lambda x: (x ** 3).sum())
    x = dg.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="create_graph=True.*compiled.*eager function"):
        dg.autograd.grad(f(x), x, create_graph=True)
    # create_graph inside the compiled function is the way: one graph, differentiated twice.

    def second(x):
        (g,) = dg.autograd.grad((x ** 3).sum(), x, create_graph=True)
        return g

    x2 = x.detach().clone().requires_grad_(True)
    dg.testing.assert_close(dg.compile(lambda x: second(x.clone().requires_grad_()))(
        x2.detach()).numpy(), np.array([3.0, 12.0], np.float32))


def test_a_compiled_step_returns_its_loss_with_spent_history():
    """The loss of a step that ran backward() inside requires grad and has a history that
    backward used up, as in eager mode (a second backward fails in both)."""
    dg.manual_seed(0)
    lin = nn.Linear(2, 1)
    opt = dg.optim.SGD(lin.parameters(), lr=0.1)

    def step(x):
        opt.zero_grad()
        loss = lin(x).sum()
        loss.backward()
        opt.step()
        return loss

    loss = dg.compile(step)(dg.ones(3, 2))
    assert loss.requires_grad and not loss.is_leaf
    assert loss.grad_fn.name() == "CompiledFunctionBackward"
    with pytest.raises(RuntimeError, match="second time"):
        loss.backward()


def test_a_captured_grad_that_was_none_when_traced_is_baked_in():
    """Documented limit: ``w.grad`` read while it is None (``if w.grad is not None``) is
    not guarded outside a function that calls backward(); once set, it is an input."""
    w = dg.ones(2, requires_grad=True)
    f = dg.compile(lambda x: x * w.grad if w.grad is not None else x)
    x = dg.arange(2.0)
    f(x)
    w.grad = dg.full((2,), 3.0)
    dg.testing.assert_close(f(x).numpy(), x.numpy())  # the trace's branch
    g = dg.compile(lambda x: x * w.grad if w.grad is not None else x)
    dg.testing.assert_close(g(x).numpy(), x.numpy() * 3)
    w.grad.mul_(2)
    dg.testing.assert_close(g(x).numpy(), x.numpy() * 6)  # its values are read each call
