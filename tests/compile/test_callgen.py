"""The generated call path of a compiled signature: it serves repeated plain calls, and
every way a call can differ from the traced one (another key, a failing or unreadable
guard) falls back to the general path with the same answer as eager mode."""

from __future__ import annotations

import sys
import warnings

import numpy as np
import pytest

import dualgraph as dg

from .._support.profiling import python_calls


def _served_by_call_path(call) -> bool:
    """Whether running ``call()`` entered a generated call path's ``fast`` function."""
    return any(name == "fast" and file.startswith("<dg.compile call path")
               for file, name in python_calls(call))


def _leaf(*values):
    return dg.tensor(np.array(values, np.float32), requires_grad=True)


def _scalar(x, y):
    return (x * y + y ** 2).sum()


def test_repeated_calls_take_the_generated_path_and_match_eager():
    f = dg.compile(_scalar, tiered=False)
    x, y = _leaf(1.0, 2.0), _leaf(3.0, 4.0)
    f(x, y).backward()
    gx, gy = x.grad.numpy().copy(), y.grad.numpy().copy()
    x.grad = y.grad = None
    assert _served_by_call_path(lambda: f(x, y).backward())
    np.testing.assert_array_equal(x.grad.numpy(), gx)
    np.testing.assert_array_equal(y.grad.numpy(), gy)
    assert f.stats.traces == 1 and f.stats.cache_hits == 1 and f.stats.calls == 2
    assert f.stats.tier1_calls == 2


def test_explain_prints_the_call_path():
    f = dg.compile(_scalar, tiered=False)
    x, y = _leaf(1.0), _leaf(2.0)
    assert dg.explain(f, x, y).call_path is None  # not called with this signature yet
    f(x, y)
    text = str(dg.explain(f, x, y))
    assert "== call path" in text
    # The tape node, built in the call path for a loss its kernel made.
    assert "def fast(args):" in text and "r0.grad_fn = nd" in text


def test_another_signature_misses_and_retraces():
    f = dg.compile(_scalar, tiered=False)
    x, y = _leaf(1.0, 2.0), _leaf(3.0, 4.0)
    f(x, y)
    f(x, y)
    out = f(_leaf(1.0, 2.0, 3.0), _leaf(1.0, 1.0, 1.0))  # another shape
    assert out.item() == pytest.approx(9.0)
    assert f.stats.traces == 2
    assert "shape (3,) instead of (2,)" in f.stats.retrace_reasons[-1]
    with dg.no_grad():  # grad mode is part of the key
        assert f(x, y).grad_fn is None
    assert f.stats.traces == 3


def test_a_parameter_argument_is_served_like_a_tensor():
    f = dg.compile(lambda x: x * 2, tiered=False)
    f(dg.ones(2))
    p = dg.nn.Parameter(dg.ones(2).numpy(), requires_grad=False)
    assert _served_by_call_path(lambda: f(p))
    np.testing.assert_array_equal(f(p).numpy(), [2.0, 2.0])
    assert f.stats.traces == 1


@pytest.mark.parametrize("first, second", [(0.0, -0.0), (1, True), (2, 2.0), ("a", "b"),
                                           (None, 0)])
def test_constants_are_keyed_by_type_and_value(first, second):
    f = dg.compile(lambda x, c: x * (1.0 if c is None else float(c) + 1.0), tiered=False)
    x = dg.ones(1)
    if isinstance(first, str):
        f = dg.compile(lambda x, c: x * len(c), tiered=False)
    f(x, first)
    f(x, first)
    assert f.stats.traces == 1
    f(x, second)
    assert f.stats.traces == 2


def test_arguments_that_share_memory_are_keyed():
    def g(a, b):
        return a + b

    f = dg.compile(g, tiered=False)
    base = dg.arange(6.0)
    f(base[0:2], base[2:4])  # one base array, no overlap: the usual key
    f(base[0:2], base[2:4])
    assert f.stats.traces == 1
    np.testing.assert_array_equal(f(base[0:2], base[1:3]).numpy(), [1.0, 3.0])
    assert f.stats.traces == 2


def test_a_rebound_parameter_misses_and_retraces():
    net = dg.nn.Linear(2, 1)

    @dg.compile(tiered=False)
    def f(x):
        return net(x).sum()

    x = dg.ones(3, 2)
    f(x)
    f(x)
    net.weight = dg.nn.Parameter(np.full((1, 2), 2.0, np.float32))
    expected = net(x).sum().item()
    assert f(x).item() == pytest.approx(expected)
    assert f.stats.traces == 2
    assert "Linear.weight was rebound" in f.stats.retrace_reasons[-1]


def test_a_guard_that_cannot_be_read_takes_the_general_path():
    w = dg.ones(2)

    def make():
        v = w

        def g(x):
            return x * v

        return g, g.__closure__[0]

    g, cell = make()
    f = dg.compile(g, tiered=False)
    x = dg.ones(2)
    f(x)
    f(x)
    del cell.cell_contents  # the cell is empty now: the generated check raises
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(NameError):  # as eager mode does
            f(x)


def test_calls_with_keywords_or_containers_use_the_entrys_call_path():
    def g(x, scale=2.0, extra=()):
        return x * scale + sum(extra, dg.zeros(2))

    f = dg.compile(g, tiered=False)
    x = dg.ones(2)
    for _ in range(2):
        np.testing.assert_array_equal(f(x, scale=3.0).numpy(), [3.0, 3.0])
        np.testing.assert_array_equal(f(x, 2.0, (x, x)).numpy(), [4.0, 4.0])
    assert f.stats.traces == 2 and f.stats.cache_hits == 2


def test_a_function_with_defaults_called_with_every_argument_takes_the_fast_path():
    def g(x, scale=2.0):
        return x * scale

    f = dg.compile(g, tiered=False)
    x = dg.ones(2)
    f(x, 3.0)
    assert _served_by_call_path(lambda: f(x, 3.0))
    np.testing.assert_array_equal(f(x, 3.0).numpy(), [3.0, 3.0])
    np.testing.assert_array_equal(f(x).numpy(), [2.0, 2.0])  # bound: the general path
    np.testing.assert_array_equal(f(x, 3.0).numpy(), [3.0, 3.0])
    assert f.stats.traces == 1  # the float is an input, given or defaulted


@pytest.mark.parametrize("n", [3, 6])
def test_many_arguments_that_share_memory_are_keyed(n):
    def g(*xs):
        out = xs[0]
        for x in xs[1:]:
            out = out + x
        return out

    f = dg.compile(g, tiered=False)
    base = dg.arange(float(2 * n + 2))
    apart = [base[2 * k:2 * k + 2] for k in range(n)]
    f(*apart)
    assert _served_by_call_path(lambda: f(*apart))
    overlapping = apart[:-1] + [base[2 * n - 3:2 * n - 1]]  # overlaps the one before
    expected = sum(x.numpy() for x in overlapping)
    np.testing.assert_array_equal(f(*overlapping).numpy(), expected)
    assert f.stats.traces == 2
    assert "sharing memory" in f.stats.retrace_reasons[-1]


def _profiled_calls(call) -> list:
    return [name for _, name in python_calls(call)]


def _shifted(x, scale=2.0, *, shift=0.0):
    return x * scale + shift


def test_a_keyword_call_takes_its_generated_call_path_in_few_calls():
    f = dg.compile(_shifted, tiered=False)
    x = dg.ones(2)
    for _ in range(2):
        f(x, scale=3.0, shift=1.0)
    names = _profiled_calls(lambda: f(x, shift=1.0, scale=3.0))  # any keyword order
    assert "fast" in names and "_call" not in names and "bind" not in names, names
    # The lambda, __call__, current_trace, fast, the njit function and the result: the
    # generated path calls a one-function kernel itself (no `new_outputs`, no `run`).
    assert not {"new_outputs", "run"} & set(names), names
    assert len(names) <= 1 + 5, names
    np.testing.assert_array_equal(f(x, scale=3.0, shift=1.0).numpy(), [4.0, 4.0])
    # Another value, a missing keyword (its default), an unknown one: as eager mode.
    np.testing.assert_array_equal(f(x, scale=5.0, shift=1.0).numpy(), [6.0, 6.0])
    np.testing.assert_array_equal(f(x, shift=1.0).numpy(), [3.0, 3.0])
    with pytest.raises(TypeError):
        f(x, shift=1.0, scal=3.0)
    assert f.stats.traces == 1  # the floats are inputs, given or defaulted


def test_a_dynamic_number_takes_the_generated_call_path():
    f = dg.compile(lambda x, s: x * s, dynamic=(1,), tiered=False)
    x = dg.ones(2, dtype=dg.float64)
    f(x, 2.0)
    for s in (3.0, 4, 0.5):
        names = _profiled_calls(lambda s=s: f(x, s))
        assert "fast" in names and "_call" not in names, names
        out = f(x, s)
        assert out.dtype == np.float64 and out.tolist() == [float(s)] * 2
    assert f(x, True).tolist() == [1.0, 1.0]  # a bool is not lifted: a constant
    assert f(x, dg.full((2,), 3.0, dtype=dg.float64)).tolist() == [3.0, 3.0]
    assert f.stats.traces == 3


def test_tensors_in_containers_take_the_generated_call_path():
    def g(pair, opts):
        return pair[0] * pair[1] + opts["w"] * opts["k"]

    f = dg.compile(g, tiered=False)
    a, b, w = dg.ones(2), dg.full((2,), 2.0), dg.full((2,), 3.0)
    f([a, b], {"w": w, "k": 2})
    c = dg.full((2,), 2.0)
    names = _profiled_calls(lambda: f([b, c], {"w": a, "k": 2}))
    assert "fast" in names and "_call" not in names, names
    assert f([b, c], {"w": a, "k": 2}).tolist() == [6.0, 6.0]
    # Another structure, kind, constant or key order: the general path, as eager.
    assert f((a, b), {"w": w, "k": 2}).tolist() == [8.0, 8.0]
    assert f([a, b], {"w": w, "k": 3}).tolist() == [11.0, 11.0]
    assert f([a, b], {"k": 2, "w": w}).tolist() == [8.0, 8.0]
    assert f([a, b, a], {"w": w, "k": 2}).tolist() == [8.0, 8.0]
    assert f.stats.traces == 5
    with pytest.raises(IndexError):  # as eager mode
        f([a], {"w": w, "k": 2})


def test_keywords_into_var_keyword_keep_their_order():
    def g(x, **opts):
        return x * list(opts.values())[0]

    f = dg.compile(g, tiered=False)
    x = dg.ones(1)
    for _ in range(2):
        assert f(x, a=2.0, b=3.0).tolist() == [2.0]
        assert f(x, b=3.0, a=2.0).tolist() == [3.0]
    names = _profiled_calls(lambda: f(x, b=3.0, a=2.0))
    assert "fast" in names and "_call" not in names, names


def test_a_kernel_with_work_arrays_called_by_the_path_matches_eager(monkeypatch):
    """A training step's kernel takes work arrays: the generated path takes a set from the
    kernel's pool and gives it back, so repeated calls reuse one set and match eager."""
    from dualgraph.backend.numba import codegen

    monkeypatch.setattr(codegen, "LOCAL_WORK_BYTES", -1)  # even these small ones passed in

    def make():
        dg.manual_seed(0)
        # Tanh, not a TinyNet: its kernel must not be the one the tiering tests expect
        # to compile in the worker (kernels are shared within a process).
        net = dg.nn.Sequential(dg.nn.Linear(2, 3), dg.nn.Tanh(), dg.nn.Linear(3, 1))
        opt = dg.optim.SGD(net.parameters(), lr=0.1)

        def step(x, t):
            opt.zero_grad()
            loss = ((net(x) - t) ** 2).mean()
            loss.backward()
            opt.step()
            return loss

        return net, step

    (net_e, eager), (net_c, step) = make(), make()
    compiled = dg.compile(step, tiered=False)
    x = dg.tensor(np.linspace(-1, 1, 20, dtype=np.float32).reshape(10, 2))
    t = dg.tensor(np.linspace(0, 1, 10, dtype=np.float32).reshape(10, 1))
    for k in range(4):
        expected = eager(x, t).item()
        losses = []
        served = _served_by_call_path(lambda out=losses: out.append(compiled(x, t).item()))
        assert served == (k > 0)  # the first call traces and compiles
        assert losses[0] == pytest.approx(expected, rel=1e-5)
    (entry,) = compiled.entries()
    assert entry.kernel.direct_call()[3] is not None  # the kernel takes work arrays
    for pe, pc in zip(net_e.parameters(), net_c.parameters()):
        dg.testing.assert_close(pc.numpy(), pe.numpy(), rtol=1e-5, atol=1e-6, check_dtype=False)
    assert compiled.stats.traces == 1


def _scalar_step_calls():
    """The Python calls of one compiled scalar forward + backward (the W1 step), after
    warm-up, and the leaves' gradients."""
    f = dg.compile(_scalar, tiered=False)
    x = dg.tensor(np.float32(2.0), requires_grad=True)
    y = dg.tensor(np.float32(3.0), requires_grad=True)

    def step():
        x.grad = None
        y.grad = None
        f(x, y).backward()

    for _ in range(3):
        step()
    calls = _profiled_calls(step)
    return calls, x, y


def test_a_scalar_step_hands_gradients_to_leaves_without_the_engine_or_accumulate():
    calls, x, y = _scalar_step_calls()
    # The hand-out writes a fresh gradient to an empty `.grad` itself: no
    # `accumulate_array`, no engine.
    assert "hand_out" in calls and "accumulate_array" not in calls, calls
    assert "run_backward" not in calls, calls
    # step, 2x grad setter, __call__, fast, attach_gradients (which makes the loss),
    # backward, hand_out (which makes the two gradients itself).
    assert len(calls) <= 15, calls
    assert x.grad.shape == () and y.grad.shape == ()
    assert x.grad.item() == 3.0 and y.grad.item() == 2.0 + 2 * 3.0


def test_the_hand_out_accumulates_and_copies_as_the_engine_does():
    f = dg.compile(lambda x, y: (x * y).sum() + (x + y).sum(), tiered=False)
    x, y = _leaf(1.0, 2.0), _leaf(3.0, 4.0)
    for _ in range(3):
        f(x, y).backward()  # accumulates into .grad
    ex, ey = _leaf(1.0, 2.0), _leaf(3.0, 4.0)
    for _ in range(3):
        ((ex * ey).sum() + (ex + ey).sum()).backward()
    np.testing.assert_array_equal(x.grad.numpy(), ex.grad.numpy())
    np.testing.assert_array_equal(y.grad.numpy(), ey.grad.numpy())
    # The two leaves' gradients never share memory (the same kernel output may serve both).
    assert not np.shares_memory(x.grad.numpy(), y.grad.numpy())
    x.grad = y.grad = None
    g = dg.compile(lambda x, y: (x + y).sum(), tiered=False)
    for _ in range(2):
        x.grad = y.grad = None
        g(x, y).backward()
    assert not np.shares_memory(x.grad.numpy(), y.grad.numpy())
    x.grad.numpy()[...] = 7.0  # an in-place write to one leaf's .grad stays there
    np.testing.assert_array_equal(y.grad.numpy(), [1.0, 1.0])


def _path_builtin_calls(call) -> list:
    """The C functions (``reshape``, ``empty``, ...) the generated call path calls."""
    names = []

    def profile(frame, event, arg):
        if event == "c_call" and frame.f_code.co_filename.startswith("<dg.compile call path"):
            names.append(arg.__name__)

    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
    return names


def test_a_scalar_arguments_kernel_takes_the_0d_arrays_as_they_are():
    f = dg.compile(_scalar, tiered=False)
    x = dg.tensor(np.float32(2.0), requires_grad=True)
    y = dg.tensor(np.float32(3.0), requires_grad=True)
    for _ in range(2):
        f(x, y)
    calls = _path_builtin_calls(lambda: f(x, y))
    # No reshape and no views: the kernel takes the arguments' 0-d arrays, and its 0-d
    # outputs (the loss and the two gradients, handed to the leaves as they are) are the
    # tensors' arrays.
    assert calls.count("reshape") == 0, calls
    assert "__getitem__" not in calls and "list" not in calls, calls
    # Another array, the same array changed in place, a changed value: as eager mode.
    for a in (5.0, -1.0):
        x2 = dg.tensor(np.float32(a), requires_grad=True)
        out = f(x2, y)
        assert out.item() == a * 3.0 + 9.0
        out.backward()
        assert x2.grad.item() == 3.0
    with dg.no_grad():
        y.mul_(2.0)
    assert f(x, y).item() == 2.0 * 6.0 + 36.0
    assert f.stats.traces == 1
