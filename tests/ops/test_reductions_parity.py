"""Reductions and value-level edges as PyTorch computes them, eager == compiled.

The expected values are PyTorch's (torch 2.13; the same programs are in tests/goldens).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import dualgraph as dg

NAN = float("nan")
TIES = np.array([[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]], np.float32)


def _both(fn: Any, *arrays: np.ndarray, grad: bool = True) -> list:
    """``fn``'s outputs and its inputs' gradients (of the sum of its float outputs), run
    eagerly and compiled: a list of two (outputs, gradients) pairs."""
    runs = []
    for f in (fn, dg.compile(fn)):
        ts = [dg.tensor(a, requires_grad=grad and a.dtype.kind == "f") for a in arrays]
        out = f(*ts)
        outs = list(out) if isinstance(out, tuple) else [out]
        floats = [o for o in outs if o.dtype.kind == "f" and o.requires_grad]
        if floats:
            sum(o.sum() for o in floats).backward()
        runs.append(([o.numpy() for o in outs],
                     [t.grad.numpy() if t.grad is not None else None for t in ts]))
    return runs


def _same(runs: list) -> tuple[list, list]:
    (eo, eg), (co, cg) = runs
    for e, c in zip(eo + eg, co + cg):
        if e is None:
            assert c is None
            continue
        assert e.dtype == c.dtype and e.shape == c.shape
        np.testing.assert_array_equal(c, e)
    return eo, eg


def test_max_dim_is_a_named_tuple_of_values_and_indices():
    x = dg.tensor(TIES)
    r = x.max(dim=1)
    v, i = r  # tuple unpacking, not rows
    assert r.values is v and r.indices is i and type(r).__name__ == "max"
    np.testing.assert_array_equal(v.numpy(), [3.0, 2.0])
    assert i.dtype == dg.int64 and i.numpy().tolist() == [1, 0]
    r = dg.min(x, 0, keepdim=True)
    assert type(r).__name__ == "min" and r.values.shape == (1, 3) and r.indices.shape == (1, 3)
    # The full reductions give the value; a tuple of dims the values only; axis= is dim=.
    assert x.max().item() == 3.0 and x.min().item() == 1.0 and dg.min(x).item() == 1.0
    assert x.max(dim=(0, 1)).shape == () and x.max(axis=1).values.shape == (2,)
    assert type(x.min(axis=0)).__name__ == "min"


def test_max_min_dim_eager_equals_compiled_and_gradient_goes_to_the_index():
    def f(x):
        v, i = x.max(dim=1)
        w, j = x.min(0)
        k = x.max(-1, keepdim=True)
        return v * dg.tensor([1.0, 2.0]), i, w, j, k.values, k.indices

    outs, grads = _same(_both(f, TIES))
    assert outs[1].tolist() == [1, 0] and outs[3].tolist() == [0, 1, 1]
    # PyTorch: max(dim)'s gradient goes to the first maximum only (amax would share it)
    np.testing.assert_array_equal(grads[0], [[1.0, 2.0, 0.0], [3.0, 1.0, 1.0]])


def test_argmax_argmin_eager_equals_compiled():
    x = np.array([[1.0, NAN, 3.0, 3.0], [2.0, 5.0, -1.0, 5.0], [0.5, -1.0, -1.0, 4.0]],
                 np.float32)

    def f(x):
        return (x.argmax(), x.argmin(), x.argmax(dim=1), x.argmin(dim=0),
                dg.argmax(x, dim=-1, keepdim=True), dg.argmin(x, 1), x.max(dim=1).values)

    outs, _ = _same(_both(f, x, grad=False))
    assert outs[0] == 1 and outs[1] == 1  # a nan is both the max and the min
    assert outs[2].tolist() == [1, 1, 3]
    assert outs[3].tolist() == [2, 0, 1, 0]
    assert outs[4].shape == (3, 1) and outs[5].tolist() == [1, 2, 1]
    assert np.isnan(outs[6][0]) and all(o.dtype == np.int64 for o in outs[:6])
    ints = np.array([[3, 1, 3], [0, 7, 7]])
    outs, _ = _same(_both(lambda k: (k.argmax(dim=1), k.min(dim=1).values, k.min()), ints))
    assert outs[0].tolist() == [0, 1] and outs[1].tolist() == [1, 0] and outs[2] == 0


def test_max_dim_gradcheck():
    x = dg.tensor(np.array([[0.3, -1.2, 2.0], [1.1, 0.4, -0.7]]), requires_grad=True)
    assert dg.testing.gradcheck(lambda x: x.max(dim=1).values * x.min(0, True)[0].sum(), x)


def test_zero_d_max_dim():
    v, i = dg.tensor(2.5).max(dim=0)
    assert v.item() == 2.5 and i.item() == 0 and i.dtype == dg.int64


# ----------------------------------------------------------------------- other edges


def test_mean_of_integers_raises_in_every_mode():
    k = dg.tensor([1, 2, 3])
    msg = "mean\\(\\): could not infer output dtype.*Got: Long"
    with pytest.raises(RuntimeError, match=msg):
        k.mean()
    with pytest.raises(RuntimeError, match=msg):
        dg.trace(lambda k: k.mean(dim=0), k)
    with pytest.raises(RuntimeError, match=msg):
        dg.compile(lambda k: dg.mean(k))(k)


def test_clamp_at_a_bound_passes_the_whole_gradient():
    x = np.array([0.0, 1.0, 0.5, 2.0, -3.0, NAN], np.float32)
    outs, grads = _same(_both(lambda x: x.clamp(0.0, 1.0) * 1.0, x))
    np.testing.assert_array_equal(outs[0], [0.0, 1.0, 0.5, 1.0, 0.0, NAN])
    np.testing.assert_array_equal(grads[0], [1.0, 1.0, 1.0, 0.0, 0.0, 0.0])
    # a tensor bound gets the gradient where it replaced the element
    lo = np.array([0.5, 0.5, 0.5, 0.5, 0.5, 0.5], np.float32)
    _, grads = _same(_both(lambda x, lo: x.clamp(min=lo), x, lo))
    np.testing.assert_array_equal(grads[1], [1.0, 0.0, 0.0, 0.0, 1.0, 0.0])


def test_zero_d_tensor_promotes_like_a_scalar():
    x = dg.tensor([1.0, 2.0])
    d = dg.tensor(2.0, dtype=dg.float64)
    assert (x * d).dtype == dg.float32
    assert dg.compile(lambda x, d: x * d)(x, d).dtype == dg.float32
    assert (dg.tensor([1, 2]) * d).dtype == dg.float64


# ------------------------------------------------------------- captured NumPy arrays


def test_captured_numpy_arrays_are_snapshotted_at_trace_time():
    arr = np.array([1.0, 2.0, 3.0], np.float32)
    direct = dg.compile(lambda x: x * arr)
    folded = dg.compile(lambda x: x * (arr + 1))
    x = dg.ones(3)
    np.testing.assert_array_equal(direct(x).numpy(), [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(folded(x).numpy(), [2.0, 3.0, 4.0])
    arr[:] = 10.0
    # One rule for both spellings: the trace's copy is used, a later mutation is not seen.
    np.testing.assert_array_equal(direct(x).numpy(), [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(folded(x).numpy(), [2.0, 3.0, 4.0])
    assert direct.stats.traces == 1 and folded.stats.traces == 1
