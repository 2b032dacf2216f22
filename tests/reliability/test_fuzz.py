"""Differential fuzzing: random programs, every mode, the same answers.

The random programs (float32 and float64) come from tests/_support/random_programs.py, shared with
the property tests. A failing case prints exactly what ran, both as Python and as IR. For
each program:

- eager == ``interpret(traced)`` == ``interpret(optimized)`` (forward), and the traced
  backward graph, interpreted, gives the eager gradients; all of it again with each pass of
  the pipeline switched off;
- the eager gradient equals float64 central finite differences (`gradcheck`);
- compiled (`dg.compile`) == eager, forward and gradients, with the default pipeline or with
  one pass switched off; and the weighted loss compiled whole (a scalar loss over leaves,
  whose ``backward()`` skips the autograd engine) gives the eager gradients.

Budgets: the default run checks ~100 programs with the interpreter and a dozen compiled
(each new program costs about a second of Numba compilation; the kernels persist in the
test kernel cache, and the examples are derandomized so a rerun compiles nothing). The long
run is opt-in: ``pytest tests/reliability -m fuzz`` (random seeds, larger budgets).
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import math
from collections.abc import Callable, Iterator
from typing import Any
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dualgraph as dg
from dualgraph import passes as P
from dualgraph.eager import tensor as eager_tensor
from dualgraph.ops import OPS
from dualgraph.testing import assert_close, gradcheck

from .._support.random_programs import (
    NAMESPACE,
    Builder,
    Program,
    case_rows,
    eager_run,
    emit_case_row,
    grads_by_leaf,
    programs,
    weighted_loss,
)
from .._support.tolerance import tolerance
from .conftest import PROGRAMS

COMPILE_MODULE = importlib.import_module("dualgraph.compile.specialize")  # runs optimize
PASS_NAMES = tuple(name for name, _ in P.DEFAULT_PIPELINE)


# ------------------------------------------------------------------------- checks

# Two ops' float32 results can differ by an ulp (libm vs LLVM, summation order), which a
# dozen chained ops can amplify (a difference of nearby values, then a division): float32
# comparisons between modes get 20x the API's 1e-5. float64 keeps 1e-10 within one mode's
# NumPy kernels and 1e-9 against compiled code.
TOL = {np.dtype(np.float32): 2e-4, np.dtype(np.float64): 1e-9}


def tol(expected: Any, dtype: np.dtype) -> dict[str, float]:
    return tolerance(expected, TOL[np.dtype(dtype)])


def check_interpreter(prog: Program, fn: Callable, arrays: list, outs: tuple,
                      weights: list, eager_grads: list) -> None:
    dt = prog.dtype
    args = [arrays[k] for k in prog.arg_of]
    # Traced from leaves that require grad, as eager_run's are: a program may branch on
    # requires_grad (a case row's fresh leaf, a gradient kept on the tape).
    traced = dg.trace(fn, *[dg.tensor(a, requires_grad=a.dtype.kind == "f") for a in args])
    expected = [o.numpy() for o in outs]
    for k, (got, e) in enumerate(zip(dg.interpret(traced, *args), expected)):
        assert_close(got, e, **tol(e, dt), msg=f"interpret(traced) output {k}")
    for off in (None, *PASS_NAMES):
        opt = P.optimize(traced, skip=(off,) if off else (), verify=True)
        for k, (got, e) in enumerate(zip(dg.interpret(opt, *args), expected)):
            assert_close(got, e, **tol(e, dt),
                         msg=f"interpret(optimized, {off or 'all passes'} off) output {k}")
    # The traced backward graph, interpreted (with and without optimizing it).
    wrt = [i for i, n in enumerate(traced.inputs) if n.dtype.kind == "f"]
    d = dg.differentiate(traced, wrt)
    fwd = dg.interpret(d.forward, *args)
    residuals = fwd[len(traced.outputs):]
    cot = [w if w is not None and o.requires_grad else np.zeros(o.shape, o.dtype)
           for o, w in zip(outs, weights)]
    for off in ("unoptimized", None, *PASS_NAMES):
        bwd = d.backward if off == "unoptimized" else P.optimize(
            d.backward, skip=(off,) if off else (), verify=True)
        got = grads_by_leaf(prog, dg.interpret(bwd, *cot, *residuals), wrt, arrays)
        for k, (g, e) in enumerate(zip(got, eager_grads)):
            e = np.zeros_like(arrays[k]) if e is None else e
            assert_close(g, e, **tol(e, dt),
                         msg=f"interpreted backward ({off or 'all passes'} off) gradient {k}")


def check_finite_differences(prog: Program, fn: Callable, arrays: list, weights: list,
                             outs: tuple) -> None:
    if not any(w is not None and o.requires_grad for o, w in zip(outs, weights)):
        return
    if ".detach()" in prog.source() or "no_grad_scale(" in prog.source():
        return  # finite differences see through stop_gradient and no_grad; autodiff must not

    def scalar(*leaves: Any) -> Any:
        res = prog.call(fn, list(leaves))
        terms = [(o * w.astype(np.float64)).sum() for o, w in zip(res, weights)
                 if w is not None]
        return functools.reduce(lambda a, c: a + c, terms)

    gradcheck(scalar, *[a.astype(np.float64) for a in arrays], atol=1e-5, rtol=1e-4)


@contextlib.contextmanager
def passes_off(off: str | None) -> Iterator[None]:
    """`dg.compile` with one pass of the default pipeline left out."""
    if off is None:
        yield
        return
    patched = functools.partial(P.optimize, skip=(off,))
    with mock.patch.object(COMPILE_MODULE, "optimize", patched):
        yield


def check_compiled(prog: Program, fn: Callable, arrays: list, outs: tuple, weights: list,
                   eager_grads: list, off: str | None) -> None:
    dt = prog.dtype
    with passes_off(off):
        compiled = dg.compile(fn)
        # Inference first (no grad), then a training call (outputs on the tape).
        with dg.no_grad():
            plain = prog.call(compiled, [dg.tensor(a) for a in arrays])
        leaves = [dg.tensor(a.copy(), requires_grad=True) for a in arrays]
        res = prog.call(compiled, leaves)
    assert compiled.stats.traces == 2 and compiled.stats.kernels >= 2, str(compiled.stats)
    for k, (p, r, e) in enumerate(zip(plain, res, outs)):
        assert_close(p, e, **tol(e.numpy(), dt), msg=f"compiled (no grad) output {k}")
        assert_close(r, e, **tol(e.numpy(), dt), msg=f"compiled output {k}")
        assert r.requires_grad == e.requires_grad, f"output {k}: requires_grad differs"
    loss = weighted_loss(res, weights)
    if loss is not None:
        loss.backward()
    for k, (t, e) in enumerate(zip(leaves, eager_grads)):
        if e is None:
            assert t.grad is None, f"gradient {k}: compiled gives a gradient, eager None"
        else:
            assert t.grad is not None, f"gradient {k}: compiled gives None, eager a gradient"
            assert_close(t.grad, e, **tol(e, dt), msg=f"compiled gradient {k}")


def check_compiled_loss(prog: Program, fn: Callable, arrays: list, weights: list,
                        eager_grads: list, off: str | None) -> None:
    """The weighted loss compiled as one function: a scalar loss over leaves, whose
    ``backward()`` hands its precomputed gradients to ``.grad`` without the autograd
    engine (`PrecomputedBackward.hand_out`); they must be the eager gradients."""
    if all(e is None for e in eager_grads):
        return  # no output needs a gradient: the loss is None, which a trace refuses

    def loss_fn(*ts):
        return weighted_loss(prog.call(fn, list(ts)), weights)

    with passes_off(off):
        compiled = dg.compile(loss_fn)
        leaves = [dg.tensor(a.copy(), requires_grad=True) for a in arrays]
        loss = compiled(*leaves)
    if loss is None or not loss.requires_grad:
        return
    assert loss.grad_fn.hands_out, loss.grad_fn.name()
    with mock.patch.object(eager_tensor, "run_backward") as engine:
        loss.backward()
    assert not engine.called, "the compiled scalar loss went through the engine"
    dt = prog.dtype
    for k, (t, e) in enumerate(zip(leaves, eager_grads)):
        if e is None:
            assert t.grad is None, f"gradient {k}: compiled loss gives a gradient, eager None"
        else:
            assert t.grad is not None, f"gradient {k}: compiled loss gives None"
            assert_close(t.grad, e, **tol(e, dt), msg=f"compiled loss gradient {k}")


def run_program(prog: Program, compiled_off: Any = False) -> None:
    """All checks for one program; ``compiled_off`` False skips compiling, else it names
    the pass to switch off (None: the whole pipeline runs)."""
    fn = prog.function()
    arrays = prog.arrays()
    outs, weights, eager_grads = eager_run(prog, fn, arrays)
    try:
        check_interpreter(prog, fn, arrays, outs, weights, eager_grads)
        check_finite_differences(prog, fn, arrays, weights, outs)
        if compiled_off is not False:
            check_compiled(prog, fn, arrays, outs, weights, eager_grads, compiled_off)
            check_compiled_loss(prog, fn, arrays, weights, eager_grads, compiled_off)
    except Exception as e:
        # Shown for the final (shrunk) example: the program as Python and as IR.
        raise AssertionError(
            f"{e}\n\n--- program (Python) ---\n{prog.report()}\n--- program (IR) ---\n"
            f"{_ir(fn, arrays, prog)}"
        ) from e
    PROGRAMS["compiled" if compiled_off is not False else "interpreter"] += 1


def _ir(fn: Callable, arrays: list, prog: Program) -> str:
    try:
        return str(dg.trace(fn, *[dg.tensor(arrays[k]) for k in prog.arg_of]))
    except Exception as e:  # noqa: BLE001 - the report must not hide the original failure
        return f"(tracing failed: {e!r})"


# ------------------------------------------------------------------------- tests

COMMON = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow,
                                                      HealthCheck.data_too_large]}


def test_generators_cover_every_registered_op():
    """Every registered op has a row of the case table that the programs draw from, and
    the statement built from it reaches the op (in the traced forward graph, with float
    arguments requiring grad: a custom Function records its node only then)."""
    by_op: dict[str, list] = {}
    for row in case_rows().values():
        by_op.setdefault(row.op, []).append(row)
    missing = set(OPS) - set(by_op)
    assert not missing, f"no case row the programs can draw runs {sorted(missing)}"
    unreached = []
    for op in sorted(OPS):
        row = by_op[op][0]
        b = Builder(np.float64)
        emit_case_row(b, row, lambda shape: None)
        prog = b.prog
        prog.outputs = [v for v, _ in prog.lines]
        arrays = prog.arrays()
        args = [dg.tensor(arrays[k], requires_grad=arrays[k].dtype.kind == "f")
                for k in prog.arg_of]
        if op not in {n.op for n in dg.trace(prog.function(), *args).nodes}:
            unreached.append(f"{op} ({row.id})")
    assert not unreached, f"statements that do not reach their op: {unreached}"


def test_programs_draw_case_rows():
    """The random programs run case rows, parameters of the program among their inputs."""
    seen: set[str] = set()

    @settings(max_examples=300, derandomize=True, database=None, **COMMON)
    @given(programs())
    def collect(prog: Program) -> None:
        seen.update(expr.split("'")[1] for _, expr in prog.lines
                    if expr.startswith("case_row("))

    collect()
    assert len(seen) > 20, sorted(seen)


@settings(max_examples=100, derandomize=True, database=None, **COMMON)
@given(programs())
def test_fuzz_modes_agree_interpreted(prog: Program) -> None:
    run_program(prog)


@settings(max_examples=12, derandomize=True, database=None, **COMMON)
@given(programs(max_statements=6), st.sampled_from((None, *PASS_NAMES)))
def test_fuzz_compiled_equals_eager(prog: Program, off: str | None) -> None:
    run_program(prog, compiled_off=off)


@pytest.mark.slow
@pytest.mark.fuzz
@settings(max_examples=2000, **COMMON)
@given(programs(max_statements=12))
def test_long_fuzz_interpreted(prog: Program) -> None:
    run_program(prog)


@pytest.mark.slow
@pytest.mark.fuzz
@settings(max_examples=150, **COMMON)
@given(programs(max_statements=10), st.sampled_from((None, *PASS_NAMES)))
def test_long_fuzz_compiled(prog: Program, off: str | None) -> None:
    run_program(prog, compiled_off=off)


def test_failure_report_shows_python_and_ir():
    """A failing check reports the program as runnable Python and as IR."""
    b = Builder(np.float64)
    x = b.param((2, 3))
    b.emit(f"dg.exp({x.name}) * 2.0", 2 * math.e ** 2)
    b.prog.outputs = [b.vars[-1]]
    prog = b.prog
    with mock.patch(__name__ + ".check_interpreter", side_effect=AssertionError("boom")):
        with pytest.raises(AssertionError) as info:
            run_program(prog)
    text = str(info.value)
    assert "def program(x0):\n    v0 = dg.exp(x0) * 2.0\n    return (v0,)" in text
    assert "= exp %" in text and "= mul %" in text  # the IR
    # The printed source is runnable: it recomputes the program.
    ns = dict(NAMESPACE)
    exec(prog.source(), ns)  # noqa: S102
    a = prog.arrays()[0]
    assert_close(ns["program"](dg.tensor(a))[0], np.exp(a) * 2.0)
