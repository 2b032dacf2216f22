"""Int arguments traced as graph inputs (automatic dynamic).

A compiled function first bakes a Python ``int`` argument in, keyed by its value. When a
call brings another value with everything else equal, the argument is traced again as a
`SymbolicInt`: a 0-d int64 input of the graph, so every later value runs the same kernel
(``torch.compile`` recompiles such an int as a dynamic ``SymInt`` the same way). An
argument the function never uses costs nothing more; one used in arithmetic with tensors
or ints is computed in the graph. Where the function needs the concrete value (``if i``,
``range(i)``, indexing a list, a shape, a comparison, a float), the symbolic trace is
dropped and the argument stays keyed by value (`NeedsValue`).
"""

from __future__ import annotations

import functools
import math
import operator
import sys
import types
from collections.abc import Callable
from typing import Any

import numpy as np

from .._location import PKG, source_line, user_location
from ..dtypes import DEFAULT_FLOAT
from ..eager.tensor import Tensor
from ..errors import EagerOnlyError
from ..modes import current_trace
from ..ops.mixin import TensorOps
from ..ops.number_operators import number_operators
from ..trace.tracer import Tracer, trace_error
from .capture import CallTraceContext, NeedsValue, function_of  # noqa: F401 - re-exported
from .speculate import speculate


def _tensor_only(fn: Callable, name: str, reflected: bool = False) -> Callable:
    """A `SymbolicInt` operator defined with a tensor only (with a number it needs the
    value)."""

    def op(self: SymbolicInt, o: Any) -> Any:
        if isinstance(o, TensorOps):
            return self._bin(o, fn, name, reflected)
        return self._need(name)

    return op


def _arithmetic(fn: Callable, stem: str, spelling: str, reflected: bool) -> Callable:
    return lambda self, o: self._bin(o, fn, spelling, reflected)


def _unary(fn: Callable, stem: str) -> Callable:
    return lambda self: self._un(fn)


def _compare(fn: Callable, stem: str) -> Callable:
    return lambda self, o: self._need("a comparison")


def _convert(fn: Callable, spelling: str) -> Callable:
    return lambda self, *args: self._need(spelling)


@number_operators(_arithmetic, _unary, _compare, _convert)
class SymbolicInt:
    """A Python ``int`` argument while a compiled call traces it as a 0-d int64 input.

    Arithmetic with ints (``+ - * // %``, ``-i``, ``abs``) gives another `SymbolicInt`,
    computed in the graph in int64 (Python's results within int64); meeting a tensor in
    ``+ - * / // %`` it is converted to the tensor's dtype, as Python converts an ``int``
    operand. Anything
    that needs the value itself records why in ``needs`` and raises `NeedsValue`.
    """

    __slots__ = ("_t", "_needs")
    _stands_for: type = int

    def __init__(self, t: Any, needs: list) -> None:
        self._t, self._needs = t, needs

    @property
    def __class__(self) -> type:  # noqa: D105
        # ``isinstance(n, int)`` in the user's code must take the branch eager mode takes
        # (``isinstance`` consults ``__class__`` when the type does not match); dualgraph's
        # own code tells the symbolic number from a number this way.
        if sys._getframe(1).f_code.co_filename.startswith(PKG):
            return type(self)
        return self._stands_for

    def _need(self, reason: str) -> Any:
        self._needs.append(reason)
        raise NeedsValue(reason)

    def trace_value(self) -> Any:
        """The tracer's hook: this int as an op operand (``dg.add(x, i)``)."""
        return self._t

    def operands_met(self, ins: tuple) -> None:
        """The tracer's hook, for an op this int is an operand of (``dg.add(x, i)``)."""
        for n in ins:
            dtype = getattr(n, "dtype", None)
            if dtype is not None and dtype.kind in "iu" and dtype != np.int64:
                self._need(f"with a {dtype} tensor")

    def _as_operand_of(self, other: Any) -> Any:
        dtype = other.dtype
        if dtype.kind == "b":  # bool tensor with an int: an int64 result
            return self._t
        if dtype.kind in "iu" and dtype != np.int64:
            # Eager mode refuses an int out of the tensor's range (``int32 + 2**40``); a
            # conversion in the graph would wrap it silently.
            return self._need(f"with a {dtype} tensor")
        return self._t.to(dtype)

    def _bin(self, other: Any, fn: Callable, name: str, reflected: bool = False) -> Any:
        if isinstance(other, TensorOps):
            a = self._as_operand_of(other)
            return fn(other, a) if reflected else fn(a, other)
        o = self._number(other, name, reflected)
        if o is NotImplemented:
            return o
        # A number read from a tensor taints what it meets: the result is one too.
        src = other if isinstance(other, _Read) and not isinstance(self, _Read) else self
        return type(src)(fn(o, self._t) if reflected else fn(self._t, o), src._needs)

    def _number(self, other: Any, name: str, reflected: bool) -> Any:
        """The other operand of ``name`` with a number, as a graph value or a Python one."""
        if isinstance(other, SymbolicFloat):
            return NotImplemented  # an int with a float is a float: the float's operator
        if isinstance(other, SymbolicInt):
            return other._t
        if type(other) is int or isinstance(other, np.integer):
            return int(other)
        return self._need(f"{name} with a {type(other).__name__}")

    def _un(self, fn: Callable) -> SymbolicInt:
        return type(self)(fn(self._t), self._needs)

    # With a tensor a division is a tensor op; with a number Python would give a float.
    __truediv__ = _tensor_only(operator.truediv, "/")
    __rtruediv__ = _tensor_only(operator.truediv, "/", True)

    # A power by a literal int exponent is computed otherwise than by a tensor exponent
    # (its result may differ in the last bit): keyed by value.
    def __pow__(self, o): return self._need("**")  # noqa: E704
    def __rpow__(self, o): return self._need("**")  # noqa: E704

    # Where Python needs the value (besides the comparisons and conversions of the
    # operator table): the argument stays keyed by value.
    def __bool__(self): return self._need("its truth value")  # noqa: E704
    def __complex__(self): return self._need("complex()")  # noqa: E704
    def __repr__(self): return self._need("repr()")  # noqa: E704
    def __str__(self): return self._need("str()")  # noqa: E704
    def __array__(self, *a, **k): return self._need("passed to NumPy")  # noqa: E704
    def __lshift__(self, o): return self._need("<<")  # noqa: E704
    def __rshift__(self, o): return self._need(">>")  # noqa: E704
    def __and__(self, o): return self._need("&")  # noqa: E704
    def __or__(self, o): return self._need("|")  # noqa: E704
    def __xor__(self, o): return self._need("^")  # noqa: E704
    def __invert__(self): return self._need("~")  # noqa: E704

    def __getattr__(self, name: str) -> Any:
        return self._need(f".{name}")


class SymbolicFloat(SymbolicInt):
    """A Python ``float`` argument (or a NumPy ``float64``) while a compiled call traces it
    as a 0-d float64 input.

    ``+ - *`` with numbers, ``/`` by a nonzero number, unary ``-`` and ``abs()`` give
    another `SymbolicFloat`, computed in the graph in float64 (Python's own double
    arithmetic); meeting a float tensor it is converted to the tensor's dtype and meeting
    an integer or bool one to the default float dtype, as a Python float operand is (``x
    * lam``, ``x ** lam``, ``dg.where(c, x, lam)``). Anything that needs the value itself
    (a comparison, ``int()``, ``math.sqrt``, NumPy, a division by it that may raise
    ``ZeroDivisionError``) raises `NeedsValue`: the argument is then keyed by value.
    """

    __slots__ = ()
    _stands_for = float

    def operands_met(self, ins: tuple) -> Any:
        """The tracer's hook: beside float32 or float64 tensors the 0-d float64 input
        enters the op converted to their dtype (float32 unless one is float64), as a
        Python float does (a bool condition may come along: ``dg.where(c, x, lam)``);
        returns that dtype when it is not float64. With an integer tensor, or alone, it
        would make the result float64 where a Python float gives the default dtype."""
        own = self._t.node
        floats, wide = False, False
        for n in ins:
            dtype = getattr(n, "dtype", None)
            if n is own or dtype is None or dtype.kind == "b":
                continue
            if dtype not in (np.float32, np.float64):
                self._need(f"with a {dtype} tensor")
            if getattr(n, "shape", ()):
                floats = True
                wide = wide or dtype == np.float64
        if not floats:
            self._need("an operand of an op without a float tensor")
        return None if wide else np.dtype(np.float32)

    def _as_operand_of(self, other: Any) -> Any:
        dtype = other.dtype
        if dtype.kind in "iub":
            dtype = DEFAULT_FLOAT[0]
        elif dtype not in (np.float32, np.float64):
            return self._need(f"with a {dtype} tensor")
        return self._t.to(dtype)

    def _number(self, other: Any, name: str, reflected: bool) -> Any:
        # Python's float ``//``, ``%`` and ``**`` (and a division by this value, which
        # raises at zero) are not what the graph's ops compute in every case.
        if name not in ("+", "-", "*", "/") or (name == "/" and reflected):
            return self._need(f"{name} with a number")
        if isinstance(other, SymbolicInt):
            if name == "/":
                return self._need("/ by a traced number")
            return other._t
        if type(other) in (int, float) or isinstance(other, (np.integer, np.floating)):
            if name == "/" and other == 0:
                return self._need("/ by zero")
            return float(other)
        return self._need(f"{name} with a {type(other).__name__}")

    def __truediv__(self, o): return self._bin(o, operator.truediv, "/")  # noqa: E704
    def __rtruediv__(self, o): return self._bin(o, operator.truediv, "/", True)  # noqa: E704

    def __pow__(self, o):  # noqa: D105
        return self._bin(o, operator.pow, "**") if isinstance(o, TensorOps) else \
            self._need("**")

    def __rpow__(self, o):  # noqa: D105
        return self._bin(o, operator.pow, "**", True) if isinstance(o, TensorOps) else \
            self._need("**")


def symbolic_ints(fn: Callable, positions: tuple) -> Callable:
    """``fn`` taking the 0-d int64 or float64 tensors at ``positions`` (the lifted int
    and float arguments): while traced it hands ``fn`` a `SymbolicInt` or `SymbolicFloat`
    for each; run eagerly, the number itself.
    A trace that needed a concrete value, or let one escape into the graph's attributes,
    its outputs or an object's attributes, raises `NeedsValue` once ``fn`` returns."""

    def call(*args: Any) -> Any:
        ctx = current_trace()
        args = list(args)
        if not isinstance(ctx, CallTraceContext) or \
                not any(isinstance(args[i], Tracer) for i in positions):
            for i in positions:
                if isinstance(args[i], Tensor):
                    v = args[i].item()
                    args[i] = float(v) if args[i].dtype.kind == "f" else int(v)
            return fn(*args)
        if _names_type(fn):
            # ``type(n) is int`` cannot see through a stand-in: keyed by value instead.
            raise NeedsValue("type() may be asked of it")
        needs: list = []
        for i in positions:
            kind = SymbolicFloat if args[i].dtype.kind == "f" else SymbolicInt
            args[i] = kind(args[i], needs)
        try:
            out = fn(*args)
        except NeedsValue:
            raise
        except EagerOnlyError:
            if not needs:  # not the arguments' doing (a number read with .item())
                raise
            raise NeedsValue(needs[0]) from None
        except Exception as e:
            # Also an error the symbolic value caused without asking for its value (a
            # library check that wants an int): the trace keyed by value says which.
            raise NeedsValue(needs[0] if needs else f"{type(e).__name__}: {e}") from None
        if needs:
            raise NeedsValue(needs[0])
        if _escaped(out, ctx):
            raise NeedsValue("kept outside the graph")
        return out

    functools.update_wrapper(call, fn, updated=())
    return call


def _names_type(fn: Any) -> bool:
    """Whether the code of ``fn`` (and the code nested in it) names the builtin ``type``."""
    f = function_of(fn)
    if f is None:
        return False
    stack = [f.__code__]
    while stack:
        c = stack.pop()
        if "type" in c.co_names:
            return True
        stack.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
    return False


def _escaped(out: Any, ctx: Any) -> bool:
    """Whether a `SymbolicInt` is returned, an op's attribute, set on an object the trace
    watches, or appended to a list from outside."""
    if _holds(out, 0):
        return True
    for node in ctx.nodes:
        if any(_holds(v, 0) for v in node.attrs.values()):
            return True
    for obj, _ in ctx.attrs_before.values():
        if any(_holds(v, 0) for v in vars(obj).values()):
            return True
    # Appended to a list from outside (``history.append(epoch)``): keyed by value, the
    # compiled call appends that value again.
    return any(_holds(v[len(items):], 0) for v, items, *_ in ctx.items_before.values())


def _holds(v: Any, depth: int, read: bool = False) -> bool:
    """Whether ``v`` is or holds (nested up to 3 deep) an argument's stand-in, or with
    ``read`` a number read with .item() (which the call hands out, `read_number`)."""
    if isinstance(v, SymbolicInt) and isinstance(v, _Read) == read:
        return True
    if depth < 3 and isinstance(v, (tuple, list)):
        return any(_holds(e, depth + 1, read) for e in v)
    if depth < 3 and isinstance(v, dict):
        return any(_holds(e, depth + 1, read) for e in v.values())
    return False


# Numbers read from traced values (``loss.item()``)


class _Read:
    """A number the program read from a traced value (`read_number`): a 0-d graph value
    like an argument's stand-in, but a graph output when it leaves the call. Where Python
    branches on it or converts it (a comparison, ``bool()``, ``max``/``min``, ``int()``,
    ``float()``, ``round()``, ``math.floor``), the trace computes its value from the
    call's inputs and goes on with what the program took from it, which guards the entry
    (`speculate`). Other uses of the value itself run the signature eagerly
    (`EagerOnlyError` naming the line), as ``torch.compile`` breaks its graph there."""

    __slots__ = ()

    def _known(self, fn: Callable, what: str, reads: tuple = (), value: bool = False) -> Any:
        """``fn`` of the values of this read (and ``reads``), computed from the call's
        inputs and guarded (``value``: the number itself, not an outcome); eager for the
        call when they cannot be computed."""
        done, result = speculate(self._t._ctx, (self, *reads), fn, what, value)
        return result if done else self._need(what)

    def _value(self, fn: Callable, what: str) -> Any:
        return self._known(fn, what, value=True)

    def _compared(self, op: Callable, other: Any, spelling: str) -> Any:
        if isinstance(other, _Read):
            return self._known(op, f"{spelling} (of two numbers read)", (other,))
        if isinstance(other, SymbolicInt):
            return other._need("a comparison")  # an argument's stand-in: keyed by value
        if isinstance(other, (int, float, np.integer, np.floating)):
            return self._known(lambda v: op(v, other), f"{spelling} {other!r}")
        return NotImplemented

    def __lt__(self, o): return self._compared(operator.lt, o, "<")  # noqa: E704
    def __le__(self, o): return self._compared(operator.le, o, "<=")  # noqa: E704
    def __gt__(self, o): return self._compared(operator.gt, o, ">")  # noqa: E704
    def __ge__(self, o): return self._compared(operator.ge, o, ">=")  # noqa: E704
    def __eq__(self, o): return self._compared(operator.eq, o, "==")  # noqa: E704
    def __ne__(self, o): return self._compared(operator.ne, o, "!=")  # noqa: E704
    def __hash__(self): return self._need("hashed")  # noqa: E704
    def __bool__(self): return self._known(bool, "its truth value")  # noqa: E704
    def __float__(self): return self._value(float, "float()")  # noqa: E704
    def __int__(self): return self._value(int, "int()")  # noqa: E704
    def __index__(self): return self._value(operator.index, "an index or a size")  # noqa: E704
    def __trunc__(self): return self._value(math.trunc, "math.trunc()")  # noqa: E704
    def __floor__(self): return self._value(math.floor, "math.floor()")  # noqa: E704
    def __ceil__(self): return self._value(math.ceil, "math.ceil()")  # noqa: E704

    def __round__(self, ndigits: Any = None) -> Any:
        return self._value(lambda v: round(v, ndigits), "round()")

    def _need(self, reason: str) -> Any:
        loc = user_location(2)
        code = source_line(loc)
        e = EagerOnlyError(
            f"{loc + ': ' if loc else ''}a number read from a traced value with .item() "
            f"is used where Python needs its value ({reason}), which a static graph cannot "
            "capture."
            f"{chr(10) + '    ' + code + chr(10) if code else ' '}Compute with tensors "
            "instead (dg.clamp(n, min=1) for max(1, n.item()), dg.where for a branch), "
            "or return the tensor and read the number outside the compiled function.")
        self._needs.append(e)
        raise e


class ReadInt(_Read, SymbolicInt):
    """``.item()`` of a traced integer tensor: a Python ``int``, in int64 in the graph.
    With a Python float (or a float read) it gives a `ReadFloat`, as Python converts the
    int."""

    __slots__ = ()
    read_kind = int

    def _bin(self, other: Any, fn: Callable, name: str, reflected: bool = False) -> Any:
        if type(other) is float or isinstance(other, (np.floating, SymbolicFloat)):
            return ReadFloat(self._t.to(np.float64), self._needs)._bin(
                other, fn, name, reflected)
        return super()._bin(other, fn, name, reflected)


class ReadFloat(_Read, SymbolicFloat):
    """``.item()`` of a traced floating-point tensor: a Python ``float``, in float64 in
    the graph (the tensor's value exactly, as Python's float of it)."""

    __slots__ = ()
    read_kind = float


def read_number(t: Tracer, what: str) -> Any:
    """``t.item()`` while a compiled call traces ``t``: a `ReadFloat` or `ReadInt` standing
    for the number, its value ``t`` detached, as a 0-d float64 or int64 graph value. Bool
    and complex tensors (and uint64, beyond int64) raise `EagerOnlyError`, so the call runs
    eagerly. (A trace outside a compiled call, ``dg.trace``, raises in
    `TraceContext.read_number` and never gets here.)"""
    ctx = t._ctx
    if t.node.shape and int(np.prod(t.node.shape)) != 1:
        raise ValueError(f"{what}: only one-element tensors can be converted to Python "
                         f"scalars, got shape {tuple(t.node.shape)}")
    kind = t.dtype.kind
    if kind not in "fiu" or t.dtype == np.uint64:
        raise trace_error(what, eager_only=True)
    from ..ops.shape import stop_gradient

    v = stop_gradient(t)
    if v.node.shape:
        v = v.reshape(())
    if kind == "f":
        return ReadFloat(v.to(np.float64), ctx.read_needs)
    return ReadInt(v.to(np.int64), ctx.read_needs)


def check_reads(ctx: Any) -> None:
    """After a trace: raise what the program needed of a number it read (an error it may
    have caught), or that it passed one to an op as a setting, which a graph bakes."""
    if ctx.read_needs:
        raise ctx.read_needs[0]
    for node in ctx.nodes:
        if any(_holds(v, 0, read=True) for v in node.attrs.values()):
            raise EagerOnlyError(
                f"a number read from a traced value (.item()) is a setting of {node.op} "
                f"({node.loc or 'the function'}), which a compiled graph fixes. Pass the "
                "tensor itself instead.")
