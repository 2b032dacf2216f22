"""Kernels take a 0-d value as the 0-d array its tensor holds and fill 0-d outputs that
become the result tensors' arrays as they are: no ``(1,)`` views on either side. Compiled
answers equal eager ones for every mix of 0-d and other operands, and the disk cache
keeps kernels compiled for other argument types apart."""

from __future__ import annotations

import uuid

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.testing import assert_close

from .._support.compiled import forget_kernel


def _poly(x, y):
    return x * y + y ** 2


def _scalar(value: float, dtype: type) -> dg.Tensor:
    return dg.tensor(dtype(value), requires_grad=True)


def _arg_types(kernel) -> list:
    """The Numba argument types of each signature the kernel's function is compiled for."""
    return [list(sig) for sig in kernel.fn.overloads]


def test_a_0d_kernel_takes_and_fills_0d_arrays_and_equals_eager_in_both_float_dtypes():
    f = dg.compile(_poly, tiered=False)
    for dtype in (np.float32, np.float64):  # a float64 call after float32 ones: a new trace
        for a, b in ((2.0, 3.0), (-1.5, 0.25), (0.0, 7.0)):
            x, y = _scalar(a, dtype), _scalar(b, dtype)
            z = f(x, y)
            z.backward()
            ex, ey = _scalar(a, dtype), _scalar(b, dtype)
            ez = _poly(ex, ey)
            ez.backward()
            for got, want in ((z, ez), (x.grad, ex.grad), (y.grad, ey.grad)):
                assert got.dtype == want.dtype == np.dtype(dtype)
                assert_close(got, want)
                # The kernel's own 0-d output, not a view of a (1,) one.
                assert got._data.shape == () and got._data.base is None
    assert f.stats.traces == 2
    for entry, dtype in zip(f.entries(), (np.float32, np.float64)):
        kernel = entry.kernel
        assert "dgk.one_d(a0)" in kernel.source and "dgk.one_d(o0)" in kernel.source
        (types,) = _arg_types(kernel)
        assert [t.ndim for t in types] == [0] * 5  # two inputs, the loss, two gradients
        assert {t.dtype for t in types} == {dg_numba_type(dtype)}


def dg_numba_type(dtype: type):
    import numba

    return numba.from_dtype(np.dtype(dtype))


def test_explain_shows_the_0d_kernel_and_its_call_path():
    f = dg.compile(_poly, tiered=False)
    x, y = _scalar(2.0, np.float32), _scalar(3.0, np.float32)
    f(x, y)
    text = str(dg.explain(f, x, y))
    assert "dgk.one_d(a0)" in text  # the kernel's source
    path = f.call_source(x, y)
    assert path in text
    assert "reshape" not in path and "[0, ...]" not in path
    assert "ep(d0, d1, o0, o1, o2)" in path.replace("i0", "d0").replace("i1", "d1")


def _mixed_loss(w, s):
    return (w * s).sum() + s * s


def _mixed_out(w, s):
    return w * s + s


def _int_outputs(w, k):
    return (w > 0).sum() + k, w.argmax()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_mixed_0d_and_other_operands_equal_eager(dtype):
    rng = np.random.default_rng(0)
    loss, out = dg.compile(_mixed_loss, tiered=False), dg.compile(_mixed_out, tiered=False)
    for _ in range(2):
        w0, s0 = rng.standard_normal(3).astype(dtype), dtype(rng.standard_normal())
        # A scalar loss (its gradients from the forward kernel) and a vector result (a
        # backward kernel that reads the 0-d input and takes a vector cotangent).
        for fn, compiled in ((_mixed_loss, loss), (_mixed_out, out)):
            w, s = dg.tensor(w0, requires_grad=True), dg.tensor(s0, requires_grad=True)
            ew, es = dg.tensor(w0, requires_grad=True), dg.tensor(s0, requires_grad=True)
            got, want = compiled(w, s), fn(ew, es)
            assert_close(got, want)
            got.sum().backward()
            want.sum().backward()
            assert_close(w.grad, ew.grad)
            assert_close(s.grad, es.grad)
            assert s.grad.shape == () and s.grad.dtype == np.dtype(dtype)
    # A 0-d loss of a vector function: its backward kernel's cotangent is 0-d.
    vec = dg.compile(lambda w, s: (w * s).sum() * s, tiered=False)
    w, s = dg.tensor(w0, requires_grad=True), dg.tensor(s0, requires_grad=True)
    ew, es = dg.tensor(w0, requires_grad=True), dg.tensor(s0, requires_grad=True)
    got, want = vec(w, s), (ew * es).sum() * es
    (got * 3.0).backward()
    (want * 3.0).backward()
    assert_close(got, want)
    assert_close(w.grad, ew.grad)
    assert_close(s.grad, es.grad)


def test_0d_integer_inputs_and_outputs_equal_eager():
    f = dg.compile(_int_outputs, tiered=False)
    w = dg.tensor(np.array([0.5, -1.0, 2.0, 3.0], np.float32))
    for k in (1, 7):
        kt = dg.tensor(np.int64(k))
        got, want = f(w, kt), _int_outputs(w, kt)
        for g, e in zip(got, want):
            assert g.shape == () and g.dtype == e.dtype
            assert g.item() == e.item()
    assert f.stats.traces == 1


def test_the_disk_cache_keeps_a_kernel_compiled_for_1d_arguments_apart(tmp_path, monkeypatch):
    """A 0-d kernel compiled from the disk cache in a new process (here: forgotten) is the
    one for 0-d arguments; the same function called with ``(1,)`` arrays is another Numba
    signature, compiled on its own, never the cached 0-d one."""
    monkeypatch.setenv("DUALGRAPH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("DUALGRAPH_DISABLE_DISK_CACHE", raising=False)
    c = 1.0 + uuid.uuid4().int % 10**6 / 10**7  # a graph no other test compiles

    def g(x):
        return dg.tanh(x * c) - 0.5

    x = dg.tensor(np.float64(0.3))
    want = np.tanh(0.3 * c) - 0.5
    first = dg.compile(g, tiered=False)
    assert_close(first(x).numpy(), np.float64(want), rtol=1e-12, atol=0)
    kernel = first.entries()[0].kernel
    forget_kernel(kernel.path)
    again = dg.compile(g, tiered=False)
    assert_close(again(x).numpy(), np.float64(want), rtol=1e-12, atol=0)
    loaded = again.entries()[0].kernel
    assert loaded is not kernel and sum(loaded.fn.stats.cache_hits.values()) == 1
    assert [t.ndim for t in _arg_types(loaded)[0]] == [0, 0]
    # The (1,) arrays the kernels took before: a signature of their own, and the answer.
    out = np.empty(1)
    loaded.fn(np.array([0.3]), out)
    assert_close(out[0], np.float64(want), rtol=1e-12, atol=0)
    assert sorted(t.ndim for types in _arg_types(loaded) for t in types) == [0, 0, 1, 1]
