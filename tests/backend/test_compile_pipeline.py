"""The LLVM pipeline kernels compile with: loop unrolling off inside `cache.optimisation`
(and only there), named in the kernel module's header so that machine code of another
pipeline is never loaded from the disk cache, no C entry point, and the same answers."""

from __future__ import annotations

import numpy as np

import dualgraph as dg
from dualgraph.backend.numba import build, cache
from dualgraph.ir.interpret import interpret
from dualgraph.passes import optimize


def _tuning() -> tuple[bool, bool]:
    """(loop unrolling, loop vectorization) of the pass builder Numba would make now."""
    from numba.core import codegen
    from numba.core.registry import cpu_target

    pb = codegen.create_pass_builder(cpu_target.target_context.codegen()._tm, opt=2,
                                     loop_vectorize=True, slp_vectorize=False)
    return pb._pto.loop_unrolling, pb._pto.loop_vectorization


def test_unrolling_is_off_only_inside_the_block():
    assert _tuning()[0]
    with cache.optimisation(2):
        unroll, vectorize = _tuning()
        assert not unroll and vectorize  # the vectoriser still runs
    assert _tuning()[0]
    with cache.optimisation(None):  # Numba's own pipeline when the user set NUMBA_OPT
        assert _tuning()[0]


def test_the_pipeline_is_part_of_the_module_and_the_answer_is_the_same(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((6, 40)).astype(np.float32)

    def f(x):
        return (dg.exp(x * 0.5) * x).sum(axis=1)

    g = optimize(dg.trace(f, dg.tensor(x)))
    with cache.isolated(str(tmp_path)):
        k = build(g, opt=2)
        assert f"# LLVM optimisation level 2, {cache.PIPELINE}" in k.source
        assert "no_cfunc_wrapper=True" in k.source
        k.compile([x])
        (want,) = interpret(g, x)
        dg.testing.assert_close(k(x)[0], want, rtol=1e-5, atol=1e-6)
        (sig,) = k.fn.overloads
        assert k.fn.overloads[sig].fndesc.llvm_cfunc_wrapper_name not in k.fn.inspect_llvm(sig)


def test_kernels_compile_with_the_collector_paused_and_restored():
    """`compile_dispatcher` compiles with Python's garbage collector off; the garbage
    cycles of the compile are collected at its end, and the collector comes back as it
    was (off stays off), also when two compiles overlap."""
    import gc
    import threading
    import weakref

    from dualgraph.backend.numba import compile_dispatcher

    class Node:
        pass

    seen: list = []

    class Dispatcher:
        def compile(self, sig: tuple) -> None:
            seen.append(gc.isenabled())
            node = Node()
            node.me = node  # garbage only a collection finds
            seen.append(weakref.ref(node))

    compile_dispatcher(Dispatcher(), None, ())
    assert seen[0] is False and gc.isenabled()
    assert seen[1]() is None
    was = gc.isenabled()
    gc.disable()
    try:
        compile_dispatcher(Dispatcher(), None, ())
        assert not gc.isenabled()
    finally:
        if was:
            gc.enable()
    inside, leave = threading.Event(), threading.Event()

    def hold() -> None:
        with cache.collector_paused():
            inside.set()
            leave.wait(10)

    t = threading.Thread(target=hold)
    t.start()
    inside.wait(10)
    compile_dispatcher(Dispatcher(), None, ())
    assert not gc.isenabled()  # the other compile is still under way
    leave.set()
    t.join(10)
    assert gc.isenabled()
