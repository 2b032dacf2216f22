"""Speculation on values read into Python (``if loss.item() > 5``, ``max(1, n.item())``,
``if norm > theta:`` on a traced tensor).

Where Python needs the value of a number read from a traced value, the trace computes it
from the call's real inputs (the graph up to that value, run with the registry's NumPy
kernels, which eager mode runs too), goes on with that value, and records what the
program took from it: a comparison's outcome, a truth value, the side ``max``/``min``
chose, ``int()`` or ``float()`` of it. The entry is guarded on those (`ReadGuard`): each
call first computes the same values from its own inputs, before any kernel runs or
anything is written, and runs the compiled kernels only when every outcome is what the
trace found. Otherwise the call retraces (within the retrace budget, keeping both
entries) or runs eagerly, as for any guard that fails.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from .._location import user_location
from ..eager.internal import array_of
from ..eager.tensor import TRACE_KEY, Tensor
from ..ir.graph import Node, post_order
from ..ir.interpret import interpret
from ..ir.optable import op_table
from ..trace.tracer import TRUTH_VALUE, Tracer, trace_error
from .guards import Guard, value_key
from .plan import (
    ArgumentGrad,
    AttrTensor,
    CapturedGrad,
    CapturedTensor,
    Plan,
    RuntimeScalar,
)

# Prefixes longer than this are not speculated on: each call computes the prefix again
# before its kernels, in NumPy.
MAX_PREFIX = 2048

# The lines whose number, taken as a float value (``float()``, ``math.log``), changed
# between calls of the compiled function being traced (`unstable_values`): a value that
# changes once (a loss) would retrace on every call, so those lines run the signature
# eagerly instead.
_UNSTABLE: contextvars.ContextVar[frozenset] = contextvars.ContextVar(
    "unstable_read_values", default=frozenset())


@contextlib.contextmanager
def unstable_values(lines: set) -> Iterator[None]:
    """Trace with ``lines`` (``"file.py:12"``) not speculated on for values."""
    token = _UNSTABLE.set(frozenset(lines))
    try:
        yield
    finally:
        _UNSTABLE.reset(token)


def changed_values(guards: Any, args: tuple) -> list:
    """The lines of the float values (not comparison outcomes, nor ints) that ``guards``
    speculated on and that differ for a call with ``args``."""
    out = []
    for g in guards.items if guards is not None else ():
        if isinstance(g, ReadGuard):
            now = g.now(args)
            out += [s.where for k, s in enumerate(g.specs)
                    if s.value and (now is None or now[k] != s.expected)]
    return out


class Speculation:
    """One use of read numbers: ``fn`` of the Python values of ``nodes`` (0-d float64 or
    int64 graph values) gave ``expected`` (a `guards.value_key`) at ``where``; ``value``:
    a float taken as the number itself (a conversion), not a comparison's outcome."""

    __slots__ = ("nodes", "fn", "expected", "where", "what", "value")

    def __init__(self, nodes: tuple, fn: Callable, expected: Any, where: str,
                 what: str, value: bool) -> None:
        self.nodes, self.fn, self.expected, self.where, self.what, self.value = \
            nodes, fn, expected, where, what, value


def _prefix(nodes: list) -> list | None:
    """The nodes ``nodes`` depend on, in an order that runs (None: too many, or an op the
    interpreter does not run)."""
    ops = op_table()
    return post_order(nodes, lambda n, visited: visited > MAX_PREFIX or (
        n.op not in ("input", "const", "fused") and n.op not in ops))


def _python(node: Node, value: np.ndarray) -> Any:
    """The Python number a read stands for."""
    return float(value) if node.dtype.kind == "f" else int(value)


class _Prefix:
    """The ops the read values depend on as straight-line NumPy calls (the interpreter's
    kernels, without its per-node lookups: each call of a compiled step runs it)."""

    __slots__ = ("inputs", "outputs", "steps", "out_slots")

    def __init__(self, order: list, outputs: list) -> None:
        ops = op_table()
        self.inputs = [n for n in order if n.op == "input"]
        self.outputs = list(outputs)
        slot = {id(n): k for k, n in enumerate(self.inputs)}
        steps = []
        for n in order:
            if n.op == "input":
                continue
            slot[id(n)] = len(slot)
            args = tuple((True, slot[id(i)]) if isinstance(i, Node) else (False, i)
                         for i in n.inputs)
            if n.op == "const":
                steps.append((lambda v=n.attrs["value"]: v, (), {}))
            elif n.op == "fused":
                steps.append((lambda *a, body=n.attrs["body"]: interpret(body, *a)[0],
                              args, {}))
            else:
                steps.append((ops[n.op].impl, args, dict(n.attrs)))
        self.steps = steps
        self.out_slots = [slot[id(o)] for o in outputs]

    def __call__(self, arrays: list) -> list:
        env = list(arrays)
        with np.errstate(all="ignore"):  # as eager mode's kernels run
            for impl, args, attrs in self.steps:
                env.append(np.asarray(impl(*[env[a] if ref else a for ref, a in args],
                                           **attrs)))
        return [env[k] for k in self.out_slots]


def _trace_inputs(ctx: Any) -> dict:
    """Each graph input's array as the call began (by node id), where the trace knows it:
    arguments, captured tensors and gradients, hyperparameters. The random key is left
    out: a call draws a new one, which its kernels alone see."""
    known = {id(n): array_of(t) for t, n in ctx.captured if t is not TRACE_KEY}
    known.update((id(n), s()) for n, s in ctx.runtime)
    for n in ctx.inputs:
        t = ctx.arg_tensors.get(id(n))
        if isinstance(t, Tensor):
            known[id(n)] = array_of(t)
    return known


def speculate(ctx: Any, reads: tuple, fn: Callable, what: str,
              value: bool = False) -> tuple[bool, Any]:
    """``fn`` of the values of ``reads`` (`symbolic` stand-ins) in the call being traced,
    recorded for `ReadGuard`: ``(True, result)``, or ``(False, None)`` when the trace
    cannot compute them (a random value, an input it does not know, too long a prefix)
    or, for a ``value``, when it changed between earlier calls (`unstable_values`)."""
    return _speculate(ctx, [r._t.node for r in reads], fn,
                      f"{what} of a number read with .item()", value)


def truth_value(ctx: Any, t: Tracer) -> bool:
    """``bool(t)`` of a traced one-element tensor inside a compiled call (``if norm >
    theta:``): its value computed from the call's inputs, the entry guarded on it, as
    torch.compile breaks its graph there and compiles both sides. Where the trace
    cannot compute it, the call runs eagerly (`EagerOnlyError` naming the line)."""
    if t.node.shape and int(np.prod(t.node.shape)) != 1:
        raise RuntimeError(
            f"Boolean value of a tensor of shape {tuple(t.node.shape)} with more than one "
            "value is ambiguous: use .any() / .all() on the NumPy array, or dg.where")
    # Nonzero in the graph (a NaN is true, as bool(float("nan"))): one int64 value for
    # every dtype, which the guard reads as the interpreter computes it.
    nz = (t != 0).reshape(()).to(np.int64)
    done, result = _speculate(ctx, [nz.node], bool, "the truth value of a traced tensor")
    if done:
        return result
    e = trace_error(TRUTH_VALUE, eager_only=True)
    ctx.read_needs.append(e)  # raised after the trace even if the program catches it
    raise e


def _speculate(ctx: Any, nodes: list, fn: Callable, what: str,
               value: bool = False) -> tuple[bool, Any]:
    where = user_location(3) or "the function"
    if value and where in _UNSTABLE.get():
        return False, None
    order = _prefix(nodes)
    if order is None:
        return False, None
    known = _trace_inputs(ctx)
    prefix = _Prefix(order, nodes)
    if any(id(n) not in known for n in prefix.inputs):
        return False, None
    try:
        values = prefix([known[id(n)] for n in prefix.inputs])
    except Exception:  # an op the interpreter cannot run here: the call runs eagerly
        return False, None
    result = fn(*[_python(n, v) for n, v in zip(nodes, values)])
    # Only a float taken as a value is given up on once it changes: an int (a count, a
    # size, a loop bound) retraces per value within the budget, as torch.compile
    # specializes such an int.
    ctx.speculated.append(Speculation(tuple(nodes), fn, value_key(result), where, what,
                                      value and isinstance(result, float)))
    return True, result


def _getter(plan: Plan, k: int, positions: list) -> Callable[[tuple], np.ndarray]:
    """How a call gets graph input ``k``'s array from its arguments."""
    n_args = len(positions)
    if k < n_args:
        p = positions[k]
        return lambda args: array_of(args[p]) if isinstance(args[p], Tensor) else args[p]
    src = plan.sources[k - n_args]
    if isinstance(src, CapturedTensor):
        return lambda args: array_of(src.tensor)
    if isinstance(src, AttrTensor):
        return lambda args: array_of(src.table[src.name])
    if isinstance(src, CapturedGrad):
        return lambda args: array_of(src.owner.grad)
    if isinstance(src, ArgumentGrad):
        return lambda args: array_of(args[src.position].grad)
    if isinstance(src, RuntimeScalar):
        return lambda args: src()
    raise TypeError(f"no array for {src!r}")


class ReadGuard(Guard):
    """The outcomes of the uses of read numbers (`Speculation`): each call computes the
    values from its inputs (the ops they depend on, run as the trace ran them)
    and compares what the program took from them. A value that cannot be computed (an
    earlier guard failed: another shape) is no outcome, so the guard fails."""

    __slots__ = ("prefix", "getters", "specs", "_reads")

    def __init__(self, prefix: _Prefix, getters: list, specs: list) -> None:
        self.prefix, self.getters, self.specs = prefix, getters, specs
        self.expected = tuple(s.expected for s in specs)
        at = {id(o): k for k, o in enumerate(prefix.outputs)}
        # Per speculation: its function and the (output, node) pairs it reads.
        self._reads = [(s.fn, [(at[id(n)], n) for n in s.nodes]) for s in specs]

    def now(self, args: tuple) -> Any:
        try:
            ins = []
            for g, n in zip(self.getters, self.prefix.inputs):
                a = g(args)
                ins.append(a if a.shape == n.shape else a.reshape(n.shape))
            values = self.prefix(ins)
            return tuple([value_key(fn(*[_python(n, values[k]) for k, n in reads]))
                          for fn, reads in self._reads])
        except Exception:
            return None

    def describe(self, now: Any) -> str:
        if now is None:
            return ("a value read into Python (.item(), a truth value) could not be "
                    "computed from this call's inputs")
        for s, got in zip(self.specs, now):
            if got != s.expected:
                return (f"{s.where}: {s.what} gave {s.expected[1]!r} when traced, "
                        f"{got[1]!r} now")
        return "the values read into Python gave what the trace found"


def read_guard(plan: Plan, ctx: Any, args: tuple) -> Any:
    """``plan.guards`` with a `ReadGuard` last, when the trace speculated on read numbers
    (after the others: a call whose inputs another guard rejects is not computed)."""
    from .guards import Guards

    if not ctx.speculated:
        return plan.guards
    nodes, seen = [], set()
    for s in ctx.speculated:
        for n in s.nodes:
            if id(n) not in seen:
                seen.add(id(n))
                nodes.append(n)
    prefix = _Prefix(post_order(nodes), nodes)
    index = {id(n): k for k, n in enumerate(plan.graph.inputs)}
    positions = [i for i, a in enumerate(args) if isinstance(a, (Tensor, np.ndarray))]
    getters = [_getter(plan, index[id(n)], positions) for n in prefix.inputs]
    guard = ReadGuard(prefix, getters, list(ctx.speculated))
    items = list(plan.guards.items) if plan.guards is not None else []
    return Guards(items + [guard])
