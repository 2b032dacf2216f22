"""The tape and the engine that walks it.

A tape node (`Function`, what ``t.grad_fn`` is) is an IR `Node` (op, inputs, attributes,
shape, dtype) plus what backward needs: saved input tensors, the saved output, the
version of each when saved, and hooks. Its inputs are other tape nodes, `AccumulateGrad`
nodes (op ``"input"``, one per leaf that requires grad), ``const`` nodes for tensors that do
not require grad, or Python literals. The gradient rules are the registry's VJPs, run as
ordinary eager ops: with ``create_graph=True`` the backward pass is itself recorded.
"""

from __future__ import annotations

import math
import threading
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .._location import user_location as _user_location
from ..ir.graph import Node, next_uid
from ..ops.broadcast import fit_grad
from ..ops.loss import nll_log_softmax_grad, nll_plain_grad, nll_plain_scale
from ..ops.reduce import SUM
from ..ops.shape import GETITEM, to_numpy_index
from ..ops.softmax import LOG_SOFTMAX
from . import grad_mode
from .detours import ACTIVE as DETOURS

# Eager nodes record the user's file:line only on request (dg.compare does): finding the
# frame costs about as much as the rest of recording a node.
RECORD_LOCATIONS = [False]


ANOMALY = [False]


class _RulesRunning(threading.local):
    """Per thread, whether the engine is running gradient rules (user hooks excepted): the
    ops they issue take their arguments from forward ops already checked, so eager mode
    skips their shape-rule check (tracing the same rules still runs every rule)."""

    value = False


RULES_RUNNING = _RulesRunning()


class detect_anomaly:  # noqa: N801 - PyTorch's name
    """PyTorch's anomaly mode: a backward op that produces nan raises, naming the forward
    op and the user's line that made it (forward ops record their line inside the block).

    >>> with dg.detect_anomaly():
    ...     y = dg.sqrt(x)            # x has a 0: the gradient is inf * 0 somewhere
    ...     y.sum().backward()        # RuntimeError: ... SqrtBackward0 ... at file.py:12
    """

    def __enter__(self) -> "detect_anomaly":
        self._prev = (ANOMALY[0], RECORD_LOCATIONS[0])
        _set_anomaly(True, True)
        return self

    def __exit__(self, *exc: Any) -> None:
        _set_anomaly(*self._prev)


def _set_anomaly(on: bool, locations: bool) -> None:
    """Anomaly mode on or off; while on, a compiled call runs its Python function, so
    every backward op it records is checked (`detours`)."""
    ANOMALY[0], RECORD_LOCATIONS[0] = on, locations
    while "detect_anomaly" in DETOURS:
        DETOURS.remove("detect_anomaly")
    if on:
        DETOURS.append("detect_anomaly")


class set_detect_anomaly:  # noqa: N801 - PyTorch's name
    """Anomaly mode on or off: as a call (``torch.autograd.set_detect_anomaly(True)`` at
    the top of a script, for the rest of the run) or as a context manager (restoring the
    previous mode on exit). ``check_nan`` is accepted; nan is what it checks."""

    def __init__(self, mode: bool, check_nan: bool = True) -> None:
        self._prev = (ANOMALY[0], RECORD_LOCATIONS[0])
        _set_anomaly(bool(mode), bool(mode))

    def __enter__(self) -> "set_detect_anomaly":
        return self

    def __exit__(self, *exc: Any) -> None:
        _set_anomaly(*self._prev)


def _check_anomaly(node: "Function", grads: Any) -> None:
    for k, gi in enumerate(grads):
        data = getattr(gi, "_data", None)
        if data is not None and data.dtype.kind == "f" and np.isnan(data).any():
            where = f" (forward: {node.op} at {node.loc})" if node.loc else f" ({node.op})"
            raise RuntimeError(
                f"Function '{node.name()}' returned nan values in its {k}th output{where}. "
                "Anomaly mode (dg.detect_anomaly) stopped backward here."
            )


class record_locations:  # noqa: N801 - a context manager, like no_grad
    """Within this block, eager tape nodes remember the user's ``file:line`` (``node.loc``),
    which `dg.viz` colours by and `dg.compare` aligns with the traced graph."""

    def __enter__(self) -> "record_locations":
        self._prev = RECORD_LOCATIONS[0]
        RECORD_LOCATIONS[0] = True
        return self

    def __exit__(self, *exc: Any) -> None:
        RECORD_LOCATIONS[0] = self._prev


try:
    # NumPy 2 keeps its floating-point error state in one context variable: setting it to a
    # prebuilt "ignore all" state costs ~0.2 us an op, `np.errstate()` ~2 us.
    from numpy._core.umath import _extobj_contextvar, _make_extobj

    _QUIET = _make_extobj(all="ignore")
    _set_errstate = _extobj_contextvar.set
    _reset_errstate = _extobj_contextvar.reset
except ImportError:  # another NumPy layout: the public context manager
    _QUIET = None

    def _set_errstate(_: Any) -> Any:
        state = np.errstate(all="ignore")
        state.__enter__()
        return state

    def _reset_errstate(state: Any) -> None:
        state.__exit__(None, None, None)


_FREED_MSG = (
    "Trying to backward through the graph a second time (or directly access saved tensors "
    "after they have already been freed). Saved intermediate values of the graph are freed "
    "when you call .backward() or dg.grad(). Specify retain_graph=True if you need to "
    "backward through the graph a second time or if you need to access saved tensors after "
    "calling backward."
)


# What runs a tape node's backward instead of ``node.apply(g)`` (the same result), when set:
# the profiler's timed wrapper.
NODE_RUNNER: list[Callable[[Any, Any], Any] | None] = [None]


# Advanced whenever a gradient hook is registered on a leaf or removed from it: a
# compiled step that ran the hooks of its leaves re-checks them only when it moved.
HOOK_EPOCH = [0]


class RemovableHandle:
    """Returned by ``register_hook``; ``remove()`` unregisters the hook."""

    def __init__(self, hooks: list, hook: Callable, leaf: bool = False) -> None:
        self._hooks = hooks
        self._hook = hook
        self._leaf = leaf  # a leaf's gradient hook: its removal moves `HOOK_EPOCH`

    def remove(self) -> None:
        if self._hook in self._hooks:
            self._hooks.remove(self._hook)
            if self._leaf:
                HOOK_EPOCH[0] += 1


class LeafHooksUnchanged:
    """Whether the gradient hooks of ``tensors`` (leaves) are those they had when this
    was made: a compiled step ran them in its trace. Cheap while `HOOK_EPOCH` holds."""

    __slots__ = ("tensors", "hooks", "epoch")

    def __init__(self, tensors: list) -> None:
        self.tensors = tensors
        self.hooks = self._now()
        self.epoch = HOOK_EPOCH[0]

    def _now(self) -> list:
        return [tuple(t._node._hooks) if t._node is not None else () for t in self.tensors]

    def __call__(self) -> bool:
        if HOOK_EPOCH[0] == self.epoch:
            return True
        if self._now() != self.hooks:
            return False
        self.epoch = HOOK_EPOCH[0]
        return True


class AccumulateGrad(Node):
    """The tape node of a leaf that requires grad: backward adds into ``variable.grad``."""

    __slots__ = ("_var", "_hooks")

    def __init__(self, tensor: Any) -> None:
        data = tensor._data
        super().__init__("input", (), {}, data.shape, data.dtype)
        self._var = weakref.ref(tensor)
        self._hooks: list[Callable] = []

    @property
    def variable(self) -> Any:
        return self._var()

    @property
    def next_functions(self) -> tuple:
        return ()

    def name(self) -> str:
        return "AccumulateGrad"

    def __repr__(self) -> str:
        return f"<AccumulateGrad object at {id(self):#x}>"


class Function(Node):
    """A tape node: the IR node of one eager op plus its saved values (``t.grad_fn``)."""

    __slots__ = ("_def", "_saved", "_versions", "_out", "_out_version", "_freed", "_hooks",
                 "_retain", "_kept", "_label")
    # Whether the node has ``hand_out(retain_graph)``: a backward from it that can skip
    # the engine (a compiled scalar loss whose gradients were computed with its value).
    hands_out = False

    def __init__(self, opdef: Any, inputs: tuple, attrs: dict, out: np.ndarray,
                 saved: tuple, versions: tuple, out_version: list | None) -> None:
        self.op = opdef.name
        self.inputs = inputs
        self.attrs = attrs
        self.shape = out.shape
        self.dtype = out.dtype
        self.loc = _user_location(3) if RECORD_LOCATIONS[0] else None
        # Creation order: graph_of lists the tape in the order the program ran it.
        self.uid = next_uid()
        self._def = opdef
        self._saved = saved
        self._versions = versions
        self._out = out if out_version is not None else None
        self._out_version = out_version
        self._freed = False
        self._hooks: list[Callable] | None = None
        self._retain: Any = None
        # Arrays the op's forward kernel handed over for its array-form VJP (impl_keep).
        self._kept: Any = None

    # ------------------------------------------------------------- PyTorch's view
    def name(self) -> str:
        # `_label` is set only by `relabel` (nodes that skip __init__ lack it too).
        return getattr(self, "_label", None) or self._def.node_name(self)

    def relabel(self, name: str) -> None:
        """Name this node ``name``: PyTorch's name for the function that recorded it
        through a more general op (``squeeze`` through ``reshape``, ``mse_loss`` through
        ``mean``). Only the eager tape's name changes, never what is computed."""
        self._label = name

    @property
    def next_functions(self) -> tuple:
        out = []
        for inp in self.inputs:
            if isinstance(inp, (Function, AccumulateGrad)):
                out.append((inp, 0))
            elif isinstance(inp, Node):
                out.append((None, 0))
        return tuple(out)

    def __repr__(self) -> str:
        return f"<{self.name()} object at {id(self):#x}>"

    def register_hook(self, hook: Callable) -> RemovableHandle:
        if self._hooks is None:
            self._hooks = []
        self._hooks.append(hook)
        return RemovableHandle(self._hooks, hook)

    # ------------------------------------------------- the VJP context protocol
    @property
    def args(self) -> tuple:
        """Primal inputs the VJP may read: saved tensors and literals, else ``None``."""
        if self._freed:
            raise RuntimeError(_FREED_MSG)
        saves = self._def.saves
        if len(saves) == len(self.inputs):
            return self._saved  # every input saved (literals included), in order
        out = []
        for i, inp in enumerate(self.inputs):
            if not isinstance(inp, Node):
                out.append(inp)
            elif i in saves:
                out.append(self._saved[saves.index(i)])
            else:
                out.append(None)
        return tuple(out)

    @property
    def needs_input_grad(self) -> tuple:
        """Per input, whether a gradient is wanted (VJPs skip the others)."""
        # A loop, not a comprehension: the comprehension is a call of its own, per node.
        out = []
        for i in self.inputs:
            out.append(isinstance(i, _GRAD_NODES))
        return tuple(out)

    @property
    def out(self) -> Any:
        """The saved output, as a tensor whose grad_fn is this node (for double backward)."""
        if self._freed:
            raise RuntimeError(_FREED_MSG)
        if self._out is None:
            raise RuntimeError(f"{self.op} does not save its output")
        t = _make(self._out, True, self)
        t._version = self._out_version
        return t

    # ----------------------------------------------------------------- running
    def apply(self, g: Any) -> tuple:
        """Input gradients for output gradient ``g``: the VJP, then reduce to input types."""
        if self._freed:
            raise RuntimeError(_FREED_MSG)
        versions = self._versions
        if versions:
            saved = self._saved
            for i in range(len(saved)):  # inlined: a check per saved value, per node
                v = versions[i]
                if v is not None and saved[i]._version[0] != v:
                    self._check_saved_versions()
            if self._out_version is not None and self._out_version[0] != versions[-1]:
                self._check_saved_versions()
        opdef = self._def
        if opdef.vjp_arrays is not None and not grad_mode.GRAD_ENABLED.value:
            # Nothing records (no create_graph): the op's one-kernel form of its VJP, its
            # arrays fitted to the inputs before they become tensors (one tensor each).
            # `args` and `_array_grads` written out: a backward pays this per node.
            inputs = self.inputs
            saves = opdef.saves
            saved = self._saved
            tensor = _TENSOR[0]
            args = []
            if len(saves) == len(inputs):  # every input saved (literals included), in order
                for a in saved:
                    args.append(a._data if isinstance(a, tensor) else a)
            else:
                for i, inp in enumerate(inputs):
                    if not isinstance(inp, Node):  # a literal
                        args.append(inp)
                    elif i in saves:
                        a = saved[saves.index(i)]
                        args.append(a._data if isinstance(a, tensor) else a)
                    else:
                        args.append(None)
            # Quiet, as the ops the VJP would run are (PyTorch computes inf and NaN
            # silently).
            quiet = _set_errstate(_QUIET)
            try:
                arrays = opdef.vjp_arrays(self, args, self._out, g._data)
            finally:
                _reset_errstate(quiet)
            if arrays is not None:
                out = []
                for inp, a in zip(inputs, arrays):
                    if a is None or not isinstance(inp, _GRAD_NODES):
                        out.append(None)
                        continue
                    if type(a) is not np.ndarray:
                        a = np.asarray(a)
                    if a.shape == inp.shape and a.dtype == inp.dtype:
                        out.append(_make(a, False, None))
                    else:
                        out.append(_fit_array(a, inp))
                return out
        grads = opdef.vjp(self, g)
        out = []
        for inp, gi in zip(self.inputs, grads):
            if gi is None or not isinstance(inp, _GRAD_NODES):
                out.append(None)
                continue
            data = gi._data
            if data.shape != inp.shape or data.dtype != inp.dtype:
                gi = (fit_grad(gi, inp.shape, inp.dtype) if grad_mode.GRAD_ENABLED.value
                      else _fit_array(data, inp))
            out.append(gi)
        return out

    def _check_saved_versions(self) -> None:
        n = len(self._saved)
        for i in range(n):
            v = self._versions[i]
            if v is not None and self._saved[i]._version[0] != v:
                t = self._saved[i]
                raise RuntimeError(
                    "one of the variables needed for gradient computation has been modified "
                    f"by an inplace operation: [{_type_str(t)}], an input of {self.name()}, "
                    f"is at version {t._version[0]}; expected version {v} instead. Hint: "
                    "change it after backward(), or change a copy (y = x * 1) instead."
                )
        if self._out_version is not None and self._out_version[0] != self._versions[n]:
            raise RuntimeError(
                "one of the variables needed for gradient computation has been modified by "
                f"an inplace operation: the output [{_type_str(self)}] of {self.name()} is at "
                f"version {self._out_version[0]}; expected version {self._versions[n]} instead."
            )

    def release(self) -> None:
        """Drop saved values (after a backward without ``retain_graph``)."""
        if self._saved or self._out is not None:
            self._saved = ()
            self._out = None
            self._freed = True
        self._kept = None


class PlainNll(Function):
    """``nll_loss``'s node over the ``log_softmax`` node of a plain cross-entropy (float
    (N, C) logits, (N,) classes all in range and none ignored, no weights, a mean or a
    sum; `fused.cross_entropy` records it). The same node as the op's, but where the
    op's array form would run (no recorded backward, no anomaly mode or profiler) the
    engine has it send that input its gradient as `_TargetRows` instead of a zero-filled
    array."""

    __slots__ = ()

    def target_rows(self, g: Any) -> tuple:
        """This node's input gradients for output gradient ``g``, the first unfilled."""
        if self._freed:
            raise RuntimeError(_FREED_MSG)
        self._check_saved_versions()
        target = self._saved[0]._data
        c = nll_plain_scale(g._data, self.inputs[0].shape[0], self.attrs["reduction"])
        return _TargetRows(self.inputs[0].shape, target, c), None, None


class _TargetRows:
    """`PlainNll`'s input gradient kept as its targets and magnitude ``c`` (``-c`` at each
    row's target, zeros elsewhere) until its ``log_softmax`` node runs, which then makes
    its own gradient in one pass (`nll_log_softmax_grad`, the bits of the two backward
    kernels); anything else (a hook, a retained or captured gradient, a second
    consumer's gradient to add) takes the filled array."""

    __slots__ = ("shape", "target", "c")

    def __init__(self, shape: tuple, target: np.ndarray, c: np.ndarray) -> None:
        self.shape = shape
        self.target = target
        self.c = c

    def tensor(self) -> Any:
        return _make(nll_plain_grad(self.shape, self.target, self.c), False, None)

    def through(self, node: Function) -> tuple:
        """The gradient ``node``, the log_softmax node below, sends its input."""
        if node._freed:
            raise RuntimeError(_FREED_MSG)
        node._check_saved_versions()
        quiet = _set_errstate(_QUIET)
        try:
            return (_make(nll_log_softmax_grad(node._out, self.target, self.c), False, None),)
        finally:
            _reset_errstate(quiet)


_GRAD_NODES = (Function, AccumulateGrad)


def _fit_array(data: np.ndarray, inp: Node) -> Any:
    """`fit_grad` of gradient array ``data`` outside a recorded backward: one that only has
    extra leading dimensions (a bias's) is summed by one kernel, without the reshape after
    a keepdims sum (PyTorch's sum_to records that view, so a create_graph backward keeps
    it)."""
    shape = inp.shape
    lead = data.ndim - len(shape)
    if lead > 0 and data.shape[lead:] == shape and data.dtype == inp.dtype:
        return _make(SUM.impl(data, axis=tuple(range(lead)), keepdims=False), False, None)
    return fit_grad(_make(data, False, None), shape, inp.dtype)


def _make(data: Any, rg: bool, grad_fn: Any) -> Any:
    """`tensor._make`, bound on first use (tensor.py imports this module)."""
    global _make
    from .tensor import _make as make

    _make = make
    return make(data, rg, grad_fn)


class _AnyTensor:
    """No instances: what `_TENSOR` holds until tensor.py binds the eager Tensor class."""


# The eager Tensor class (set by tensor.py, which imports this module): a saved value that
# is one hands the VJP its array.
_TENSOR: list = [_AnyTensor]


def _type_str(x: Any) -> str:
    from ..dtypes import short_name

    return f"{short_name(x.dtype)}[{','.join(map(str, x.shape))}]"


# ------------------------------------------------------------------------------ engine


def _discover(roots: Sequence[Node]) -> dict:
    """Number of consumers of each tape node reachable from ``roots`` (iterative DFS)."""
    deps: dict = {}
    # The same root given twice (dg.backward([y, y], ...)) is walked once: counting its
    # inputs twice would leave them waiting for a gradient that never comes.
    # Loops, not comprehensions: each of those is a call (a backward's fixed cost).
    stack = []
    for r in roots:
        if isinstance(r, Function) and r not in stack:
            stack.append(r)
    seen = set(stack)
    while stack:
        fn = stack.pop()
        for inp in fn.inputs:
            if isinstance(inp, _GRAD_NODES):
                deps[inp] = deps.get(inp, 0) + 1
                if inp not in seen and isinstance(inp, Function):
                    seen.add(inp)
                    stack.append(inp)
    return deps


def _needed(roots: Sequence[Node], targets: set) -> set:
    """Tape nodes from which some target can be reached (so ``dg.grad`` skips the rest)."""
    order: list = []
    stack = [(r, False) for r in roots if isinstance(r, _GRAD_NODES)]
    seen: set = set()
    while stack:
        node, done = stack.pop()
        if done:
            order.append(node)
            continue
        if node in seen:
            continue
        seen.add(node)
        stack.append((node, True))
        if isinstance(node, Function):
            stack.extend((i, False) for i in node.inputs if isinstance(i, _GRAD_NODES))
    needed: set = set()
    for node in order:  # children come before parents in post-order
        if node in targets or (
            isinstance(node, Function) and any(i in needed for i in node.inputs)
        ):
            needed.add(node)
    return needed


class PostAccumulateHook:
    """A leaf's ``register_post_accumulate_grad_hook(fn)``: kept among the leaf node's
    gradient hooks (so every path that skips hooked leaves skips it too), where it changes
    no gradient; `_accumulate` calls ``fn(leaf)`` once ``.grad`` holds the sum."""

    __slots__ = ("fn",)

    def __init__(self, fn: Callable[[Any], None]) -> None:
        self.fn = fn

    def __call__(self, g: Any) -> None:
        return None


def _accumulate(acc: AccumulateGrad, g: Any, create_graph: bool, handed: set) -> None:
    if acc._hooks:
        g = _run_hooks(acc._hooks, g)
    var = acc._var()
    if var is None:
        return
    if create_graph:
        old = var._grad
        var._grad = g if old is None else old + g
    else:
        accumulate_array(var, g._data, handed)
    for hook in list(acc._hooks):
        if type(hook) is PostAccumulateHook:
            hook.fn(var)


def accumulate_array(var: Any, d: np.ndarray, handed: set) -> None:
    """Add gradient array ``d`` into leaf ``var``'s ``.grad`` (outside a recorded backward).

    ``handed`` holds the ids of arrays that something else may still hold: the caller's
    seed, and what this backward already gave to another leaf or a retained non-leaf."""
    old = var._grad
    if old is not None:
        var._grad = _make(old._data + d, False, None)
        return
    base = d.base
    # The gradient array becomes the leaf's own unless something else may hold its
    # memory: it was handed out already in this backward (the same array can flow to
    # two leaves), it is read-only (a broadcast), or a strided view.
    if (id(d) in handed or not d.flags.writeable or (base is not None and (
            id(base) in handed or not d.flags.c_contiguous))):
        d = np.array(d, copy=True)
        base = None
    handed.add(id(d))
    if base is not None:
        handed.add(id(base))
    var._grad = _make(d, False, None)


def run_backward(
    roots: Sequence[Any],
    grads: Sequence[Any],
    retain_graph: bool,
    create_graph: bool,
    targets: Sequence[Node] | None = None,
    allow_unused: bool = False,
) -> tuple | None:
    """Propagate ``grads`` from the tape nodes ``roots``.

    Without ``targets`` gradients accumulate into the leaves' ``.grad``; with them (``dg.grad``)
    nothing is accumulated and the gradient reaching each target node is returned.
    """
    prev = grad_mode.GRAD_ENABLED.value
    prev_rules = RULES_RUNNING.value
    grad_mode.GRAD_ENABLED.value = create_graph
    RULES_RUNNING.value = True
    try:
        if targets is None and len(roots) == 1 and _over_leaves(roots[0]):
            _run_one(roots[0], grads[0], retain_graph, create_graph)
            return None
        return _Walk(roots, grads, retain_graph, create_graph, targets).run(allow_unused)
    finally:
        grad_mode.GRAD_ENABLED.value = prev
        RULES_RUNNING.value = prev_rules


def _over_leaves(node: Any) -> bool:
    """Whether ``node`` is one op whose inputs are leaves and constants, with no hook or
    retained gradient of its own or on a leaf: its backward needs no graph walk (the walk
    sums a leaf's gradients before its hooks see them)."""
    if not isinstance(node, Function) or node._hooks or node._retain is not None:
        return False
    for i in node.inputs:
        if isinstance(i, Function) or (type(i) is AccumulateGrad and i._hooks):
            return False
    return True


def _run_one(node: "Function", g: Any, retain_graph: bool, create_graph: bool) -> None:
    """The backward of one op over leaves (a compiled call, or ``x * y``)."""
    handed = {id(g._data)}
    in_grads = node.apply(g) if NODE_RUNNER[0] is None else NODE_RUNNER[0](node, g)
    if ANOMALY[0]:
        _check_anomaly(node, in_grads)
    for inp, gi in zip(node.inputs, in_grads):
        if gi is not None and isinstance(inp, AccumulateGrad):
            _accumulate(inp, gi, create_graph, handed)
    if not retain_graph:
        node.release()



class _Slices:
    """Gradients for one input sent by basic-index views of it (``split``'s pieces), kept
    as (index, array) until the input runs: disjoint pieces then fill one zeroed buffer
    instead of one per piece, summed. The bits are the op-by-op sum's: where the pieces
    are disjoint every element of that sum is one piece's value plus zeros (``g + 0``, the
    sign of a zero dropped), which is what each piece's write into the buffer computes;
    otherwise (overlaps) the pieces are scattered and summed in arrival order, as ops."""

    __slots__ = ("shape", "dtype", "parts")

    def __init__(self, shape: tuple, dtype: np.dtype, index: tuple, g: np.ndarray) -> None:
        self.shape = shape
        self.dtype = dtype
        self.parts = [(index, g)]

    def tensor(self) -> Any:
        parts = self.parts
        if len(parts) > 1 and _disjoint([index for index, _ in parts], self.shape):
            # Disjoint pieces that add up to the whole (a split's) write every element:
            # no zero fill first.
            whole = sum([g.size for _, g in parts]) == math.prod(self.shape)
            out = (np.empty if whole else np.zeros)(self.shape, self.dtype)
            zero = self.dtype.type(0)
            for index, g in parts:
                np.add(g, zero, out=out[to_numpy_index(index) + (Ellipsis,)])
            return _make(out, False, None)
        total = None
        for index, g in parts:  # SCATTER's kernel, then the add op's
            out = np.zeros(self.shape, self.dtype)
            out[to_numpy_index(index)] = g
            total = out if total is None else np.add(total, out)
        return _make(total, False, None)


def _extents(index: tuple, shape: tuple) -> list:
    """Per dimension of the indexed array, the first and last position ``index`` reaches
    (``None`` when it reaches none)."""
    ext = []
    for e in index:
        if e is None:  # a new axis: no dimension of the array
            continue
        if type(e) is tuple:
            start, stop, step = e
            r = range(start, -1 if stop is None else stop, step)
            ext.append((min(r[0], r[-1]), max(r[0], r[-1])) if len(r) else None)
        else:
            ext.append((e, e))
    for size in shape[len(ext):]:
        ext.append((0, size - 1) if size else None)
    return ext


def _disjoint(indices: list, shape: tuple) -> bool:
    """Whether no two basic indices into an array of ``shape`` reach a common element
    (by their bounding boxes: a conservative test)."""
    boxes = [_extents(index, shape) for index in indices]
    for i in range(len(boxes)):
        for j in range(i):
            for a, b in zip(boxes[i], boxes[j]):
                if a is None or b is None or a[1] < b[0] or b[1] < a[0]:
                    break  # apart along this dimension
            else:
                return False
    return True


def _merge(prev: Any, g: Any) -> Any:
    """Two gradients for one input, either of them `_Slices` or `_TargetRows`."""
    if type(prev) is _Slices and type(g) is _Slices:
        prev.parts.extend(g.parts)
        return prev
    if type(prev) in _UNFILLED:
        prev = prev.tensor()
    if type(g) in _UNFILLED:
        g = g.tensor()
    return prev + g


_UNFILLED = (_Slices, _TargetRows)


class _Walk:
    """One backward pass over the tape: nodes run once every consumer has sent its
    gradient (counted by `_discover`), gradients summed per node in ``buffers``.

    Without ``targets`` leaves accumulate into ``.grad``; with them (``dg.grad``) only the
    nodes that reach a target run, and the gradient arriving at each target is captured.
    """

    def __init__(self, roots: Sequence[Node], grads: Sequence[Any], retain_graph: bool,
                 create_graph: bool, targets: Sequence[Node] | None) -> None:
        self.retain_graph = retain_graph
        self.create_graph = create_graph
        self.targets = targets
        self.deps = _discover(roots)
        self.buffers: dict = {}
        for r, g in zip(roots, grads):
            self.buffers[r] = self.buffers[r] + g if r in self.buffers else g
        self.capture: dict | None = None
        self.needed: set | None = None
        if targets is not None:
            self.capture = {t: None for t in targets}
            self.needed = _needed(roots, set(targets))
        ready: list = []
        for r in roots:
            if r not in ready and self.deps.get(r, 0) == 0:
                ready.append(r)
        self.ready = ready
        handed = set()  # arrays a caller may still hold
        for g in grads:
            handed.add(id(g._data))
        self.handed = handed

    def run(self, allow_unused: bool) -> tuple | None:
        # One loop, its steps inlined: per node a backward pays this loop, not a call per
        # step (the per-op cost of a small model's backward).
        ready, buffers, deps = self.ready, self.buffers, self.deps
        capture, needed, handed = self.capture, self.needed, self.handed
        create_graph, retain_graph = self.create_graph, self.retain_graph
        while ready:
            node = ready.pop()
            g = buffers.pop(node, None)
            if type(g) is _Slices:
                g = g.tensor()
            elif type(g) is _TargetRows and (
                    node._def is not LOG_SOFTMAX or node._hooks or node._retain is not None
                    or create_graph or capture is not None or ANOMALY[0]
                    or NODE_RUNNER[0] is not None or g.c.dtype != node.dtype
                    or node._def.vjp_arrays is None):
                g = g.tensor()  # only the log_softmax node's own backward takes it unfilled
            if isinstance(node, AccumulateGrad):
                if g is None:
                    continue
                if capture is None:
                    if node._hooks or create_graph:
                        _accumulate(node, g, create_graph, handed)
                    else:  # `_accumulate` without hooks or a recorded backward
                        var = node._var()
                        if var is not None:
                            accumulate_array(var, g._data, handed)
                elif node in capture:
                    capture[node] = _run_hooks(node._hooks, g)
                continue
            # The gradients the node sends its inputs; none when no gradient reached it or
            # no target lies below it. Runs hooks, keeps a retained gradient, captures a
            # target's.
            in_grads = None
            if g is not None and (needed is None or node in needed):
                if node._hooks:
                    g = _run_hooks(node._hooks, g)
                if node._retain is not None:
                    t = node._retain()
                    if t is not None:
                        handed.add(id(g._data))
                        t._grad = g if t._grad is None else t._grad + g
                if capture is not None and node in capture:
                    capture[node] = g
                inp = node.inputs[0] if node._def is GETITEM else None
                if (inp is not None and not create_graph and not ANOMALY[0]
                        and not node._freed and isinstance(inp, _GRAD_NODES)
                        and g._data.dtype == inp.dtype):
                    # The scatter left to the input (`_Slices`): split's pieces share one
                    # buffer.
                    in_grads = (_Slices(inp.shape, inp.dtype, node.attrs["index"], g._data),)
                elif type(g) is _TargetRows:
                    in_grads = g.through(node)
                elif (type(node) is PlainNll and not create_graph and not ANOMALY[0]
                        and NODE_RUNNER[0] is None and node._def.vjp_arrays is not None):
                    in_grads = node.target_rows(g)
                else:
                    in_grads = (node.apply(g) if NODE_RUNNER[0] is None
                                else NODE_RUNNER[0](node, g))
                if ANOMALY[0]:
                    _check_anomaly(node, in_grads)
                if not retain_graph and (node._saved or node._out is not None):
                    # Function.release, inlined (per node).
                    node._saved = ()
                    node._out = None
                    node._freed = True
            # Send each input its gradient (summed where several consumers send one); an
            # input whose consumers have all sent is ready.
            for k, inp in enumerate(node.inputs):
                if not isinstance(inp, _GRAD_NODES):
                    continue
                gi = None if in_grads is None else in_grads[k]
                if gi is not None:
                    if inp in buffers:
                        prev = buffers[inp]
                        buffers[inp] = (prev + gi if type(prev) not in _UNFILLED
                                        and type(gi) not in _UNFILLED else _merge(prev, gi))
                    else:
                        buffers[inp] = gi
                n = deps[inp] - 1
                deps[inp] = n
                if n == 0:
                    ready.append(inp)
        return None if capture is None else self._captured(allow_unused)

    def _captured(self, allow_unused: bool) -> tuple | None:
        """``dg.grad``'s result: the gradient of each target, in order."""
        if self.capture is None:
            return None
        result = []
        for t in self.targets:
            g = self.capture[t]
            if g is None and not allow_unused:
                raise RuntimeError(
                    "One of the differentiated Tensors appears to not have been used in the "
                    "graph. Set allow_unused=True if this is the desired behavior."
                )
            result.append(g)
        return tuple(result)


def _run_hooks(hooks: list, g: Any) -> Any:
    prev = RULES_RUNNING.value
    RULES_RUNNING.value = False  # a hook is user code: its ops are checked
    try:
        for hook in list(hooks):
            r = hook(g)
            if r is not None:
                _check_hook_result(hook, g, r)
                g = r
    finally:
        RULES_RUNNING.value = prev
    return g


def _check_hook_result(hook: Callable, g: Any, r: Any) -> None:
    """A replacement gradient must be a tensor of the gradient's type and shape (PyTorch's
    checks): a wrong one would surface later as a wrong ``.grad`` or a NumPy error."""
    name = getattr(hook, "__name__", type(hook).__name__)
    data = getattr(r, "_data", None)
    if not isinstance(data, np.ndarray):
        raise TypeError(f"hook '{name}' returned {type(r).__name__}; expected a Tensor or None")
    if data.dtype != g.dtype:
        raise RuntimeError(f"hook '{name}' has changed the type of value (was {g.dtype} got "
                           f"{data.dtype})")
    if data.shape != tuple(g.shape):
        raise RuntimeError(f"hook '{name}' has changed the size of value (was "
                           f"{tuple(g.shape)} got {tuple(data.shape)})")
