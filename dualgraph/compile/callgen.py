"""The call path of one compiled signature, generated as Python source, as its kernel is.

For each `plan.Plan` (and the kernels it has now), `generate` writes two small functions:

- ``fast(args)``: the whole compiled call for a plain positional call. It checks the
  arguments' signature key and all the entry's guards, each as one tuple comparison,
  gathers the argument and captured arrays, calls the kernel, writes back what the call
  changed, wraps the outputs and records the tape node. Anything unexpected (another
  signature, a guard that fails, a guard that raises) returns `MISS`, and the caller
  takes the general path (`CompiledFunction.__call__`), which finds the right entry, says
  why it retraces, or raises as eager mode would.
- ``run(args)``: the same call without the checks, for the general path once it has
  chosen this entry (and for ``verify=True``).

No dicts, lists or dispatch on kinds per call: every decision the plan makes is made
here, once. ``dg.explain`` prints the source (`CallPath.source`).
"""

from __future__ import annotations

import math
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..dtypes import DEFAULT_FLOAT
from ..eager import grad_mode
from ..eager.compiled_node import (
    attach_backward,
    attach_gradients,
    handing_node_type,
    inline_node_type,
)
from ..eager.internal import (
    FIELDS,
    array_of,
    make_tensor,
    requires_grad_of,
    set_grad,
    tape_node,
)
from ..eager.tensor import Tensor
from ..ir.graph import next_uid, zero_d_operands
from ..nn.changes import CHANGES
from ..ops.complex import ComplexTensor
from ..ops.precision import AUTOCAST
from .baked import CHECK_EVERY, check_baked
from .guards import MISSING, Value, module_counted, value_key
from .plan import (
    COMPLEX_SLOT,
    SLOT,
    Argument,
    ArgumentGrad,
    AttrTensor,
    CapturedGrad,
    CapturedTensor,
    From,
    Kind,
    Plan,
    RuntimeScalar,
)
from .random_state import refresh_key
from .signature import const_key, overlapping


class _Miss:
    __slots__ = ()

    def __repr__(self) -> str:
        return "MISS"


# What ``fast`` returns when this entry does not serve the call.
MISS = _Miss()


@dataclass(slots=True, eq=False)
class CallPath:
    """The generated call path of a plan, for the kernels it was generated with."""

    source: str
    fast: Callable[[tuple], Any]
    run: Callable[[tuple], Any]
    kernel: Any
    bwd_kernel: Any
    # The call path of each other way of calling this signature (`CallForm`), by its
    # ``(given, keywords)``: ``(fast, source)``, generated when first used.
    forms: dict = field(default_factory=dict)


@dataclass(frozen=True, slots=True, eq=False)
class CallForm:
    """How a call other than a plain positional one becomes the flat arguments the entry
    was traced with.

    ``given`` positional arguments and the keyword names ``keywords`` were passed;
    ``binding`` (None: the positional arguments as they are) gives each bound argument
    as ``(POSITIONAL, i)``, ``(KEYWORD, name)`` or ``(DEFAULT, value)``; ``ordered``:
    the keywords must come in this order (the function takes ``**kwargs``); ``lifted``:
    bound positions whose Python number becomes a 0-d ``dtype`` tensor (``dynamic=``);
    ``templates``: per bound argument the container template with `SLOT` for each
    tensor (None: not flattened).
    """

    given: int
    keywords: tuple
    binding: tuple | None
    ordered: bool
    lifted: tuple
    dtype: Any
    templates: tuple | None


POSITIONAL, KEYWORD, DEFAULT = "positional", "keyword", "default"
# The dtype `CallForm.dtype` gives a float argument made a graph input automatically: a
# float64 input taking a float (or NumPy float64) only, where ``dynamic=`` takes ints too.
FLOAT_ARGUMENT = "float argument"


def _lift_number(gen: Any, name: str, dt: Any) -> list[str]:
    """The lines turning the Python number ``name`` into its 0-d ``dt`` tensor (MISS for
    another type)."""
    if dt is FLOAT_ARGUMENT:
        test = f"type({name}) is not float and type({name}) is not {gen.const(np.float64, 'f64')}"
        dt = np.dtype(np.float64)
    elif np.dtype(dt).kind == "i":
        test = f"type({name}) is not int"
    else:
        test = f"type({name}) is not float and type({name}) is not int"
    return [f"if {test}:", "    return MISS",
            f"{name} = make_tensor(new_array({name}, {gen.const(dt, 'dtype')}), False, None)"]


# Names every generated call may use.
_BUILTINS = {
    "MISS": MISS, "MISSING": MISSING, "GRAD": grad_mode.GRAD_ENABLED,
    "DEFAULT_FLOAT": DEFAULT_FLOAT, "AUTOCAST": AUTOCAST, "array_of": array_of,
    "requires_grad_of": requires_grad_of,
    "make_tensor": make_tensor, "set_grad": set_grad, "refresh_key": refresh_key,
    "attach_gradients": attach_gradients, "attach_backward": attach_backward,
    "const_key": const_key, "overlapping": overlapping, "value_key": value_key,
    "new_array": np.array, "tape_node": tape_node,
    "Tensor": Tensor, "new_tensor": Tensor.__new__,
}
_PLAIN_CONSTANTS = (bool, int, str, type(None))
# A tensor's fields, read inline (`internal.FIELDS`): ``f"{t}{DATA}"`` is its array.
DATA, RG, VERSION, NODE, GRAD_FIELD = (
    f".{FIELDS[k]}" for k in ("array", "requires_grad", "version", "node", "grad"))


class _Emitter:
    """Names for the constants the generated source refers to (`guards.Emitter`)."""

    def __init__(self, plan: Plan) -> None:
        self.ns: dict[str, Any] = dict(_BUILTINS)
        # The tape node type whose written-out hand-out the call path records, if any.
        self.node_type: type | None = None
        self._names: dict[int, str] = {}
        self._captured: dict[tuple, str] = {}
        for j, src in enumerate(plan.sources):
            if isinstance(src, CapturedTensor):
                self._captured[(id(src.tensor), False)] = f"c{j}"
            elif isinstance(src, CapturedGrad):
                self._captured[(id(src.owner), True)] = f"c{j}"

    def const(self, value: Any, hint: str = "k") -> str:
        name = self._names.get(id(value))
        if name is None:
            name = self._names[id(value)] = f"{hint.upper()}{len(self._names)}"
            self.ns[name] = value
        return name

    def arg(self, position: int) -> str:
        return f"a{position}"

    def captured_array(self, t: Any, grad: bool = False) -> str | None:
        return self._captured.get((id(t), grad))


def generate(plan: Plan, sig: tuple, fn: Callable, stats: Any, verify: bool,
             keep: dict, check_stale: Callable | None = None,
             warned: set | None = None, form: CallForm | None = None) -> CallPath:
    """The call path of ``plan`` for calls of signature ``sig`` (``(argument keys, grad
    mode, layout, alias)``) with flat arguments: ``fn`` is the function taking them
    (for ``verify``'s checks, `stale.check_stale`), ``stats`` the function's
    `CompileStats`, ``keep`` its table of unhashable constant arguments, ``warned`` the
    captured arrays it has warned about (`baked.check_baked`). With ``form``, ``fast``
    takes the call as it comes (``fast(args)``, or ``fast(args, kwargs)`` when keywords
    were passed) and turns it into the flat arguments itself."""
    gen = _Emitter(plan)
    keys, grad_on, _, alias = sig
    n = len(keys)
    arrays = [i for i, k in enumerate(keys) if not _is_constant(k)]
    unpack = [f"{', '.join(f'a{i}' for i in range(n))}{',' if n == 1 else ''} = args"] \
        if n else []
    gather_args = [f"d{i} = a{i}{DATA}" if len(keys[i]) == 3 else f"d{i} = a{i}"
                   for i in arrays]
    versioned = _versioned(plan)
    gathered, later = _gather_captured(plan, gen, versioned)
    # Every array argument 0-d: the arrays the last call checked are one cache entry, and
    # the alias check runs only when it misses (`_body`).
    paired = (alias is None and len(arrays) >= 2
              and set(range(len(arrays))) <= set(plan.scalar_in))
    body = _body(plan, gen, keys, arrays, {i for i in arrays if len(keys[i]) == 3},
                 _alias_check(arrays, alias, gen) if paired else None)
    verified: set = set()
    if form is None:
        # A wrong count fails the unpacking: no call to count them.
        head, enter = ["def fast(args):"], (
            ["try:", *_indent(unpack), "except ValueError:", "    return MISS"] if n else
            ["if args:", "    return MISS"])
    else:
        head, enter = _enter(form, n, gen, keep, verified)
    # The key and the guards are one tuple comparison (the captured arrays the guards
    # read are gathered first).
    key, key_expected = _key_items(keys, grad_on, verified, plan.rg_free)
    guards, guards_expected = _guard_items(plan, gen, versioned)
    checks = (gather_args + gathered
              + _compare(key + guards, gen.const(tuple(key_expected + guards_expected), "key"))
              + ([] if paired else _alias_check(arrays, alias, gen))
              + _module_check(plan, gen) + _versioned_check(plan, gen, versioned))
    fast = [*enter, *_type_checks(keys, gen),
            "try:", *_indent(checks),
            "except Exception:  # a guard that cannot be read: the general path says why",
            "    return MISS",
            "stats.fast_calls += 1"]
    if verify and check_stale is not None:
        gen.ns["check_stale"], gen.ns["FN"], gen.ns["PLAN"] = check_stale, fn, plan
        fast += ["PLAN.calls += 1", "if PLAN.calls & (PLAN.calls - 1) == 0:",
                 "    check_stale(FN, PLAN, args)"]
    baked = _baked_check(plan, gen, fn, warned)
    # ``fast`` checked the grad mode with the key: its branch is known. ``run`` also serves
    # the general path's checks, which may run it in another mode (`stale.check_stale`).
    fast += baked + later + _grad_resolved(body, bool(grad_on[0]), checked=True)
    run = [*unpack, *gather_args, *gathered, *baked, *later,
           *(_scalar(j, plan, gen) for j in versioned.scalars),
           *_grad_resolved(body, None)]
    gen.ns["stats"] = stats
    gen.ns["KEEP"] = keep
    source = "\n".join([*head, *_indent(fast), "", "",
                        "def run(args):", *_indent(run), ""])
    shown = getattr(gen.node_type, "hand_out_source", None)
    if shown is not None:  # for `dg.explain`: what a plain ``backward()`` then runs
        source += "\n\n# backward() on the result: its tape node's hand-out\n" + "".join(
            f"# {line}\n" for line in shown.splitlines())
    name = getattr(fn, "__name__", "fn")
    code = compile(source, f"<dg.compile call path of {name}>", "exec")
    exec(code, gen.ns)  # noqa: S102 - our own generated source, built from the plan
    return CallPath(source, gen.ns["fast"], gen.ns["run"], plan.kernel, plan.bwd_kernel)


def _enter(form: CallForm, n: int, gen: _Emitter, keep: dict,
           verified: set) -> tuple[list[str], list[str]]:
    """``(def line, lines)`` that turn a call of ``form`` into the flat arguments
    ``a0, ...`` (and ``args``, their tuple), or return `MISS` when it is another form:
    bind keywords and defaults, lift ``dynamic=`` numbers, take tensors out of
    containers. Constant arguments whose value the lines check go into ``verified``."""
    kw = bool(form.keywords)
    head = ["def fast(args, kwargs):" if kw else "def fast(args):"]
    counted = f" or len(kwargs) != {len(form.keywords)}" if kw else ""
    lines = [f"if len(args) != {form.given}{counted}:", "    return MISS"]
    if form.ordered:
        lines += [f"if tuple(kwargs) != {gen.const(form.keywords, 'names')}:", "    return MISS"]
    binding = form.binding
    if binding is None:
        binding = tuple((POSITIONAL, i) for i in range(form.given))
    inner = []  # inside try: a missing keyword or a short container is a KeyError or IndexError
    for j, (kind, what) in enumerate(binding):
        if kind == POSITIONAL:
            inner.append(f"b{j} = args[{what}]")
        elif kind == KEYWORD:
            inner.append(f"b{j} = kwargs[{gen.const(what, 'name')}]")
        else:
            inner.append(f"b{j} = {gen.const(what, 'default')}")
    if form.lifted:
        # One dtype for them all, or one each: an int made an input takes int64 (and
        # only an int).
        dtypes = form.dtype if isinstance(form.dtype, tuple) else (form.dtype,) * len(
            form.lifted)
        for j, dt in zip(form.lifted, dtypes):
            inner += _lift_number(gen, f"b{j}", dt)
    leaves: list[str] = []
    templates = form.templates or (None,) * len(binding)
    for j, t in enumerate(templates):
        if t is not None:
            _unpack(t, f"b{j}", leaves, inner, gen, keep)
            inner.append(f"b{j} = {gen.const(t, 'template')}")
            verified.add(j)
    names = [f"b{j}" for j in range(len(binding))] + leaves
    if len(names) != n:  # pragma: no cover - the form is built from the call that traced
        raise AssertionError("call form and signature disagree")
    inner.append(f"args = ({', '.join(names)}{',' if n == 1 else ''})")
    if n:
        inner.append(f"{', '.join(f'a{i}' for i in range(n))}{',' if n == 1 else ''} = args")
    return head, lines + ["try:", *_indent(inner), "except (KeyError, IndexError):",
                          "    return MISS"]


def has_slot(t: Any) -> bool:
    """Whether a container template holds a tensor (`SLOT`, `COMPLEX_SLOT`)."""
    if t is SLOT or t is COMPLEX_SLOT:
        return True
    if isinstance(t, (tuple, list)):
        return any(has_slot(e) for e in t)
    if isinstance(t, dict):
        return any(has_slot(e) for e in t.values())
    return False


def _unpack(t: Any, expr: str, leaves: list, lines: list, gen: _Emitter, keep: dict) -> None:
    """Lines that check that ``expr`` has template ``t``'s structure and constants, and
    bind each tensor in it to a new leaf name (appended to ``leaves``, in the order
    the general path flattens them)."""
    if t is SLOT:
        leaves.append(f"l{len(leaves)}")
        lines.append(f"{leaves[-1]} = {expr}")
        return
    if t is COMPLEX_SLOT:
        v = f"v{len(lines)}"
        leaves.append(f"l{len(leaves)}")
        lines += [f"{v} = {expr}",
                  f"if type({v}) is not {gen.const(ComplexTensor, 'type')}:", "    return MISS",
                  f"{leaves[-1]} = {v}._storage()"]
        return
    if not has_slot(t):
        lines += [f"if const_key({expr}, 0, KEEP) != {gen.const(const_key(t, 0, keep), 'key')}:",
                  "    return MISS"]
        return
    v = f"v{len(lines)}"
    lines += [f"{v} = {expr}",
              f"if type({v}) is not {gen.const(type(t), 'type')} or len({v}) != {len(t)}:",
              "    return MISS"]
    if isinstance(t, dict):
        lines += [f"if tuple({v}) != {gen.const(tuple(t), 'names')}:", "    return MISS"]
        for k, e in t.items():
            _unpack(e, f"{v}[{gen.const(k, 'name')}]", leaves, lines, gen, keep)
    else:
        for k, e in enumerate(t):
            _unpack(e, f"{v}[{k}]", leaves, lines, gen, keep)


def _baked_check(plan: Plan, gen: _Emitter, fn: Callable, warned: set | None) -> list[str]:
    """Compare the captured NumPy arrays with their trace-time copies on every
    `baked.CHECK_EVERY`-th call: the others pay one counter test."""
    if not plan.baked:
        return []
    gen.ns["check_baked"], gen.ns["ENTRY"] = check_baked, plan
    baked = gen.const(plan.baked, "baked")
    seen = gen.const(set() if warned is None else warned, "warned")
    name = gen.const(getattr(fn, "__name__", None) or f"the compiled {type(fn).__name__}",
                     "name")
    return ["nb = ENTRY.baked_calls = ENTRY.baked_calls + 1",
            f"if not nb & {CHECK_EVERY - 1}:",
            f"    check_baked({baked}, {seen}, {name})"]


def _indent(lines: list[str]) -> list[str]:
    return ["    " + line for line in lines]


def _is_constant(k: tuple) -> bool:
    """A constant argument's key is ``(type, value)``; an array's ``(shape, dtype)`` and a
    tensor's ``(shape, dtype, requires_grad)``."""
    return len(k) == 2 and isinstance(k[0], type)


def _type_checks(keys: tuple, gen: _Emitter) -> list[str]:
    """Each tensor or array argument is one (as the general path's key sees it: any
    tensor class), each plain constant of its exact type (``True`` is not ``1``)."""
    conds = []
    for i, k in enumerate(keys):
        if _is_constant(k):
            if k[0] in _PLAIN_CONSTANTS or k[0] is float:
                conds.append(f"type(a{i}) is not {gen.const(k[0], 'type')}")
        else:
            # The exact class is read without a call; a subclass takes isinstance.
            cls = 'Tensor' if len(k) == 3 else 'ndarray'
            conds.append(f"(a{i}.__class__ is not {cls} and not isinstance(a{i}, {cls}))")
            gen.ns["Tensor"], gen.ns["ndarray"] = Tensor, np.ndarray
    if not conds:
        return []
    return [f"if {' or '.join(conds)}:", "    return MISS"]


def _key_items(keys: tuple, grad_on: bool, verified: set = frozenset(),
               rg_free: frozenset = frozenset()) -> tuple[list[str], list]:
    """The signature key as items of the call's comparison, ``(expressions, expected
    values)``: shapes, dtypes, ``requires_grad`` (but where the entry does not depend on
    it, ``rg_free``), constants (but those in ``verified``: already checked), grad mode."""
    exprs, expected = [], []
    for i, k in enumerate(keys):
        if i in verified:
            continue
        if not _is_constant(k):
            exprs += [f"d{i}.shape", f"d{i}.dtype"]
            expected += [k[0], k[1]]
            if len(k) == 3 and i not in rg_free:
                exprs.append(f"a{i}{RG}")
                expected.append(k[2])
        elif k[0] in _PLAIN_CONSTANTS:
            exprs.append(f"a{i}")  # its exact type was checked
            expected.append(k[1])
        elif k[0] is float:
            exprs.append(f"a{i}.hex()")  # by its bits, as `signature.const_key`
            expected.append(k[1])
        else:
            exprs.append(f"const_key(a{i}, {i}, KEEP)")
            expected.append(k)
    exprs += ["GRAD.value", "DEFAULT_FLOAT[0]", "AUTOCAST.value"]  # and the autocast format
    expected += list(grad_on)
    return exprs, expected


def _alias_check(arrays: list, alias: tuple | None, gen: _Emitter) -> list[str]:
    """Which array arguments share memory is part of the key (`signature.overlapping`):
    arrays with different base arrays cannot, so the usual call reads one ``.base`` each."""
    if len(arrays) < 2:
        return []
    ds = ", ".join(f"d{i}" for i in arrays)
    if alias is not None:
        return [f"if overlapping([{ds}]) != {gen.const(alias, 'alias')}:", "    return MISS"]
    lines = []
    for i in arrays:
        lines += [f"b{i} = d{i}.base", f"if b{i} is None:", f"    b{i} = d{i}"]
    if len(arrays) <= 4:  # a few identity tests are cheaper than a set of ids
        same = " or ".join(f"b{i} is b{j}" for k, i in enumerate(arrays)
                           for j in arrays[k + 1:])
    else:
        same = f"len({{{', '.join(f'id(b{i})' for i in arrays)}}}) != {len(arrays)}"
    return lines + [f"if ({same}) and overlapping([{ds}]) is not None:", "    return MISS"]


@dataclass(slots=True)
class _Versioned:
    """The guards (positions in ``plan.guards.items``) and hyperparameter inputs (source
    positions) whose values can change only with a write to an optimizer's parameter
    groups, and those groups' change counters (`optim.optimizer.change_counters`)."""

    guards: list = field(default_factory=list)
    scalars: list = field(default_factory=list)
    counters: list = field(default_factory=list)


def _versioned(plan: Plan) -> _Versioned:
    from ..optim.optimizer import change_counters

    out = _Versioned()

    def counted(keep: Any) -> bool:
        vers = change_counters(keep)
        if vers is None:
            return False
        out.counters += [v for v in vers if all(v is not c for c in out.counters)]
        return True

    if plan.guards is not None:
        out.guards = [k for k, g in enumerate(plan.guards.items)
                      if isinstance(g, Value) and counted(g.keep)]
    out.scalars = [j for j, src in enumerate(plan.sources)
                   if isinstance(src, RuntimeScalar) and counted(src.keep)]
    return out


def _scalar(j: int, plan: Plan, gen: _Emitter) -> str:
    """The line making runtime scalar ``j``'s array as the kernel takes a 0-d value."""
    src = plan.sources[j]
    value = f"{gen.const(src.get, 'get')}()"
    if not zero_d_operands(plan.optimized):
        value = f"({value},)"
    return f"c{j} = new_array({value}, {gen.const(src.dtype, 'dtype')})"


def _versioned_check(plan: Plan, gen: _Emitter, versioned: _Versioned) -> list[str]:
    """The guards and hyperparameters of `_Versioned`: checked and read only when a change
    counter moved since the last call that checked them; otherwise the arrays read then
    (never written: kernel inputs) serve again. Counters are read before the values, so a
    write racing with the reads leaves a stale key and the next call reads again."""
    if not versioned.counters:
        return []
    vn = ", ".join(f"{gen.const(v, 'counter')}.v" for v in versioned.counters)
    if len(versioned.counters) > 1:
        vn = f"({vn},)"  # one counter is compared as it is: no tuple per call
    cache = gen.const([(None,)], "read")
    names = [f"c{j}" for j in versioned.scalars]
    got = ", ".join(names) + ("," if len(names) == 1 else "")
    lines = [f"vn = {vn}", f"vs = {cache}[0]", "if vs[0] != vn:"]
    inner = []
    if versioned.guards:
        items = [plan.guards.items[k] for k in versioned.guards]
        emitted = [g.emit(gen) for g in items]
        inner += _compare([e for e, _ in emitted], gen.const(tuple(v for _, v in emitted),
                                                             "guards"))
    inner += [_scalar(j, plan, gen) for j in versioned.scalars]
    inner.append(f"{cache}[0] = (vn, {got})" if names else f"{cache}[0] = (vn,)")
    lines += _indent(inner)
    if names:
        # Each by its index: no slice per call.
        lines += ["else:", *(f"    {c} = vs[{i}]" for i, c in enumerate(names, 1))]
    return lines


def _gather_captured(plan: Plan, gen: _Emitter,
                     versioned: _Versioned) -> tuple[list[str], list[str]]:
    """The captured kernel inputs: ``(read before the guards, read after them)``. Tensors
    and gradients are read first (the guards check their arrays); hyperparameters (the
    user's getters) and the random key (a draw advances the generator) only for a call
    this entry serves; those of `_Versioned` by `_versioned_check`."""
    before, after = [], []
    for j, src in enumerate(plan.sources):
        if j in versioned.scalars:
            continue
        if j == plan.key_source and plan.random:
            after.append(f"c{j} = refresh_key()")
        elif isinstance(src, CapturedTensor):
            before.append(f"c{j} = {gen.const(src.tensor, 't')}{DATA}")
        elif isinstance(src, AttrTensor):
            before.append(f"c{j} = {gen.const(src.table, 'table')}"
                          f"[{gen.const(src.name, 'name')}]{DATA}")
        elif isinstance(src, CapturedGrad):
            before.append(f"c{j} = {gen.const(src.owner, 't')}.grad{DATA}")
        elif isinstance(src, ArgumentGrad):
            before.append(f"c{j} = a{src.position}.grad{DATA}")
        elif isinstance(src, RuntimeScalar):
            after.append(_scalar(j, plan, gen))
        else:  # pragma: no cover - every source kind is above
            raise TypeError(f"unknown kernel input source {src!r}")
    return before, after


def _guard_items(plan: Plan, gen: _Emitter, versioned: _Versioned) -> tuple[list[str], list]:
    """The guards checked on every call, as items of the call's comparison."""
    exprs: list[str] = []
    expected: list = []
    if plan.guards is None:
        return exprs, expected
    for k, g in enumerate(plan.guards.items):
        if k in versioned.guards or module_counted(g):
            continue
        for e, v in g.emit_parts(gen):
            exprs.append(e)
            expected.append(v)
    return exprs, expected


def _module_check(plan: Plan, gen: _Emitter) -> list[str]:
    """The guards on module state (`guards.module_counted`: submodule, parameter and buffer
    tables, hooks, ``training``), checked only when the modules' change counter moved
    since the last call that checked them. The counter is read before the state, so a
    write racing with the checks leaves a stale value and the next call checks again."""
    if plan.guards is None:
        return []
    items = [g for g in plan.guards.items if module_counted(g)]
    if not items:
        return []
    emitted = [g.emit(gen) for g in items]
    seen = gen.const([None], "seen")
    return [f"mv = {gen.const(CHANGES, 'modules')}.v", f"if {seen}[0] != mv:",
            *_indent(_compare([e for e, _ in emitted],
                              gen.const(tuple(v for _, v in emitted), "guards"))),
            f"    {seen}[0] = mv"]


def _tuple(exprs: Any) -> str:
    """A tuple display of ``exprs``."""
    exprs = list(exprs)
    return f"({', '.join(exprs)}{',' if len(exprs) == 1 else ''})"


def _compare(exprs: list[str], expected: str) -> list[str]:
    """``if (expr, ...) != expected: return MISS``, one expression per line."""
    return ["if (", *[f"    {e}," for e in exprs], f") != {expected}:", "    return MISS"]


def _target(t: Any, gen: _Emitter) -> str:
    return f"a{t.position}" if isinstance(t, Argument) else gen.const(t, "t")


# An output this large is the array the same call site returned last time when nothing
# else refers to it any more (the step before dropped its gradient): a new one comes from
# the operating system (glibc maps arrays over 32 MB), and the kernel's first touch of
# each page faults and zeroes it, on one thread or two (W3's 40 MB gradient: 4 ms of a
# 15 ms step on one thread, and the faults barely run faster on two).
RECYCLE = True
RECYCLE_BYTES = 1 << 22


def _alone() -> int:
    """What ``sys.getrefcount`` says of an array only a local name refers to (the
    interpreter decides whether its argument counts)."""
    kept = [np.empty(1)]
    a = kept.pop()
    return sys.getrefcount(a)


_ALONE = _alone()


def _alone_kept() -> int:
    """What ``sys.getrefcount`` says of an array that a one-element list and a local name
    refer to, and nothing else (a kept one-element output, `_output_lines`)."""
    kept = [np.empty(())]
    a = kept[0]
    return sys.getrefcount(a)


_KEPT_ALONE = _alone_kept()


def _output_lines(k: int, shape: tuple, dtype: Any, gen: _Emitter) -> list[str]:
    """The lines making the kernel's output array ``o{k}``. A large one comes from a
    `recycler`. A one-element one (a scalar loss, a scalar's gradient) is the array the
    last call made, kept in a one-element list, when nothing else refers to it any more
    (the tensors holding it were dropped): `recycler` written out, no call, since making
    a 0-d array is a large part of a scalar step. Two threads reading the kept array at
    once each see the other's name and make a new one."""
    new = f"empty({gen.const(shape, 'shape')}, {gen.const(dtype, 'dtype')})"
    if RECYCLE and math.prod(shape) * np.dtype(dtype).itemsize >= RECYCLE_BYTES:
        return [f"o{k} = {gen.const(recycler(shape, dtype), 'recycled')}()"]
    if not RECYCLE or math.prod(shape) != 1:
        return [f"o{k} = {new}"]
    gen.ns["getrefcount"], gen.ns["KEPT_ALONE"] = sys.getrefcount, _KEPT_ALONE
    kept = gen.const([np.empty(shape, dtype)], "kept")
    return [f"o{k} = {kept}[0]", f"if getrefcount(o{k}) != KEPT_ALONE:",
            f"    o{k} = {new}", f"    {kept}[0] = o{k}"]


def recycler(shape: tuple, dtype: Any) -> Callable[[], np.ndarray]:
    """A function returning an uninitialised array of ``shape`` and ``dtype``: the one it
    returned last time when nothing else refers to it (a view refers to its base, a
    tensor to its array), else a new one."""
    kept: list = []
    getrefcount = sys.getrefcount

    def take() -> np.ndarray:
        a = kept.pop() if kept else None  # atomic: two threads never take the same one
        if a is None or getrefcount(a) != _ALONE:
            a = np.empty(shape, dtype)
        kept.append(a)
        return a
    return take


def _entry(plan: Plan, keys: tuple, arrays: list, gen: _Emitter) -> str | None:
    """The name of a one-element list holding the kernel's compiled entry
    (`Kernel.scalar_entry_point`), when every kernel input is a 0-d array: an argument's
    (its dtype is the key's, its flags checked when it is not the last call's), or a
    runtime scalar's this call path makes; the consts, work arrays and outputs are the
    kernel's own, and the kernel writes none of its inputs. Calling the entry
    skips the dispatcher's typing of every argument (the whole cost of a scalar
    kernel's call beyond unboxing). None otherwise: the dispatcher types each call."""
    take = getattr(plan.kernel, "scalar_entry_point", None)
    if take is None or not ENTRY or set(plan.scalar_in) != set(range(len(arrays) +
                                                                      len(plan.sources))):
        return None
    if not all(isinstance(src, RuntimeScalar) for src in plan.sources):
        return None
    ep = take([keys[i][1] for i in arrays] + [src.dtype for src in plan.sources])
    return None if ep is None else gen.const([ep], "entry")


# Whether generated call paths call a scalar kernel's compiled entry directly (`_entry`).
ENTRY = True


def _body(plan: Plan, gen: _Emitter, keys: tuple, arrays: list,
          tensor_args: set, alias: list[str] | None = None) -> list[str]:
    """Run the kernel, write back, wrap the outputs, record the tape node, return
    (``keys``: the arguments' signature keys; ``tensor_args``: the positions of the
    arguments that are tensors).

    The kernel's inputs are ``i0, ...`` and its outputs ``o0, ...``: named, not lists, so
    a call builds no list and unpacks none."""
    kernel = plan.kernel
    gen.ns["new_outputs"], gen.ns["kernel_run"] = kernel.new_outputs, kernel.run
    ins = [f"d{i}" for i in arrays] + [f"c{j}" for j in range(len(plan.sources))]
    lines = []
    # The kernel's machine code, called without the dispatcher when every input is an
    # array this path made (`_entry`): None, or the cell holding it.
    entry = _entry(plan, keys, arrays, gen)
    zero_d = [k for k in range(len(arrays)) if k in plan.scalar_in]
    # A kernel with larger operands takes a 0-d value as a ``(1,)`` array
    # (`zero_d_operands`): an argument's view, kept with it.
    flat = not zero_d_operands(plan.optimized)
    if zero_d and (alias is not None or entry is not None or flat):
        # The 0-d arguments the last call checked (and their views), as one entry, read
        # and replaced whole (threads see one call's or another's): the same array objects
        # as a call that passed the alias check (or, for ``run``, the general path's key)
        # share memory as they did then (an array's base never changes), and are aligned
        # as they were then (its data pointer never changes either; a writeable flag
        # cleared since, on an array the kernel only reads, changes no answer). A view of
        # the same array object sees its values; its shape was checked with the key.
        n = len(zero_d)
        cache = gen.const([(None,) * (2 * n if flat else n)], "checked")
        same = " and ".join(f"ck[{m}] is {ins[k]}" for m, k in enumerate(zero_d))
        lines.append(f"ck = {cache}[0]")
        if flat:
            lines += [f"if {same}:", *(f"    i{k} = ck[{n + m}]" for m, k in enumerate(zero_d)),
                      "else:"]
        else:
            lines.append(f"if not ({same}):")
        if alias is not None:
            # The call was counted as served: the general path counts it again.
            lines.append(_Checked(_indent(_uncounted(alias))))
        kept = [ins[k] for k in zero_d]
        if flat:
            lines += [f"    i{k} = {ins[k]}.reshape(1)" for k in zero_d]
            kept += [f"i{k}" for k in zero_d]
            for k in zero_d:
                ins[k] = f"i{k}"
        if entry is not None:
            # The entry takes the writeable, aligned arrays it was compiled for; another
            # one turns it off for good.
            flags = " and ".join(f"{ins[k]}.flags.writeable and {ins[k]}.flags.aligned"
                                 for k in zero_d)
            lines += [f"    if not ({flags}):", f"        {entry}[0] = None"]
        lines.append(f"    {cache}[0] = {_tuple(kept)}")
    for j in plan.scalar_in if flat else ():
        if j >= len(arrays) and not isinstance(plan.sources[j - len(arrays)], RuntimeScalar):
            ins[j] += ".reshape(1)"  # a captured 0-d tensor (a runtime scalar's is made so)
    for j, e in enumerate(ins):
        if e != f"i{j}":
            lines.append(f"i{j} = {e}")

    # A Numba kernel's parts, to call it here; other kernels (interpreted) are run.
    direct_call = getattr(kernel, "direct_call", None)
    direct = None if direct_call is None else direct_call()
    # The kernel's outputs: ``o0, ...`` for a kernel called here, else the list it fills.
    oname = (lambda k: f"outs[{k}]") if direct is None else (lambda k: f"o{k}")

    def out(k: int, shape: tuple) -> str:
        # A kernel with larger operands fills a 0-d output with shape (1,)
        # (`zero_d_operands`): its 0-d view is a subscript, not a method call.
        return f"{oname(k)}[0, ...]" if flat and not shape else oname(k)

    in_names = [f"i{j}" for j in range(len(ins))]
    if direct is None:
        lines += ["outs = new_outputs()", f"kernel_run([{', '.join(in_names)}], outs)"]
    else:
        # A one-function kernel is called here, as its `run` would: no call for the
        # outputs' list or for `run` on every call.
        _, consts, outputs, pool = direct
        # The function read from the kernel at each call, as `run` reads it.
        fn = f"{gen.const(kernel, 'kernel')}.fn"
        gen.ns["empty"] = np.empty
        for k, (sh, d) in enumerate(outputs):
            lines += _output_lines(k, sh, d, gen)
        outs = [f"o{k}" for k in range(len(outputs))]
        args = [*in_names, *[gen.const(c, "c") for c in consts], *outs]
        if pool is not None:  # a set of work arrays from the pool, given back after
            args.insert(len(args) - len(outs), "*work")
        call = [f"{fn}({', '.join(args)})"]
        if entry is not None:
            # The dispatcher's function is read each call (a test may replace it): the
            # entry serves only the one it was taken from.
            call = ["ep = " + f"{entry}[0]",
                    f"if ep is not None and {fn} is {gen.const(kernel.fn, 'dispatcher')}:",
                    f"    ep({', '.join(args)})", "else:", *_indent(call)]
        if pool is None:
            lines += call
        else:
            p = gen.const(pool, "pool")
            lines += [f"work = {p}.pop() if {p} else {gen.const(kernel.new_scratch, 'scratch')}()",
                      "try:", *_indent(call), "finally:", f"    {p}.append(work)"]
    # `bump_version` written out: one Python call less per tensor written.
    lines += [f"{_target(t, gen)}{VERSION}[0] += {n}" for t, n in zip(plan.inplace, plan.bumps)]
    for w in plan.copy_writes:
        t = _target(w.target, gen)
        lines += [f"{t}{DATA}[...] = {out(w.out, w.shape)}", f"{t}{VERSION}[0] += {w.bumps}"]
    for w in plan.grad_set:
        # A new gradient tensor as `make_tensor` makes it, written out: no call per
        # gradient a step writes back, and none for all of them.
        lines += [*_new_tensor("g", out(w.out, w.shape), False, "None"),
                  f"{_target(w.target, gen)}{GRAD_FIELD} = g"]
    lines += [f"set_grad({_target(t, gen)}, None)" for t in plan.grad_none]
    results = [f"r{k}" for k in range(plan.n_user)]
    spent = dict(plan.spent)
    # A scalar loss with its gradients, written nowhere before its tape node: the tape
    # node's call makes the loss tensor too (one call for both).
    loss = plan.mode is Kind.TRAIN and plan.joint and plan.n_user == 1 and not plan.attr_set
    made = []
    for k, node in enumerate(plan.optimized.outputs[:plan.n_user]):
        if direct is None:
            history = f"True, {gen.const(spent[k], 'spent')}" if k in spent else "False, None"
            made.append(f"r{k} = make_tensor({out(k, node.shape)}, {history})")
            continue
        # The output is an array this call made (`_new_tensor`).
        fn_ = gen.const(spent[k], "spent") if k in spent else "None"
        made += _new_tensor(f"r{k}", out(k, node.shape), k in spent, fn_)
    if not loss:
        lines += made
    for w in plan.attr_set:
        values = []
        for j, (o, shape, a) in enumerate(w.leaves or ((w.out, w.shape, w.arg),)):
            node = w.spent[j] if w.spent else None
            r = w.result[j] if w.result else None
            history = "False, None" if node is None else f"True, {gen.const(node, 'spent')}"
            values.append(f"a{a}" if o is None else f"r{r}" if r is not None else
                          f"make_tensor({out(o, shape)}, {history})")
        value = values[0] if w.tree is None else \
            f"{gen.const(w.tree, 'tree')}.unflatten([{', '.join(values)}])"
        lines.append(f"{gen.const(w.owner, 'o')}.__dict__[{w.name!r}] = {value}")
    if loss:
        array = out(0, plan.optimized.outputs[0].shape)
        lines.append(_GradBranch(_tape(plan, gen, arrays, tensor_args, oname, out, array,
                                       direct is not None), made))
    elif plan.mode is Kind.TRAIN:
        lines.append(_GradBranch(_tape(plan, gen, arrays, tensor_args, oname, out), []))
    if plan.python_writes is not None:
        # After the tape node: it takes each leaf's node by the flag the call began with
        # (a parameter the call leaves frozen still gets the gradient of its reads before).
        lines.append(f"{gen.const(plan.python_writes, 'python_writes')}()")
    for k, i in plan.passthrough:
        lines.append(f"r{k} = a{i}")
    for k, t in plan.captured_out:
        lines.append(f"r{k} = {gen.const(t, 't')}")
    for k, t in plan.grads_returned:
        lines.append(f"r{k} = {gen.const(t, 't')}.grad")
    for k, j in plan.repeated:
        lines.append(f"r{k} = r{j}")
    if plan.single is True:
        lines.append("return r0")
    elif plan.single is False:
        lines.append(f"return ({', '.join(results)}{',' if len(results) == 1 else ''})")
    else:
        tree = gen.const(plan.single, "tree")
        lines.append(f"return {tree}.unflatten([{', '.join(results)}])")
    return lines


@dataclass(frozen=True, slots=True)
class _GradBranch:
    """Lines of `_body` that depend on grad mode: ``on`` when it records, else ``off``."""

    on: list
    off: list


def _uncounted(lines: list[str]) -> list[str]:
    """Check lines that run once ``fast`` has counted its call as served: each ``return
    MISS`` takes the count back first (the general path counts the call)."""
    out = []
    for line in lines:
        if line.strip() == "return MISS":
            out.append(line.replace("return MISS", "stats.fast_calls -= 1"))
        out.append(line)
    return out


@dataclass(frozen=True, slots=True)
class _Checked:
    """Lines of `_body` that only ``fast`` runs: checks the general path has made before it
    calls ``run``."""

    lines: list


def _grad_resolved(lines: list, grad: bool | None, checked: bool = False) -> list[str]:
    """``lines`` with each `_GradBranch` as the lines for grad mode ``grad``, or (None: not
    known when the call runs) as an ``if`` on the thread's grad mode; each `_Checked` as
    its lines when ``checked`` (``fast``), else as none."""
    out: list[str] = []
    for line in lines:
        if isinstance(line, _Checked):
            out += line.lines if checked else []
        elif not isinstance(line, _GradBranch):
            out.append(line)
        elif grad is not None:
            out += line.on if grad else line.off
        else:
            out += ["if GRAD.value:", *_indent(line.on)]
            if line.off:
                out += ["else:", *_indent(line.off)]
    return out


def _new_tensor(name: str, array: str, rg: bool, grad_fn: str) -> list[str]:
    """Lines binding ``name`` to a new tensor as `make_tensor` makes it from the array
    ``array`` (never a NumPy scalar), written out: no call per tensor a call makes."""
    return [f"{name} = new_tensor(Tensor)", f"{name}{DATA} = {array}", f"{name}{RG} = {rg}",
            f"{name}{GRAD_FIELD} = None", f"{name}.grad_fn = {grad_fn}",
            f"{name}{VERSION} = [0]", f"{name}{NODE} = None"]


def _loss_node(gen: _Emitter, inputs: str, grads: str, array: str, checks: str,
               node: Any, n: int, m: int) -> list[str]:
    """`attach_gradients` written out for a loss array this call made (IR output
    ``node``) and fresh gradients of ``n`` inputs, ``m`` versions checked: the loss tensor
    ``r0`` and its tape node (`inline_node_type`, whose class holds the fields every step's
    node has alike), field by field (no call: a scalar step is a few microseconds)."""
    gen.node_type = inline_node_type(n, m, node.shape, node.dtype)
    gen.ns["new_node"], gen.ns["next_uid"] = object.__new__, next_uid
    return [
        "r0 = new_tensor(Tensor)", f"r0{DATA} = {array}", f"r0{GRAD_FIELD} = None",
        f"r0{VERSION} = [0]", f"r0{NODE} = None",
        f"nd = new_node({gen.const(gen.node_type, 'node')})", f"nd.inputs = {inputs}",
        "nd.uid = next_uid()", f"nd._saved = {grads}", "nd._out = None", "nd._freed = False",
        "nd._hooks = None", "nd._retain = None", f"nd._checks = {checks}",
        "nd._handed = False", f"r0{RG} = True", "r0.grad_fn = nd"]


def _tape(plan: Plan, gen: _Emitter, arrays: list, tensor_args: set, oname: Callable,
          out: Callable, loss: str | None = None, inline: bool = False) -> list[str]:
    """Record the call's tape node: the precomputed gradients of a scalar loss, or the
    backward kernel with its residuals. ``loss``: the loss's array, whose tensor ``r0``
    the node's call makes (else ``r0`` is made already); ``inline``: that array is one
    this call made, so the loss tensor and a node of fresh gradients are built here."""
    tensors = [f"a{i}" for i in arrays]
    for src in plan.sources:
        tensors.append(gen.const(src.tensor, "t") if isinstance(src, CapturedTensor) else
                       f"{gen.const(src.owner, 't')}.grad" if isinstance(src, CapturedGrad) else
                       f"a{src.position}.grad" if isinstance(src, ArgumentGrad) else "None")
    common = (f"[{', '.join(tensors)}], {gen.const(plan.wrt, 'wrt')}")
    saved = gen.const(plan.saved_inputs, "saved")
    if plan.joint:
        # Each tensor read once: a `.grad` read is a property's.
        lines, named = [], {}
        for i in (*plan.wrt, *plan.saved_inputs):
            e = tensors[i]
            if i not in named and e != "None":
                named[i] = e if re.fullmatch(r"[A-Za-z]+\d*", e) else f"w{i}"
                if named[i] != e:
                    lines.append(f"w{i} = {e}")
        # The tape node of each input as `internal.tape_node` gives it, with no call once
        # a leaf has one; the version of each saved input as one pair, with no call.
        wrt = _tuple(f"{named[i]}.grad_fn or {named[i]}{NODE} or tape_node({named[i]})"
                     for i in plan.wrt)
        # Saved inputs that are tensors: not an array argument, not a runtime scalar.
        pairs = [f"({named[i]}, {named[i]}{VERSION}[0])" for i in plan.saved_inputs
                 if (arrays[i] in tensor_args if i < len(arrays) else tensors[i] != "None")]
        saved = _tuple(pairs)
        grads = plan.grad_out
        outputs = plan.optimized.outputs
        shapes = [tuple(n.shape) for n in outputs[len(outputs) - len(grads):]]
        # Gradients that are kernel outputs of their own (no two leaves, and no result or
        # write-back, share one) are handed to the leaves as they are, in their shapes.
        used = {*range(plan.n_user), *(w.out for w in plan.copy_writes),
                *(w.out for w in plan.grad_set),
                *(o for w in plan.attr_set for o, _, _ in (w.leaves or ((w.out, 0, 0),)))}
        fresh = len(set(grads)) == len(grads) and not used & set(grads)
        listed = _tuple(out(k, sh) if fresh else oname(k) for k, sh in zip(grads, shapes))
        # Fresh gradients: the node's hand-out written out for its leaves and checks.
        kind = ""
        if fresh:
            if loss and inline:
                return [*lines, *_loss_node(gen, wrt, listed, loss, saved,
                                            plan.optimized.outputs[0], len(plan.wrt),
                                            len(pairs))]
            gen.node_type = handing_node_type(len(plan.wrt), len(pairs))
            kind = f", {gen.const(gen.node_type, 'node')}"
        call = f"attach_gradients({wrt}, {listed}, {loss or 'r0'}, {saved}{kind})"
        return [*lines, f"r0 = {call}" if loss else call]
    res = ", ".join(f"i{j}" if kind is From.INPUT else oname(j)
                    for kind, j in plan.residual_plan)
    results = ", ".join(f"r{k}" for k in range(plan.n_user))
    partial = "" if plan.partial is None else f", {gen.const(plan.partial, 'partial')}"
    return [f"attach_backward({gen.const(plan.bwd_kernel, 'backward')}, {common}, "
            f"({res}{',' if len(plan.residual_plan) == 1 else ''}), [{results}], "
            f"{gen.const(plan.out_rg, 'out_rg')}, {saved}{partial})"]
