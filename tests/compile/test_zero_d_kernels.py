"""A kernel whose operands are all 0-d takes a 0-d value as the 0-d array its tensor holds
and fills 0-d outputs that become the result tensors' arrays as they are: no ``(1,)`` views
on either side. A kernel mixing 0-d and larger operands takes and fills its 0-d values as
``(1,)`` arrays. One predicate (`zero_d_operands`) decides it for every place that makes or
reads a kernel's arrays; compiled answers equal eager ones for every mix of operands, and
the disk cache keeps kernels of the two conventions apart."""

from __future__ import annotations

import uuid

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.backend.numba import cache, codegen
from dualgraph.compile import specialize, tiered
from dualgraph.ir.graph import zero_d_operands
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


def _pair(x, y):
    return x * y, x + y


def _mixed_pair(w, s):
    return (w * s).sum(), w * s + s


def _check_kernel(kernel, backward: bool) -> None:
    """Every place that makes or reads ``kernel``'s arrays follows `zero_d_operands`."""
    graph = kernel.graph
    zero_d = zero_d_operands(graph)
    ndim = (lambda n: len(n.shape)) if zero_d else (lambda n: max(len(n.shape), 1))
    assert kernel.zero_d is zero_d
    has_0d = any(not n.shape for n in [*graph.inputs, *graph.outputs])
    assert ("dgk.one_d(" in kernel.source) is (zero_d and has_0d)
    # One Numba signature: the call path (or the backward node) passed what was compiled.
    (types,) = _arg_types(kernel)
    assert [t.ndim for t in types[:len(graph.inputs)]] == [ndim(n) for n in graph.inputs]
    outs = [o for k, o in enumerate(graph.outputs) if k not in kernel.write_to]
    made = kernel.new_outputs()
    assert [a.ndim for a in made] == [ndim(o) for o in outs]
    ins = kernel.prepare([np.ones(n.shape, n.dtype) for n in graph.inputs])
    assert [a.ndim for a in ins] == [ndim(n) for n in graph.inputs]
    # Tier 0 takes and fills the same arrays, and describes them so to the worker.
    tier0 = tiered.InterpretedKernel(graph, kernel.write_to)
    assert tier0.zero_d is zero_d
    filled = tier0.new_outputs()
    tier0.run([a.copy() for a in ins], filled)
    kernel.run([a.copy() for a in ins], made)
    assert [a.shape for a in filled] == [a.shape for a in made]
    describe = tiered._cot_desc if backward else tiered._out_desc
    assert [describe(o, graph)[1] for o in outs] == [a.ndim for a in made]


@pytest.mark.parametrize("fn, shapes", [(_pair, [(), ()]), (_mixed_pair, [(3,), ()]),
                                        (_mixed_out, [(3,), ()])])
def test_every_place_follows_the_one_predicate(fn, shapes):
    """A forward and a backward kernel, each all 0-d or mixed: the printed views, Numba's
    argument types, `Kernel.prepare`/`new_outputs`, tier 0, the worker's descriptions,
    `specialize.kernel_inputs` and the call path agree with `zero_d_operands`, and the
    answers equal eager's."""
    f = dg.compile(fn, tiered=False)
    rng = np.random.default_rng(1)
    values = [rng.standard_normal(s) for s in shapes]
    for _ in range(2):  # the second call takes the generated call path
        args = [dg.tensor(v, requires_grad=True) for v in values]
        eargs = [dg.tensor(v, requires_grad=True) for v in values]
        got, want = f(*args), fn(*eargs)
        (got[0] * 2.0 + got[1].sum()).backward()
        (want[0] * 2.0 + want[1].sum()).backward()
        for g, e in [*zip(got, want), *((a.grad, e.grad) for a, e in zip(args, eargs))]:
            assert g.shape == e.shape and g.dtype == e.dtype
            assert_close(g, e)
    (entry,) = f.entries()
    assert entry.bwd_kernel is not None
    _check_kernel(entry.kernel, False)
    _check_kernel(entry.bwd_kernel, True)
    zero_d = zero_d_operands(entry.optimized)
    assert zero_d is (fn is _pair)
    arrays = specialize.kernel_inputs(entry, tuple(args))
    assert [a.ndim for a in arrays] == [len(n.shape) if zero_d else max(len(n.shape), 1)
                                        for n in entry.optimized.inputs]
    path = f.call_source(*args)
    assert (".reshape(1)" in path) is not zero_d
    scalar_out = any(not o.shape for o in entry.optimized.outputs)
    assert ("[0, ...]" in path) is (scalar_out and not zero_d)


def _yes(graph) -> bool:
    return True


def _no(graph) -> bool:
    return False


def test_the_kernel_module_differs_between_the_conventions(monkeypatch):
    """The disk cache keys a kernel by its module's text: a graph lowered under the other
    convention is another module, so a kernel compiled under one is never loaded under
    the other."""
    f = dg.compile(_mixed_out, tiered=False)
    f(dg.tensor(np.ones(3)), dg.tensor(2.0))
    g = dg.compile(_poly, tiered=False)
    g(dg.tensor(1.0), dg.tensor(2.0))
    for graph in (f.entries()[0].optimized, g.entries()[0].optimized):
        own = codegen.lower(graph).code
        monkeypatch.setattr(codegen, "zero_d_operands", {True: _no, False: _yes}[
            zero_d_operands(graph)])
        other = codegen.lower(graph).code
        monkeypatch.undo()
        assert ("dgk.one_d(" in own) is zero_d_operands(graph)
        assert cache.digest_of(own) != cache.digest_of(other)
