"""The tape nodes of a compiled call: one `CompiledFunctionBackward` per train-mode call.

Its backward runs the compiled backward kernel instead of per-op VJPs. A call with several
outputs that require grad gives each output an `_OutputOf` node; their gradients meet as
`_Cotangents` at the shared node.
"""

from __future__ import annotations

import functools
import types
from typing import Any

import numpy as np

from ..ir.graph import next_uid, zero_d_operands
from . import grad_mode
from .autograd import (
    _FREED_MSG,
    ANOMALY,
    NODE_RUNNER,
    AccumulateGrad,
    Function,
    accumulate_array,
)
from .tensor import Tensor, _make


class _Cotangents:
    """Per-output gradients flowing into a multi-output compiled node (merged by ``+``)."""

    __slots__ = ("parts",)

    def __init__(self, parts: dict) -> None:
        self.parts = parts

    def __add__(self, other: "_Cotangents") -> "_Cotangents":
        merged = dict(self.parts)
        for k, g in other.parts.items():
            merged[k] = merged[k] + g if k in merged else g
        return _Cotangents(merged)


class _CompiledOp:
    """Stands in for an `OpDef` on the tape node of a compiled call."""

    name = "compiled"
    saves: tuple = ()

    @staticmethod
    def node_name(node: Any) -> str:
        return "CompiledFunctionBackward"


class CompiledFunctionBackward(Function):
    """The single tape node of a compiled call: backward runs the compiled backward kernel."""

    __slots__ = ("_kernel", "_outs", "_checks", "_shapes", "_partial")

    def __init__(self, kernel: Any, inputs: tuple, residuals: tuple, outs: list,
                 checks: list, partial: Any = None) -> None:
        first = outs[0]
        _compiled_node(self, inputs, tuple(first[0]), first[1], residuals, checks)
        self._kernel = kernel
        self._outs = outs
        self._partial = partial

    def apply(self, g: Any) -> list:
        _check_ready(self)
        parts = g.parts if isinstance(g, _Cotangents) else {0: g}
        outs = self._kernel.new_outputs()  # first: a kernel that must raise raises here
        partial = self._partial
        if partial is not None and len(parts) < len(partial.full):
            grads = self._partial_grads(partial, parts)
            if grads is not None:
                return grads
        cot = []
        for k, (shape, dtype) in enumerate(self._outs):
            c = parts[k]._data if k in parts else np.zeros(shape, dtype)
            if not shape and not zero_d_operands(self._kernel.graph):
                c = c.reshape(1)  # the kernel's convention for a 0-d value
            cot.append(readonly_cotangent(c))
        self._kernel.run(cot + list(self._saved), outs)
        return [_make(o if o.shape == shape else o.reshape(shape), False, None)
                for o, shape in zip(outs, self._shapes)]

    def _partial_grads(self, partial: Any, parts: dict) -> list | None:
        """The gradients from the outputs in ``parts`` alone, as eager mode's backward
        runs nothing for the others: None (for every input no such output reaches) where
        a zero cotangent for them could make ``0 * inf``. None when no kernel serves
        (`partial.PartialBackward.get`)."""
        seeds = tuple(sorted(parts))
        cot = [parts[k]._data for k in seeds]
        k = partial.get(seeds, cot, self._saved)
        if k is None:
            return None
        grads: list = [None] * len(self._shapes)
        for i, o in zip(k.inputs, k.run(cot, self._saved)):
            shape = self._shapes[i]
            grads[i] = _make(o if o.shape == shape else o.reshape(shape), False, None)
        return grads


class PrecomputedBackward(Function):
    """The tape node of a compiled scalar loss whose kernel computed its gradients with its
    value (seed one): backward hands them out, scaled when the seed is not one. Built by
    `attach_gradients`."""

    __slots__ = ("_checks", "_shapes", "_handed", "_fresh")
    hands_out = True
    # The fields no one writes after `attach_gradients`, as class attributes: one node is
    # built per training step, and each field it does not set is a store saved.
    op = "compiled"
    loc = None
    _def = _CompiledOp
    _versions = ()
    _out_version = None
    # Whether the class holds the fields every node of a call path has alike
    # (`inline_node_type`).
    inline = False

    def apply(self, g: Any) -> list:
        _check_ready(self)
        return [_make(a, False, None) for a in self._gradients(g._data.reshape(()))]

    def _gradients(self, seed: Any) -> list:
        """The input gradients for output gradient ``seed`` (a scalar), in input shapes."""
        # Gradients are linear in the seed: another seed scales the seed-one gradients
        # (a rounding of the product away from a backward seeded with it).
        if seed != 1:
            grads = [np.multiply(a, seed, dtype=a.dtype) for a in self._saved]
        elif self._handed:  # a second backward (retain_graph): the first gave these away
            grads = [a.copy() for a in self._saved]
        else:
            self._handed = True
            grads = self._saved
        if self._fresh:  # already in the inputs' shapes
            return list(grads)
        return [a if a.shape == shape else a.reshape(shape)
                for a, shape in zip(grads, self._shapes)]

    def hand_out(self, retain_graph: bool | None) -> bool:
        """``loss.backward()`` (seed one, no graph recorded) without the engine: the
        gradients go straight to the leaves' ``.grad``, as the engine would put them
        there. False, doing nothing, when anything needs the engine: a hook or retained
        gradient on this node or on an input, an input that is not a leaf, anomaly mode,
        or a node already freed (the engine raises)."""
        # Python calls are the cost of this path (a scalar step is a few microseconds):
        # the checks and the common case of `_gradients` are written out here.
        if (self._freed or self._hooks or self._retain is not None or ANOMALY[0]
                or NODE_RUNNER[0] is not None):  # a profile times the node in the engine
            return False
        inputs = self.inputs
        for inp in inputs:
            if type(inp) is not AccumulateGrad or inp._hooks:
                return False
        for t, v in self._checks:
            if t._version[0] != v:
                _check_versions(self)  # raises the engine's error
        if self._fresh and not self._handed:
            # The call's own arrays, one per input and in its shape: no other leaf holds
            # one, so each leaf without a `.grad` takes its array as it is, and one with
            # a `.grad` gets the sum. `_set_new_grads` written out: no call per step.
            self._handed = True
            new = Tensor.__new__
            for inp, a in zip(inputs, self._saved):
                var = inp._var()
                if var is None:
                    continue
                old = var._grad
                if old is not None:
                    var._grad = _make(old._data + a, False, None)
                    continue
                g = new(Tensor)
                g._data = a
                g._rg = False
                g._grad = None
                g.grad_fn = None
                g._version = [0]
                g._node = None
                var._grad = g
            if not retain_graph:
                self._saved = ()
                self._freed = True
            return True
        if self._handed:
            grads = self._gradients(1)
        else:
            self._handed = True
            grads = self._saved
        handed: set = set()
        shapes = [a.shape for a in grads] if self._fresh else self._shapes
        for inp, a, shape in zip(inputs, grads, shapes):
            var = inp._var()
            if var is None:
                continue
            if a.shape != shape:
                a = a.reshape(shape)
            old = var._grad
            if old is not None:  # accumulate, as `accumulate_array` does
                var._grad = _make(old._data + a, False, None)
                continue
            # The first gradient of a leaf: `accumulate_array`'s ownership rule written
            # out (a fresh, writeable, contiguous array no other leaf got becomes the
            # leaf's own), the common case without its call.
            base = a.base
            if id(a) in handed or not a.flags.writeable or (base is not None and (
                    id(base) in handed or not a.flags.c_contiguous)):
                accumulate_array(var, a, handed)
                continue
            handed.add(id(a))
            if base is not None:
                handed.add(id(base))
            var._grad = _make(a, False, None)
        if not retain_graph:
            self._saved = ()
            self._freed = True
        return True


def handing_node_type(n: int, m: int) -> type:
    """The `PrecomputedBackward` of a call whose ``n`` gradients are fresh (one array per
    input, in its shape: see `attach_gradients`) and whose node checks ``m`` versions:
    its `hand_out` is written out for those counts (no loop, no ``zip``). Anything but the
    first hand-out of an unhooked node over leaves takes the general one."""
    if n == 0:
        return PrecomputedBackward
    return _handing_node_type(n, m)


@functools.cache
def _handing_node_type(n: int, m: int) -> type:
    nodes = ", ".join(f"n{i}" for i in range(n)) + ","
    lines = [
        "def hand_out(self, retain_graph):",
        "    if (self._handed or self._freed or self._hooks or self._retain is not None",
        "            or ANOMALY[0] or NODE_RUNNER[0] is not None):",
        "        return GENERAL(self, retain_graph)",
        f"    {nodes} = self.inputs",
        "    if (" + " or ".join(f"type(n{i}) is not AccumulateGrad or n{i}._hooks"
                             for i in range(n)) + "):",
        "        return False",
    ]
    if m:
        pairs = ", ".join(f"(t{j}, v{j})" for j in range(m)) + ","
        lines += [f"    {pairs} = self._checks",
                  "    if " + " or ".join(f"t{j}._version[0] != v{j}" for j in range(m)) + ":",
                  "        check_versions(self)  # raises the engine's error"]
    lines += ["    self._handed = True",
              f"    {', '.join(f'a{i}' for i in range(n))}, = self._saved"]
    for i in range(n):
        # `_set_new_grads` written out: a leaf without a `.grad` takes the call's own
        # array (no other leaf holds it), one with a `.grad` gets the sum.
        lines += [f"    var = n{i}._var()", "    if var is not None:",
                  "        old = var._grad", "        if old is None:",
                  "            g = new(Tensor)", f"            g._data = a{i}",
                  "            g._rg = False", "            g._grad = None",
                  "            g.grad_fn = None", "            g._version = [0]",
                  "            g._node = None", "            var._grad = g",
                  "        else:", f"            var._grad = make(old._data + a{i}, False, None)"]
    lines += ["    if not retain_graph:", "        self._saved = ()", "        self._freed = True",
              "    return True"]
    ns = {"GENERAL": PrecomputedBackward.hand_out, "ANOMALY": ANOMALY,
          "NODE_RUNNER": NODE_RUNNER, "AccumulateGrad": AccumulateGrad, "Tensor": Tensor,
          "new": Tensor.__new__, "make": _make, "check_versions": _check_versions}
    source = "\n".join(lines) + "\n"
    exec(compile(source, f"<dg hand-out of {n} leaves>", "exec"), ns)  # noqa: S102 - built above
    hand_out = ns["hand_out"]
    hand_out.__doc__ = PrecomputedBackward.hand_out.__doc__
    # Same name as its base: what prints the tape (node names, reprs) sees no difference.
    return type("PrecomputedBackward", (PrecomputedBackward,),
                {"__slots__": (), "hand_out": hand_out, "__module__": __name__,
                 "__qualname__": "PrecomputedBackward", "hand_out_source": source})


def inline_node_type(n: int, m: int, shape: tuple, dtype: Any) -> type:
    """`handing_node_type` for a loss of ``shape`` and ``dtype`` whose node a generated call
    path builds field by field (`compile.callgen`): the fields every such node has alike
    (no attributes, the loss's shape and dtype, fresh gradients) are class attributes, so
    a step stores only its own. Nothing writes them after the node is built."""
    return _inline_node_type(handing_node_type(n, m), tuple(shape), np.dtype(dtype))


# A tape node's attributes: read-only, since one mapping serves every inline node.
_NO_ATTRS = types.MappingProxyType({})


@functools.cache
def _inline_node_type(base: type, shape: tuple, dtype: np.dtype) -> type:
    return type("PrecomputedBackward", (base,),
                {"__slots__": (), "__module__": __name__, "__qualname__": "PrecomputedBackward",
                 "attrs": _NO_ATTRS, "shape": shape, "dtype": dtype, "_shapes": (),
                 "_fresh": True, "inline": True})


def attach_gradients(inputs: tuple, grads: tuple, result: Tensor | np.ndarray, checks: tuple,
                     fresh: type | None = None) -> Tensor:
    """Record a compiled scalar loss on the tape and return it: ``grads[i]`` is its
    gradient (seed one) with respect to the tensor whose tape node is ``inputs[i]``
    (`internal.tape_node`); ``checks`` holds ``(tensor, version)`` for the tensors whose
    values the gradients were computed from (changing one before backward raises, as in
    eager mode). ``fresh`` (the node's type, `handing_node_type`): the gradients are
    arrays the call made, one per input (none shared), each in its input's shape, so
    `hand_out` gives them to the leaves as they are. ``result``: the loss tensor, or the
    array it holds (the tensor is made here)."""
    # One tape node per training step: built field by field, without the IR node's
    # constructor chain; the generated call builds ``inputs`` and ``checks`` as tuple
    # displays, with no call per input (the compiled call's Python calls are its cost).
    if type(result) is np.ndarray:
        # The loss tensor as `_make` builds it, written out: no call of its own per step.
        data = result
        result = Tensor.__new__(Tensor)
        result._data = data
        result._grad = None
        result._version = [0]
        result._node = None
    else:
        data = result._data
    cls = PrecomputedBackward if fresh is None else fresh
    node = cls.__new__(cls)
    node.inputs = inputs
    if not cls.inline:  # else its class holds these (`inline_node_type`)
        node.attrs = {}
        node.shape = data.shape
        node.dtype = data.dtype
        # Fresh gradients are in their inputs' shapes already: nothing reads the shapes.
        node._shapes = () if fresh is not None else [n.shape for n in inputs]
        node._fresh = fresh is not None
    node.uid = next_uid()
    node._saved = grads
    node._out = None
    node._freed = False
    node._hooks = None
    node._retain = None
    node._checks = checks
    node._handed = False
    result._rg = True
    result.grad_fn = node
    return result


def _inputs_and_checks(tensors: list, wrt: list, saved: tuple | None) -> tuple:
    """A compiled call's tape inputs (the nodes of ``tensors[i]`` for ``i`` in ``wrt``) and
    the version checks of the tensors at positions ``saved`` (default: all)."""
    inputs = tuple([tensors[i]._input_node() for i in wrt])
    # Inputs whose values the gradients are computed from: changing one in place before
    # backward must raise, as in eager mode. An input the backward does not read may change.
    kept = tensors if saved is None else [tensors[i] for i in saved]
    return inputs, [(t, t._version[0]) for t in kept if isinstance(t, Tensor)]


def _compiled_node(node: Any, inputs: tuple, shape: tuple, dtype: np.dtype, saved: tuple,
                   checks: list) -> None:
    """The fields of a compiled call's tape node over ``inputs`` (the tensors it gives
    gradients to), whose output has ``shape`` and ``dtype``."""
    node._shapes = [tuple(n.shape) for n in inputs]
    Node_init = super(Function, node).__init__  # noqa: N806 - the IR Node's __init__
    Node_init("compiled", inputs, {}, shape, dtype)
    _tape_state(node, saved)
    node._checks = checks


def _check_ready(node: Any) -> None:
    """A compiled call's backward may run: not freed, not asked for a graph of ops, and
    every saved input unchanged since the call (as eager mode checks)."""
    if node._freed:
        raise RuntimeError(_FREED_MSG)
    if grad_mode.GRAD_ENABLED.value:
        raise RuntimeError(_NO_DOUBLE_BACKWARD)
    _check_versions(node)


def _check_versions(node: Any) -> None:
    """Every input the gradients were computed from is unchanged since the call."""
    for t, v in node._checks:
        if t._version[0] != v:
            raise RuntimeError(
                "one of the variables needed for gradient computation has been modified "
                f"by an inplace operation: an input of {node.name()} of shape {tuple(t.shape)} "
                f"is at version {t._version[0]}; expected version {v} instead."
            )


_NO_DOUBLE_BACKWARD = (
    "backward(create_graph=True) through a compiled function is not supported: its backward "
    "is a compiled kernel, not a graph of ops. Differentiate the eager function instead.")


def readonly_cotangent(c: np.ndarray) -> np.ndarray:
    """``c`` as a backward kernel always receives it, C-contiguous and read-only (the
    kernel only reads it): one Numba signature serves every call, the one it was compiled
    for, whatever the gradient's source."""
    if not c.flags.c_contiguous:
        c = np.ascontiguousarray(c)
    if c.flags.writeable:
        c = c.view()
        c.flags.writeable = False
    return c


def _tape_state(node: Function, saved: tuple) -> None:
    """The `Function` fields of a compiled-call node, which has no `OpDef` of its own (its
    backward is a kernel) and so skips `Function.__init__`."""
    node._def = _CompiledOp
    node._saved = saved
    node._versions = ()
    node._out = None
    node._out_version = None
    node._freed = False
    node._hooks = None
    node._retain = None


class _OutputOf(Function):
    """Routes the gradient of output ``k`` of a multi-output compiled call to its node."""

    __slots__ = ("_k",)

    def __init__(self, joint: CompiledFunctionBackward, k: int, shape: tuple,
                 dtype: np.dtype) -> None:
        super(Function, self).__init__("compiled_output", (joint,), {"index": k}, shape, dtype)
        _tape_state(self, ())
        self._k = k

    def apply(self, g: Any) -> list:
        return [_Cotangents({self._k: g})]


def attach_backward(kernel: Any, tensors: list, wrt: list, residuals: tuple, results: list,
                    out_rg: tuple, saved: tuple | None = None, partial: Any = None) -> None:
    """Record a compiled call on the tape: ``results`` (its outputs) get a grad_fn whose
    backward runs ``kernel`` on the output gradients and ``residuals``, giving the gradients
    of ``tensors[i]`` for ``i`` in ``wrt``. ``out_rg[k]`` says whether output ``k`` depends
    on an input that requires grad; ``saved`` (default: all) the positions in ``tensors``
    whose arrays are among the residuals; ``partial`` (a `compile.partial.PartialBackward`)
    the kernels for a backward that reaches only some of several outputs."""
    inputs, checks = _inputs_and_checks(tensors, wrt, saved)
    outs = [(tuple(r.shape), r.dtype) for r in results]
    joint = CompiledFunctionBackward(kernel, inputs, residuals, outs, checks, partial)
    for k, r in enumerate(results):
        if not out_rg[k]:
            # As in eager mode: a comparison or a value computed from detached tensors
            # does not require grad (its cotangent stays zero).
            continue
        r._rg = True
        r.grad_fn = joint if len(results) == 1 else _OutputOf(joint, k, r.shape, r.dtype)



class SpentBackward(Function):
    """The history of a value a compiled call gives back after running ``backward()``
    inside (its loss, ``self.loss = ...``): the value requires grad and is not a leaf, as
    eager mode leaves it, but its graph was used by that backward, so a second backward
    through it raises, as eager mode's does."""

    __slots__ = ()

    def apply(self, g: Any) -> list:
        raise RuntimeError(_FREED_MSG + _SPENT_NOTE)


_SPENT_NOTE = (
    " (This value came out of a compiled function that ran backward() inside it: its graph "
    "ended in that call.)")


def spent_node(shape: tuple, dtype: Any) -> SpentBackward:
    """A freed tape node for a value of ``shape`` and ``dtype`` (`SpentBackward`)."""
    node = SpentBackward.__new__(SpentBackward)
    Node_init = super(Function, node).__init__  # noqa: N806 - the IR Node's __init__
    Node_init("compiled", (), {}, tuple(shape), np.dtype(dtype))
    _tape_state(node, ())
    node._freed = True
    return node
