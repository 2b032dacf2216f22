"""Tensors a compiled function makes from numbers are constants folded with eager's own
kernels (bit for bit eager's answer), never captured inputs; what they are made from is
guarded or read on every call, so a value that changes between calls is followed."""

from __future__ import annotations

import dualgraph as dg
from dualgraph.compile.capture import trace_call
from dualgraph.compile.plan import CapturedTensor
from dualgraph.testing import assert_close


def _literals(x):
    """float32 transcendental functions of tensors made from literals, where a Numba
    kernel and NumPy can round differently (exp(0.25) does, by one ulp)."""
    return (x * dg.exp(dg.tensor(0.25)) + dg.sin(dg.linspace(0, 1, 3))
            + dg.tanh(dg.arange(3) * 0.37) + dg.log(dg.full((3,), 1.7))
            + dg.exp(dg.ones_like(x) * 0.11) + dg.eye(3).sum(0) * dg.sqrt(x.new_full((3,), 2.0))
            + dg.exp(dg.zeros(3) - 0.3))


def test_literal_tensors_are_folded_constants_equal_to_eager_bit_for_bit():
    x = dg.tensor([0.1, 0.2, 0.3])
    ctx = trace_call(_literals, (x,))[0]
    assert ctx.captured == []  # no factory-made tensor is an input of the call
    assert sum(n.op == "const" for n in ctx.nodes) >= 7
    f = dg.compile(_literals, tiered=False)
    out = f(x)
    plan = f.plan_for(x)
    assert not any(isinstance(s, CapturedTensor) for s in plan.sources)
    # Every transcendental op was folded: the kernel only adds and multiplies.
    body = [m.op for n in plan.optimized.nodes for m in
            (n.attrs["body"].nodes if n.op == "fused" else [n])]
    assert not {"exp", "sin", "tanh", "log", "sqrt"} & set(body), body
    assert_close(out, _literals(x), rtol=0, atol=0)
    assert_close(f(x * 2), _literals(x * 2), rtol=0, atol=0)
    assert f.stats.traces == 1


def test_values_a_made_tensor_is_built_from_are_followed_between_calls():
    """A closure number, a global number, a global tensor copied by ``dg.tensor`` and
    ``new_tensor``, and the default dtype change between calls: each compiled call gives
    the eager answer (a retrace for a baked number, the new data for a copied tensor)."""
    state = {"n": 3}
    scale = 0.25

    def f(x):
        made = dg.exp(dg.tensor(scale)) * dg.full((3,), SHIFT)
        copied = dg.tensor(WEIGHTS) + x.new_tensor(WEIGHTS, dtype=dg.float64).float()
        return x * made + copied + dg.arange(state["n"]).sum()

    cf = dg.compile(f, tiered=False)
    x = dg.tensor([0.1, 0.2, 0.3])

    def check():
        assert_close(cf(x), f(x), rtol=0, atol=0)

    check()
    traces = cf.stats.traces
    WEIGHTS.add_(1.5)  # a captured tensor's data: read on every call, no retrace
    check()
    assert cf.stats.traces == traces
    scale = 0.5  # noqa: F841 - read by f through its closure
    check()
    global SHIFT
    SHIFT = 3.0
    check()
    state["n"] = 5  # a dict of numbers named by the function: guarded by value
    check()
    assert cf.stats.traces == traces + 3


SHIFT = 2.0
WEIGHTS = dg.tensor([1.0, 2.0, 3.0])


def test_a_copy_made_inside_is_a_new_value():
    """``dg.tensor(w)`` inside a compiled function copies: changing the copy in place, or
    the result, leaves ``w`` alone, as eagerly."""
    w = dg.tensor([1.0, 2.0, 3.0])

    def f(x):
        c = dg.tensor(w)
        c.add_(x)
        return c

    cf = dg.compile(f, tiered=False)
    x = dg.ones(3)
    out = cf(x)
    out.add_(100.0)
    assert_close(cf(x), f(x), rtol=0, atol=0)
    assert_close(w, dg.tensor([1.0, 2.0, 3.0]), rtol=0, atol=0)


def test_a_made_tensor_kept_outside_stays_an_input():
    """Made on the first call only and kept (``cache["buf"] = dg.zeros(3)``): later calls
    read what it holds then, so the trace reads it as an input, not as a constant."""
    cache: dict = {}

    def f(x):
        if "buf" not in cache:
            cache["buf"] = dg.zeros(3)
        return x + cache["buf"]

    x = dg.ones(3)
    ctx = trace_call(f, (x,))[0]
    assert [t for t, _ in ctx.captured] == [cache["buf"]]
    assert not any(n.op == "const" for n in ctx.nodes)
    cache.clear()
    cf = dg.compile(f, tiered=False)
    cf(x)
    cache["buf"].add_(1.0)
    assert_close(cf(x), f(x), rtol=0, atol=0)
    assert_close(cf(x), dg.full((3,), 2.0), rtol=0, atol=0)


def test_a_captured_array_copied_by_tensor_warns_when_it_changes():
    """``dg.tensor(arr)`` of a captured NumPy array bakes in a copy, as the array itself
    would be: a later change is reported, not silently ignored."""
    import warnings

    import numpy as np

    from dualgraph.compile.baked import CHECK_EVERY

    arr = np.array([1.0, 2.0, 3.0], np.float32)
    cf = dg.compile(lambda x: x * dg.tensor(arr), tiered=False)
    x = dg.ones(3)
    cf(x)
    assert len(cf.plan_for(x).baked) == 1
    arr += 1.0
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        for _ in range(CHECK_EVERY + 1):
            cf(x)
    assert any("captured a NumPy array" in str(w.message) for w in record)
    # A temporary array (made inside, as library code makes index arrays) is not kept.
    cg = dg.compile(lambda x: x * dg.tensor(np.arange(3, dtype=np.float32)), tiered=False)
    cg(x)
    assert cg.plan_for(x).baked == ()


def test_a_losss_made_label_is_a_scalar_argument():
    """A GAN's labels (``full`` of ones, ``fill_`` with zeros, ``fill_`` with ones again,
    and an MSE target):
    each label a loss reads is its value as a 0-d input, broadcast, so the losses against
    them have one structure instead of one per folded value. Compiled equals eager, the
    losses and the gradient; a label made on the first call and kept outside is an input
    that later calls read as it then is."""
    import dualgraph.nn.functional as F

    w = dg.tensor([0.3, -0.2, 0.5, 0.1], requires_grad=True)
    kept: dict = {}

    def f(x):
        label = dg.full((4,), 1.0)
        real = F.binary_cross_entropy(dg.sigmoid(x * w), label)
        real.backward()
        label.fill_(0.0)
        fake = F.binary_cross_entropy(dg.sigmoid(x * w), label)
        fake.backward()
        label.fill_(1.0)
        p = dg.sigmoid(x * w)
        again = F.binary_cross_entropy(p, label)
        if "label" not in kept:
            kept["label"] = dg.full((4,), 0.9)
        (again + F.mse_loss(p, kept["label"]) + F.mse_loss(p, dg.full((4,), 0.25))).backward()
        return real, fake, again

    x = dg.tensor([1.0, 2.0, -1.5, 0.25])
    ctx = trace_call(f, (x,))[0]
    assert len(ctx.runtime) == 4  # the four made labels; the kept one is a captured input
    assert [t for t, _ in ctx.captured if t is not w] == [kept["label"]]
    assert not any(n.op == "const" and n.shape == (4,) for n in ctx.nodes)
    kept.clear()
    w.grad = None
    cf = dg.compile(f, tiered=False)
    for _ in range(2):
        got = cf(x)
        got_grad, w.grad = w.grad, None
        want = f(x)
        assert_close(got, want, rtol=0, atol=0)
        assert_close(got_grad, w.grad, rtol=0, atol=0)
        w.grad = None
        kept["label"].fill_(0.5)  # followed by the next call
    assert cf.stats.traces == 1
