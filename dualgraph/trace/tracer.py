"""Tracing: run a Python function on tracer tensors and record a `Graph`.

A tracer has the whole eager tensor API (it shares the operator mixin), but ``bind`` in the
tracing mode appends a node of the same registry instead of computing. Eager tensors met
during tracing are lifted: module parameters and tensors that require grad become graph
inputs (so later updates are seen), other tensors and NumPy arrays become ``const`` nodes,
Python scalars stay literals.
"""

from __future__ import annotations

import os
import sys
import types
from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np

from .. import modes
from .._location import PKG, source_line, user_location
from ..dtypes import device
from ..eager.autograd import LeafHooksUnchanged, PostAccumulateHook
from ..eager.grad_mode import GRAD_ENABLED
from ..eager.internal import array_of, leaf_hooks_of, storage_of
from ..eager.tensor import Tensor, data_swap_error
from ..errors import EagerOnlyError, ShapeError, TraceError
from ..ir.graph import Graph, Literal, Node, post_order
from ..modes import Mode
from ..ops.complex import ComplexTensor
from ..ops.complex import unsupported as complex_unsupported
from ..ops.mixin import (
    TensorOps,
    cast_error,
    check_copy_shape,
    check_inplace_shape,
    expanded_write_error,
    leaf_inplace_error,
    shape_of,
    view_leaf_inplace_error,
    writes_expanded,
)
from ..ops.size import Size

# Reads of a tracer's requires_grad from these parts of the package are the trace's own
# bookkeeping (recording ops, differentiating), not a program deciding what to do.
_MACHINERY = tuple(PKG + d + os.sep for d in ("trace", "ops", "compile", "eager", "ir",
                                              "passes", "backend"))

_WAY_OUT = (
    "Use dg.where(cond, a, b) to choose values without Python control flow, or pass the "
    "value as a constant (a Python number) so that it is baked into the graph."
)


TRUTH_VALUE = "the truth value (an `if`, `while`, `and`/`or`, or `assert`)"


def trace_error(what: str, eager_only: bool = False) -> TraceError:
    """The error for a read of a traced value's data (``what``), naming the user's line.
    ``eager_only``: reading the value into Python (``loss.item()`` returned by a training
    step, as torch.compile breaks its graph there) makes ``dg.compile`` run the signature
    eagerly, with a warning, rather than fail; a branch on a value still raises."""
    loc = user_location(3)
    code = source_line(loc)
    where = f"{loc}: " if loc else ""
    shown = f"\n    {code}\n" if code else " "
    return (EagerOnlyError if eager_only else TraceError)(
        f"{where}{what} of a traced value depends on the data, which a static graph cannot "
        f"capture.{shown}{_WAY_OUT}"
    )


def _unsupported(what: str) -> TraceError:
    loc = user_location(3)
    where = f"{loc}: " if loc else ""
    return TraceError(
        f"{where}{what} on a value computed inside a compiled function is not supported: "
        f"return the value from the function and call {what.partition('(')[0]} on the "
        "result, which is a tensor of the caller's tape, or run the function eagerly")


class Tracer(TensorOps):
    """A symbolic tensor: shape and dtype known, value not. Ops on it record graph nodes."""

    # A view (made by a view op) also remembers its base (a tracer or a lifted eager
    # tensor), the view chain from it, and the base's node it was derived from: when the
    # base's node changes (a write to it or through a sibling view), the trace re-derives
    # the view from the new base (`TraceContext.as_node`). That is functionalisation.
    __slots__ = ("node", "_ctx", "_vbase", "_vchain", "_vsrc", "_vgrad")

    def __init__(self, node: Node, ctx: "TraceContext") -> None:
        self.node = node
        self._ctx = ctx
        self._vbase = None

    @property
    def __class__(self) -> type:  # noqa: D105
        # ``isinstance(v, dg.Tensor)`` consults ``__class__`` when the type itself does not
        # match: the user's code (PyTorch programs test ``isinstance(h, torch.Tensor)``)
        # sees a tensor; dualgraph's own code, which tells traced values from eager tensors
        # this way, sees a tracer. Eager tensors never reach this, so eager checks cost
        # nothing more.
        if sys._getframe(1).f_code.co_filename.startswith(PKG):
            return Tracer
        return Tensor

    @property
    def shape(self) -> Size:
        return Size.of(tuple(self.node.shape))

    @property
    def dtype(self) -> np.dtype:
        return self.node.dtype

    @property
    def requires_grad(self) -> bool:
        """Whether the value depends on a differentiated input (as an eager result would)."""
        if not sys._getframe(1).f_code.co_filename.startswith(_MACHINERY):
            self._ctx.rg_read.add(id(self.node))  # the program may branch on it
        return id(self._ctx.as_node(self)) in self._ctx.rg

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        self.requires_grad_(value)

    @property
    def grad(self) -> Any:
        """An argument's ``.grad``: the caller's tensor's, as eager mode would read it (a
        traced value once ``backward()`` ran inside the trace, so ``clip_grad_norm_`` on
        parameters passed as arguments changes the gradient that is written back). Other
        traced values have none."""
        self._ctx.rg_read.add(id(self.node))
        owner = self._argument()
        if owner is None:
            return self._ctx.leaf_grads.get(id(self.node))
        g = owner.grad
        if g is None and all(t is not owner for t in self._ctx.grad_assumed_none):
            # The function branched on it: a call whose argument has a .grad traces again.
            self._ctx.grad_assumed_none.append(owner)
        return g

    @grad.setter
    def grad(self, value: Any) -> None:
        owner = self._argument()
        if owner is None:
            raise TraceError("assigning .grad of a value computed inside a compiled function "
                             "is not supported; assign the .grad of an argument or of a "
                             "captured tensor")
        owner.grad = value

    def _argument(self) -> Any:
        """The caller's tensor this tracer stands for, if it is an argument."""
        tensors = getattr(self._ctx, "arg_tensors", None)
        return None if tensors is None else tensors.get(id(self.node))

    def backward(self, gradient: Any = None, retain_graph: bool | None = None,
                 create_graph: bool = False) -> None:
        """Differentiate inside the traced function: gradients of the leaves (arguments
        and captured tensors that require grad) are traced into the same graph and become
        their ``.grad`` (written back after each compiled call)."""
        if create_graph:
            raise TraceError("backward(create_graph=True) inside a compiled function is not "
                             "supported; run the double backward eagerly")
        self._ctx.backward(self, gradient)

    def __repr__(self) -> str:
        return f"Tracer({self.node.type_str} = {self.node.op})"

    # Everything that would need the value raises a TraceError naming the user's line,
    # except where a compiled call's trace computes it (`TraceContext.truth_value`).
    def __bool__(self) -> bool:
        return self._ctx.truth_value(self)

    # Python's float() and int() take a real float or int: inside a compiled call, that of
    # the read number (`CallTraceContext.read_number`), which the call computes.
    def __float__(self) -> float:
        return float(self._ctx.read_number(self, "float()"))

    def __int__(self) -> int:
        return int(self._ctx.read_number(self, "int()"))

    def __index__(self) -> int:
        raise trace_error("using a tensor as an index")

    def __format__(self, spec: str) -> str:
        # f"{x:.3f}" formats the value; a plain f"{x}" shows the tracer, as print does.
        if spec:
            raise trace_error(f"formatting with {spec!r} (an f-string or format())",
                               eager_only=True)
        return repr(self)

    def item(self) -> Any:
        """Inside a compiled call, a stand-in for the Python number (`symbolic.read_number`):
        computed in the graph and handed out by the call; where Python needs the value
        itself, the call runs eagerly."""
        return self._ctx.read_number(self, ".item()")

    def numpy(self) -> np.ndarray:
        raise trace_error(".numpy()", eager_only=True)

    @property
    def _version(self) -> Any:
        # Eagerly the count of in-place ops so far, which a compiled call advances only
        # when it ends: a value read into Python, so the call runs eagerly.
        raise trace_error("._version (the count of in-place ops)", eager_only=True)

    def tolist(self) -> Any:
        if self.node.shape == ():  # a 0-d tensor's list is its number, as .item()
            return self._ctx.read_number(self, ".tolist()")
        raise trace_error(".tolist()", eager_only=True)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        raise trace_error("passing a tracer to NumPy (call dg.exp etc. instead of np.exp)",
                           eager_only=True)

    # An argument's layout is the caller's tensor's, as eager mode reads it (the entry is
    # guarded on it); a value computed inside is laid out contiguously.
    def stride(self, dim: int | None = None) -> Any:
        arg = self._layout_owner()
        return super().stride(dim) if arg is None else arg.stride(dim)

    def is_contiguous(self, memory_format: Any = None) -> bool:
        arg = self._layout_owner()
        return True if arg is None else arg.is_contiguous()

    def storage_offset(self) -> int:
        arg = self._layout_owner()
        return 0 if arg is None else arg.storage_offset()

    def _layout_owner(self) -> Any:
        read = getattr(self._ctx, "argument_layout", None)
        return None if read is None else read(self)

    def detach(self) -> "Tracer":
        """The value outside autograd: an alias, as eager's ``detach()`` shares memory, so
        an in-place op through either one changes the other too."""
        from ..ops.shape import stop_gradient

        out = stop_gradient(self)
        self._ctx.alias_detached(out, self)
        return out

    def detach_(self) -> "Tracer":
        """This value outside autograd from here on, as eager's ``detach_()``. On an
        argument or a view (whose caller's tensor eager mode would change) it raises
        `EagerOnlyError`, so the call runs eagerly."""
        if self._argument() is not None or self._vbase is not None:
            loc = user_location(2)
            raise EagerOnlyError(
                f"{loc + ': ' if loc else ''}detach_() on an argument of a compiled function "
                "or a view changes the caller's tensor: call detach() instead, or detach_() "
                "outside the function.")
        from ..ops.shape import stop_gradient

        self.node = self._ctx.as_node(stop_gradient(self))
        return self

    @property
    def data(self) -> "Tracer":
        """The value outside autograd, as ``Tensor.data``: a detached alias, so an in-place
        op on it (``p.data.add_(g)``) changes this value too, as it does eagerly."""
        return self.detach()

    @data.setter
    def data(self, value: Any) -> None:
        # ``p.grad.data *= s`` reads the alias, changes it in place (which reaches this
        # value) and assigns it back: nothing is left to do. Any other value would swap the
        # data under the tensor, which the trace does not follow (as eager's setter says).
        same = self._vbase if self._vbase is not None else self
        chain = self._vchain if self._vbase is not None else ()
        if isinstance(value, Tracer) and value._vbase is same and value._vchain == chain:
            return
        raise data_swap_error()

    def clone(self) -> "Tracer":
        """A copy: a new value in the graph (later in-place ops on it leave ``self`` alone)."""
        return self * 1

    # ``x.new_zeros(shape)`` (the SNLI encoder's initial state) and its family: constants
    # of this value's dtype, made exactly as the eager tensor's methods make them.
    new_zeros = Tensor.new_zeros
    new_ones = Tensor.new_ones
    new_full = Tensor.new_full
    new_empty = Tensor.new_empty
    new_tensor = Tensor.new_tensor

    def requires_grad_(self, requires_grad: bool = True) -> "Tracer":
        """A no-op when the value already is (or is not) differentiated. Turning it on for
        a value computed inside the function makes that value a leaf of the trace
        (``t = x.clone().requires_grad_()``): ``dg.grad`` and ``backward()`` differentiate
        the traced graph with respect to it. Turning it on for an argument (whose caller's
        tensor eager mode would change) or off for a differentiated value raises
        `TraceError`."""
        self._ctx.rg_read.add(id(self.node))
        if bool(requires_grad) == self.requires_grad:
            return self
        if requires_grad and self._argument() is None:
            self._ctx.make_leaf(self)
            return self
        what = ("an argument of a compiled function (eager mode would change the caller's "
                "tensor)" if requires_grad else "a value inside a compiled function")
        # Eager mode turns the caller's tensor into a leaf (FGSM's ``data.requires_grad =
        # True``) and leaves its .grad there: the call runs eagerly to do the same.
        raise (EagerOnlyError if requires_grad else TraceError)(
            f"requires_grad_({bool(requires_grad)}) on {what} is not supported: pass a "
            "tensor that requires grad as an argument, make a copy inside the function "
            "(x.clone().requires_grad_()), or run this part eagerly")

    def retain_grad(self) -> None:
        """Refused with `TraceError`: a compiled call hands out no gradient of a value
        inside it."""
        raise _unsupported("retain_grad()")

    def register_hook(self, hook: Any) -> Any:
        """Refused with `TraceError`: a compiled backward runs no Python hook on a value
        inside it."""
        raise _unsupported("register_hook()")

    @property
    def is_leaf(self) -> bool:
        """Whether the value has no history to differentiate through, as eager's
        ``is_leaf``: it does not require grad, or it is an argument, or it was made a leaf
        with ``requires_grad_``."""
        self._ctx.rg_read.add(id(self.node))
        node = self._ctx.as_node(self)
        return (id(node) not in self._ctx.rg or id(node) in self._ctx.leaf_grads
                or self._argument() is not None)


def _reshape_is_view(base_shape: tuple, chain: tuple) -> bool:
    """Whether the last step of ``chain`` (a reshape) gives a view of a C-contiguous base,
    as eager mode finds with real arrays: the steps run on a stand-in with the base's
    strides over one byte of memory, and NumPy is asked to reshape without copying."""
    from ..ops.registry import OPS

    strides, acc = [], 1
    for d in reversed(base_shape):
        strides.append(acc)
        acc *= max(d, 1)
    v = np.lib.stride_tricks.as_strided(np.zeros(1, np.int8), base_shape,
                                        tuple(reversed(strides)), writeable=False)
    for name, attrs in chain[:-1]:
        v = OPS[name].impl(v, **dict(attrs))
    shape = dict(chain[-1][1])["shape"]
    try:
        np.reshape(v, shape, copy=False)
    except TypeError:  # NumPy < 2.1: setting .shape raises instead of copying
        w = v.view()
        try:
            w.shape = shape
        except AttributeError:
            return False
    except ValueError:
        return False
    return True


class TraceContext(Mode):
    """The tracing mode: the graph being recorded (inputs, nodes, and the eager tensors
    lifted into it). ``bind`` appends a node; an in-place op on a tracer or on an eager
    tensor gives it a new node, and a write to an argument or captured tensor becomes an
    output that the compiled call writes back (as eager would have written it)."""

    tracing = True

    def __init__(self, lift_as_input: Callable[[Tensor], bool] | None = None) -> None:
        self.inputs: list[Node] = []
        self.nodes: list[Node] = []
        self.captured: list[tuple[Tensor, Node]] = []
        self._lifted: dict[int, Node] = {}
        self._keep: list[Any] = []  # keeps lifted objects alive so their ids stay unique
        self.active = True
        self._lift_as_input = lift_as_input or _default_lift
        self.rg: set[int] = set()  # nodes that depend on a differentiated leaf
        # Nodes whose requires_grad (or grad, is_leaf) the traced program read: what it
        # does may depend on it.
        self.rg_read: set[int] = set()
        self.no_grad: set[int] = set()  # uids of nodes recorded with grad mode off
        # Ids of recorded values that an in-place op replaced: a backward that reads one
        # would see the old value, where eager (and PyTorch) raise at backward.
        self.overwritten: set[int] = set()
        self.leaves: dict[int, Tensor] = {}  # input node id -> eager tensor requiring grad
        self.writes: dict[int, tuple[Tensor, Node]] = {}  # in-place writes to eager tensors
        # In-place ops per written tensor (by id): the compiled call advances its version
        # counter by as many, as eager mode's ops would one by one.
        self.write_counts: Counter[int] = Counter()
        self.grad_before: dict[int, tuple[Tensor, Any]] = {}  # .grad before the trace wrote it
        self.grad_assumed_none: list[Tensor] = []  # backward() found .grad None on entry
        self.arg_tensors: dict[int, Tensor] = {}  # argument input node id -> caller's tensor
        self.backward_called = False
        # Why the program needed the value of a number it read with ``.item()``
        # (`symbolic.read_number`): errors it may have caught, raised once the trace ends.
        self.read_needs: list = []
        # What the program took from such numbers where Python needed their values (a
        # comparison's outcome, int() of one), computed from the call's inputs: the
        # compiled call's guards (`compile.speculate`).
        self.speculated: list = []
        # Values made leaves inside the trace (``requires_grad_``): node id -> their
        # gradient (None until a backward reaches them), which ``.grad`` reads.
        self.leaf_grads: dict[int, Any] = {}
        # Of those, the ones made from a value computed without grad: their gradient goes
        # no further, as an eager leaf without history.
        self.cut_leaves: set[int] = set()
        # Tensors from outside whose ``requires_grad`` the program changed: id -> (tensor,
        # its flag as the trace began) (`note_requires_grad`).
        self.rg_entry: dict[int, tuple[Tensor, bool]] = {}
        # Leaves that require grad written under no_grad (Embedding's max_norm renorm, an
        # optimizer step): id -> (their new value's node, their input node). Eager mode
        # keeps such a tensor a leaf, so a later differentiable read is the new value with
        # the gradient passed straight to the input (`_straight_read`).
        self._straight: dict[int, tuple[Node, Node]] = {}
        # Each straight read made: id of the written value -> (that value, the read).
        self._straight_reads: dict[int, tuple[Node, Node]] = {}
        self._input_of: dict[int, Node] = {}
        # Eager tensors that are one value (``p.data``, ``p.detach()`` share ``p``'s array
        # and version counter): the first one the trace met stands for the others, so a
        # write through one is read through all (`_one_value`).
        self._storage: dict[tuple[int, int], Tensor] = {}
        # Ids of the tensors factories made while tracing (``acc = zeros(n)``), and the
        # last write to each that was written: id -> (tensor, node). Such a write is not
        # written back unless the tensor outlives the call (`escaped_writes`): a
        # temporary must start from its made value on every call, as eagerly.
        self.made: set[int] = set()
        self.made_writes: dict[int, tuple[Tensor, Node]] = {}
        # Of those, the ones read as they were made: id -> (tensor, its ``const`` node).
        # Made from literals, guarded values or the call's key, each is the same value on
        # every call, so a constant the passes fold with eager's own kernels (bit for bit
        # eager's answer) rather than an input the call passes in.
        self.made_consts: dict[int, tuple[Tensor, Node]] = {}
        # Set while a VJP rule runs: the backward nodes it records carry the user line of
        # the forward op they differentiate, not the line that asked for the gradient.
        self.loc_override: str | None = None

    def new_input(self, shape: tuple, dtype: np.dtype, tensor: Tensor | None = None) -> Tracer:
        node = Node("input", (), {}, tuple(shape), np.dtype(dtype))
        self.inputs.append(node)
        if tensor is not None:
            self.arg_tensors[id(node)] = tensor
        if tensor is not None and tensor.requires_grad:
            self.rg.add(id(node))
            self.leaves[id(node)] = tensor
        return Tracer(node, self)

    def const(self, value: np.ndarray) -> Node:
        key = id(value)
        node = self._lifted.get(key)
        if node is None:
            # A captured NumPy array is a constant snapshotted now (JAX's rule): the kernel
            # never sees a later mutation, whether the array is used directly (``x * arr``)
            # or folded at trace time (``x * (arr + 1)``). docs/tracing.md.
            snapshot = np.array(value, copy=True)
            node = Node("const", (), {"value": snapshot}, snapshot.shape, snapshot.dtype)
            self.nodes.append(node)
            self._lifted[key] = node
            self._keep.append(value)  # keeps id(value) from being reused while tracing
        return node

    def note_made(self, t: Any) -> None:
        self.made.add(id(t))
        self._keep.append(t)

    def escaped_writes(self, out: Any = None) -> None:
        """After the traced function returned: a tensor it made that something outside
        still holds (an optimizer's state dict, a module attribute, a list) is state. Its
        write is written back, and a read of it as made is an input, not a constant: a
        later call may find it changed (``if "buf" not in cache: cache["buf"] = zeros(3)``
        makes it once). One only this trace holds (a temporary, or a value returned, which
        the call returns anew) is neither."""
        if not self.made_writes and not self.made_consts:
            return
        import gc

        mine = {id(self._keep), id(self._storage), id(self.made_writes), id(self.made_consts),
                *map(id, self.made_writes.values()), *map(id, self.made_consts.values()),
                *map(id, self.captured)}
        stack = [out]  # the containers of the function's result
        while stack:
            v = stack.pop()
            if isinstance(v, (tuple, list, dict)) and id(v) not in mine:
                mine.add(id(v))
                stack.extend(v.values() if isinstance(v, dict) else v)
        made = {**{k: t for k, (t, _) in self.made_writes.items()},
                **{k: t for k, (t, _) in self.made_consts.items()}}
        targets = list(made.values())
        mine.update((id(made), id(targets)))
        held: set[int] = set()
        # One scan of the heap for all of them (each `gc.get_referrers` walks it all).
        for r in gc.get_referrers(*targets):
            if id(r) in mine or isinstance(r, (types.FrameType, Tracer)):
                continue  # a tracer's view base is the trace's own reference
            held.update(id(x) for x in gc.get_referents(r) if id(x) in made)
        for key, (t, node) in self.made_writes.items():
            if key in held:
                self.writes[key] = (t, node)
        for key, (t, node) in self.made_consts.items():
            if key in held:
                self._capture_made(t, node)

    def is_traced(self, t: Any) -> bool:
        return isinstance(t, Tracer)

    def constant_value(self, t: Any, limit: int = 256) -> Any:
        """``t``'s value when every node it depends on is a constant (up to ``limit``
        nodes), computed with the ops' NumPy kernels as the constant-folding pass would;
        else None. A tensor made inside the function may escape it and become an input
        (`escaped_writes`), so its value is guarded."""
        from ..ops.registry import OPS

        if not isinstance(t, Tracer) or t._ctx is not self:
            return None
        made = {id(n): m for m, n in self.made_consts.values()}
        order = post_order(
            [self.as_node(t)],
            lambda node, visited: node.op == "input" or visited > limit
            or (node.op != "const" and node.op not in OPS))
        if order is None:
            return None
        env: dict[int, np.ndarray] = {}
        for node in order:
            if node.op == "const":
                env[id(node)] = node.attrs["value"]
                continue
            ins = [env[id(i)] if isinstance(i, Node) else i for i in node.inputs]
            env[id(node)] = np.asarray(OPS[node.op].impl(*ins, **node.attrs))
        for node in order:
            m = made.get(id(node))
            if m is not None:
                value = node.attrs["value"]
                self.guard_value(lambda m=m: array_of(m).tobytes(), value.tobytes(),
                                 "a tensor made inside the function and used as a constant "
                                 "mask changed", m)
        return env[id(order[-1])]

    def _capture_made(self, t: Tensor, node: Node) -> None:
        """Turn the constant of a made tensor that escaped into a captured input, in
        place: the nodes that read it keep reading the same node."""
        node.op = "input"
        node.attrs = {}
        self.nodes.remove(node)
        self.captured.append((t, node))

    def read_data(self, t: Tensor) -> None:
        """``t.item()`` (``float(t)``, ``bool(t)``, ``t.tolist()``) of an eager tensor while
        tracing: the trace bakes the number in, so it is guarded on the tensor's values (a
        captured tensor changed between calls retraces). A tensor made here from numbers
        holds the same values on every call; one written inside the trace holds a traced
        value, which Python cannot read (`TraceError`)."""
        node = self._lifted.get(id(self._storage.get(storage_of(t), t)))
        if node is not None and node.op not in ("const", "input"):
            raise trace_error("reading the values of a tensor written in place inside "
                               "the function")
        if id(t) in self.made:
            return
        self.guard_value(lambda: (array_of(t).dtype, array_of(t).tobytes()),
                         (array_of(t).dtype, array_of(t).tobytes()),
                         "the values of a tensor the function read into Python (item(), "
                         "float(), bool(), tolist()) changed since the trace", t)

    def note_data_alias(self, t: Tensor) -> None:
        """``t.data`` is being made: ``t`` becomes the first tensor met on its array, so
        the alias reads and writes ``t`` (its in-place writes reach later reads of ``t``
        even when the alias is read first, as TransE's renormalisation of
        ``weight.data[:-1]`` before the forward is)."""
        self._one_value(t)

    def note_requires_grad(self, t: Tensor, value: bool) -> None:
        """``t.requires_grad_(value)`` on an eager tensor inside the trace. One the trace
        made is a new leaf of its own. For one from outside (a parameter, a global: a GAN
        step freezing the discriminator for the generator's loss), later reads follow the
        flag as eager's tape does: frozen, a read is a constant for autograd while values
        computed before keep their gradient path; unfrozen, a read is a leaf input of its
        own. The flag at entry is remembered (`rg_entry`): a compiled call is guarded on
        it and sets the flag the trace left (`compile.capture.restore_requires_grad`)."""
        if id(t) in self.made:
            return
        self.rg_entry.setdefault(id(t), (t, t.requires_grad))
        self._keep.append(t)
        self._straight.pop(id(t), None)
        node = self._lifted.get(id(t))
        if node is None:
            return  # read first with the new flag (`lift`)
        if not value:
            if id(node) in self.rg:
                self._lifted[id(t)] = self.process(
                    _stop_gradient_op(), (Tracer(node, self),), {}).node
            return
        if id(t) in self.writes:
            # Written before (an optimizer step): a read is the written value with the
            # gradient passed straight to a leaf input of its own, as after a write under
            # no_grad (`_straight_read`).
            inp = Node("input", (), {}, t.shape, t.dtype)
            self.captured.append((t, inp))
            self.rg.add(id(inp))
            self.leaves[id(inp)] = t
            self._input_of[id(t)] = inp
            self._straight[id(t)] = (node, inp)
            return
        # The flag is set after this returns: the next read lifts ``t`` afresh, as a leaf.
        del self._lifted[id(t)]
        self._input_of.pop(id(t), None)

    def _one_value(self, t: Tensor) -> Tensor:
        """The eager tensor the trace met first that shares ``t``'s array and version
        counter (``t`` itself if none did)."""
        return self._storage.setdefault(storage_of(t), t)

    def truth_value(self, t: Tracer) -> bool:
        """``bool(t)`` (an ``if``, ``while``, ``and``/``or``, ``not``, ``assert``). A plain
        trace has no value to branch on, so it raises naming the line and the way out; a
        compiled call's trace computes the value from the call's inputs."""
        raise trace_error(TRUTH_VALUE)

    def read_number(self, t: Tracer, what: str) -> Any:
        """``t.item()`` (``what``): the number it stands for. A plain trace has no way to
        hand one out, so the read raises; a compiled call's trace reads it as a value the
        call computes."""
        raise trace_error(what, eager_only=True)

    def lift(self, t: Tensor) -> Node:
        if id(t) in self._straight and GRAD_ENABLED.value:
            return self._straight_read(t)
        node = self._lifted.get(id(t))
        if node is not None:
            return node
        first = self._one_value(t)
        # ``p.data`` after ``p``: read as ``p``, without its gradient (a ``p`` that requires
        # grad met after its ``.data`` stays an input of its own).
        if first is not t and (first.requires_grad or not t.requires_grad):
            self._keep.append(t)
            return self.lift(first) if not first.requires_grad else \
                self.process(_stop_gradient_op(), (Tracer(self.lift(first), self),), {}).node
        if id(t) in self.made and not t.requires_grad:
            node = Node("const", (), {"value": np.array(array_of(t), copy=True)}, t.shape,
                        t.dtype)
            self.nodes.append(node)
            self.made_consts[id(t)] = (t, node)
        elif self._lift_as_input(t) or id(t) in self.rg_entry:
            # (One whose flag the call changes is a value it reads on every call, not a
            # constant, whatever its flag is now.)
            node = Node("input", (), {}, t.shape, t.dtype)
            self.captured.append((t, node))
            if t.requires_grad:
                self.rg.add(id(node))
                self.leaves[id(node)] = t
                self._input_of[id(t)] = node
        else:
            node = Node("const", (), {"value": array_of(t)}, t.shape, t.dtype)
            self.nodes.append(node)
        self._lifted[id(t)] = node
        self._keep.append(t)
        return node

    def _straight_read(self, t: Tensor) -> Node:
        """A differentiable read of leaf ``t`` after a write under no_grad: the new value
        plus ``input - stop_gradient(input)``, so the gradient reaches ``t``'s input node,
        as it reaches the leaf in eager mode. The added term is zero only for a finite
        input, so once the graph is differentiated the read is replaced by the written
        value itself (`written_values`), which eager mode reads."""
        new, inp = self._straight[id(t)]
        made = self._straight_reads.get(id(new))
        if made is not None:
            return made[1]
        from ..ops.registry import OPS

        x = Tracer(inp, self)
        zero = self.process(OPS["sub"], (x, self.process(OPS["stop_gradient"], (x,), {})), {})
        read = self.process(OPS["add"], (Tracer(new, self), zero), {}).node
        self._straight_reads[id(new)] = (new, read)
        self._keep.append(new)
        return read

    def written_values(self) -> dict[int, Node]:
        """Id of each straight read (`_straight_read`) -> the written value it reads: what
        the read stands for once the graph has been differentiated."""
        return {id(read): new for new, read in self._straight_reads.values()}

    def as_node(self, a: Any) -> Any:
        if isinstance(a, Tracer):
            if a._ctx is not self:
                raise TraceError(
                    "a tracer from another (finished) trace was used here: it escaped the "
                    "function it was traced in. Return values from the traced function "
                    "instead of storing tracers."
                )
            if a._vbase is not None:
                self._refresh_view(a)
            return a.node
        if isinstance(a, Literal):
            return a
        if isinstance(a, Tensor):
            return self.lift(a)
        if isinstance(a, (np.ndarray, np.generic)):
            return self.const(np.asarray(a))
        # A number that is a runtime input of the call (an optimizer hyperparameter read
        # from a parameter group) turns itself into one.
        trace_value = getattr(a, "trace_value", None)
        if trace_value is not None:
            return self.as_node(trace_value())
        if isinstance(a, ComplexTensor):
            raise complex_unsupported()
        raise TypeError(f"expected a tensor, NumPy array or Python number, got {type(a).__name__}")

    def process(self, op: Any, args: tuple, attrs: dict) -> Tracer:
        ins = tuple(self.as_node(a) for a in args)
        for i, a in enumerate(args):
            # A number that is a runtime input may refuse some operands, or enter the op
            # converted to their dtype, as a Python number does (`operands_met`).
            met = getattr(type(a), "operands_met", None)
            if met is not None:
                dtype = met(a, ins)
                if dtype is not None:
                    ins = (*ins[:i], self.as_node(a.trace_value().to(dtype)), *ins[i + 1:])
        try:
            shape, dtype = op.infer(*ins, **attrs)
        except ValueError as e:
            loc = user_location(3)
            cls = ShapeError if isinstance(e, ShapeError) else ValueError  # keep the type
            raise cls(f"{e} (at {loc})" if loc else str(e)) from None
        dtype = np.dtype(dtype)
        if op.elementwise and dtype.kind in "iu":
            _check_int_literals(op, ins, attrs, dtype)
        elif op.elementwise and dtype.kind == "b":
            ins = _wide_int_literals(ins)
        node = Node(op.name, ins, attrs, tuple(shape), dtype,
                    self.loc_override or user_location(3))
        self.nodes.append(node)
        if not GRAD_ENABLED.value:
            self.no_grad.add(node.uid)
        elif op.differentiable and any(isinstance(i, Node) and id(i) in self.rg for i in ins):
            self.rg.add(id(node))
        out = Tracer(node, self)
        if op.view and isinstance(args[0], (Tracer, Tensor)):
            self._track_view(out, op, args[0], attrs)
        return out

    # --------------------------------------------------------------- views (aliases)
    def _track_view(self, out: Tracer, op: Any, src: Any, attrs: dict) -> None:
        from ..ops.shape import view_step

        step = view_step(op, attrs)
        if isinstance(src, Tracer) and src._vbase is not None:
            base, chain = src._vbase, src._vchain + (step,)
        else:
            base, chain = src, (step,)
        if op.view_may_copy and not _reshape_is_view(tuple(base.shape), chain):
            return  # eager reshape copies here (NumPy could not view): a new value
        out._vbase, out._vchain = base, chain
        out._vsrc = self.as_node(out._vbase)
        out._vgrad = GRAD_ENABLED.value

    def alias_detached(self, out: Tracer, src: Tracer) -> None:
        """Make ``out`` (``src`` detached) an alias of ``src``: writes through it reach
        ``src``'s base; re-read after a change of the base, it stays detached (its
        ``_vgrad`` is None)."""
        if src._vbase is not None:
            self.as_node(src)
            out._vbase, out._vchain = src._vbase, src._vchain
        else:
            out._vbase, out._vchain = src, ()
        out._vsrc = self.as_node(out._vbase)
        out._vgrad = None

    def tie(self, t: Any, holder: Tensor) -> bool:
        """Make traced value ``t`` an alias of the eager tensor ``holder`` just written
        with it (an optimizer's state entry standing for ``t``): a later in-place op on
        either reaches the other, as on the one tensor eager mode stores. False (nothing
        done) when ``t`` is a view already or differentiated."""
        if not isinstance(t, Tracer) or t._ctx is not self or t._vbase is not None:
            return False
        node = self.as_node(t)
        if id(node) in self.rg or self.as_node(holder) is not node:
            return False
        t._vbase, t._vchain, t._vsrc, t._vgrad = holder, (), node, False
        return True

    def _refresh_view(self, v: Tracer) -> None:
        """Re-derive view ``v`` from its base's current node if that changed since."""
        cur = self.as_node(v._vbase)
        if cur is v._vsrc:
            return
        from ..ops.registry import OPS

        prev = GRAD_ENABLED.value
        GRAD_ENABLED.value = bool(v._vgrad)
        try:
            # process, not bind: outputs are resolved after the trace's mode is popped.
            fresh = Tracer(cur, self)
            for name, attrs in v._vchain:
                fresh = self.process(OPS[name], (fresh,), dict(attrs))
            if v._vgrad is None:  # a detached alias (``.data``)
                fresh = self.process(OPS["stop_gradient"], (fresh,), {})
        finally:
            GRAD_ENABLED.value = prev
        v.node, v._vsrc = fresh.node, cur

    # ------------------------------------------------- state changes while tracing
    def inplace(self, t: Any, op: Any, other: Any) -> Any:
        if isinstance(t, Tracer):
            self.as_node(t)  # raises for a tracer of another (finished) trace
        if self._is_grad_leaf(t):
            raise leaf_inplace_error()
        if isinstance(t, Tracer) and t._vbase is not None and self._is_grad_leaf(t._vbase):
            if t._vgrad is None:
                # ``x.data.mul_(2)`` on an argument that requires grad: eagerly the leaf
                # keeps its gradient and takes the new values, which a write in the graph
                # (a new, detached value) cannot give.
                loc = user_location(3)
                raise EagerOnlyError(
                    f"{loc + ': ' if loc else ''}an in-place op through the .data of an "
                    "argument that requires grad. Change it outside the compiled function "
                    "(with dg.no_grad(): x.mul_(2)), or pass it as a captured parameter.")
            raise view_leaf_inplace_error()
        self._check_not_rebased(t)
        if op is None:
            return self.write(t, self._copy_source(t, other))
        check_inplace_shape(op.name, tuple(t.shape), shape_of(other))
        return self.write(t, self.process(op, (t, other), {}), op)

    def _is_grad_leaf(self, t: Any) -> bool:
        """A leaf that requires grad: an argument's or captured tensor's current value."""
        if not GRAD_ENABLED.value:
            return False
        if isinstance(t, Tracer):
            t = self.arg_tensors.get(id(t.node))
            return t is not None and t.requires_grad and t.grad_fn is None
        return t.requires_grad and t.grad_fn is None

    def _check_not_rebased(self, t: Any) -> None:
        """An in-place op on an argument (or a view of one) that requires grad and is not a
        leaf: eager mode rebases the argument's autograd history onto the op, so a later
        backward through it sees the change. The compiled call would write the new data
        but keep the old history, a silently wrong gradient: refuse (`EagerOnlyError`)."""
        if not GRAD_ENABLED.value or not isinstance(t, Tracer):
            return
        arg = self.arg_tensors.get(id(t.node))
        if arg is None and isinstance(t._vbase, Tracer):
            arg = self.arg_tensors.get(id(t._vbase.node))
        if arg is None or not arg.requires_grad or arg.grad_fn is None:
            return
        loc = user_location(3)
        code = source_line(loc)
        raise EagerOnlyError(
            f"{loc + ': ' if loc else ''}an in-place op on an argument of shape {tuple(arg.shape)} "
            f"that requires grad and is not a leaf (its grad_fn is {arg.grad_fn.name()})"
            f"{': ' + code if code else ''}. Eager mode moves the argument's autograd "
            "history onto the in-place op; a compiled call cannot yet. Change a copy inside "
            "the function (h = h * 1), or pass a leaf.")

    def _copy_source(self, t: Any, src: Any) -> Tracer:
        """``src`` as the value ``t.copy_(src)`` (``t.fill_(src)`` for a number) gives."""
        from ..ops.shape import broadcast_to

        shape = tuple(t.shape)
        if isinstance(src, Literal):
            return Tracer(self.const(np.full(shape, src, t.dtype)), self)
        src = src if isinstance(src, Tracer) else Tracer(self.as_node(src), self)
        check_copy_shape(shape, tuple(src.shape))
        return broadcast_to(src, shape) if tuple(src.shape) != shape else src

    def write(self, t: Any, value: Any, op: Any = None) -> Any:
        """Record ``t``'s value := ``value``: later reads in the trace see the new node,
        and a write to an argument or an eager tensor is written back by the compiled
        call (where a write through a view would become a scatter into its base)."""
        name = op.name if op is not None else "copy_"
        node = self.as_node(value)
        if tuple(node.shape) != tuple(t.shape):
            check_inplace_shape(name, tuple(t.shape), tuple(node.shape))
        if node.dtype != t.dtype:
            if op is not None and not np.can_cast(node.dtype, t.dtype, casting="same_kind"):
                raise cast_error(name, node.dtype, t.dtype)
            node = self.process(_astype_op(), (Tracer(node, self),), {"dtype": t.dtype}).node
        if isinstance(t, Tracer) and t._vbase is not None:
            # Functionalised: the base becomes a scatter of the value into it; every alias
            # (this view included) is re-derived from the new base when next read.
            from ..ops.gather import VIEW_SCATTER

            if writes_expanded(t._vchain):
                raise expanded_write_error(name)
            base = t._vbase
            if t._vgrad is None and id(self.as_node(base)) in self.rg:
                # Eagerly, a write through ``.data`` keeps the value's autograd history;
                # here the base would become the detached value, dropping its gradient.
                loc = user_location(3)
                raise EagerOnlyError(
                    f"{loc + ': ' if loc else ''}an in-place {name} through the .data of a "
                    "value that requires grad inside a compiled function. Write to the "
                    "value itself under torch.no_grad(), or run this part eagerly.")
            new = self.process(VIEW_SCATTER, (base, Tracer(node, self)), {"chain": t._vchain})
            self.write(base, new)
            return t
        if isinstance(t, Tracer):
            if node is t.node:  # t.copy_(t): still a new value, written back as one
                node = self.process(_mul_op(), (t, 1), {}).node
            owner = self.arg_tensors.get(id(t.node))
            if owner is not None:
                self.arg_tensors[id(node)] = owner
                self.writes[id(owner)] = (owner, node)
                self.write_counts[id(owner)] += 1
                self._keep.append(owner)
            if id(t.node) in self.rg:
                self.overwritten.add(id(t.node))
            t.node = node
            return t
        first = self._one_value(t)
        through = first is not t  # a write through ``p.data``: a write to ``p``
        written = t
        if through:
            self._keep.append(t)
            t = first
        if id(t) in self.made and not t.requires_grad:  # made inside (`made_writes`)
            self.made_writes[id(t)] = (t, node)
            self.write_counts[id(t)] += 1
            self._lifted[id(t)] = node
            return written
        if (through or not GRAD_ENABLED.value) and t.requires_grad and t.grad_fn is None:
            if id(t) not in self._lifted:
                self.lift(t)
            inp = self._input_of.get(id(t))
            if inp is not None:
                self._straight[id(t)] = (node, inp)
        self.writes[id(t)] = (t, node)
        self.write_counts[id(t)] += 1
        self._lifted[id(t)] = node
        self._keep.append(t)
        return written

    def note_grad_write(self, t: Tensor) -> None:
        """Remember ``t.grad`` as it was when the trace began, before its first change."""
        if id(t) not in self.grad_before:
            self.grad_before[id(t)] = (t, t.grad)
            self._keep.append(t)

    def make_leaf(self, t: Tracer) -> None:
        """``t.requires_grad_()`` on a computed value that does not require grad: its node
        becomes a leaf that gradients are taken with respect to."""
        node = self.as_node(t)
        if id(node) not in self.rg:
            self.cut_leaves.add(id(node))
        self.rg.add(id(node))
        self.leaf_grads[id(node)] = None
        self._keep.append(node)

    def _seed(self, root: Any, gradient: Any, k: int = 0) -> tuple[Node, Tracer]:
        """The root's node and its incoming gradient (ones for a one-element root)."""
        node = self.as_node(root)
        if id(node) not in self.rg:
            raise RuntimeError(f"element {k} of tensors does not require grad and does not "
                               "have a grad_fn")
        if gradient is None:
            if tuple(node.shape) not in ((), (1,)):
                raise RuntimeError("grad can be implicitly created only for scalar outputs "
                                   f"(got shape {tuple(node.shape)}); pass gradient=")
            return node, Tracer(self.const(np.ones(node.shape, node.dtype)), self)
        return node, gradient if isinstance(gradient, Tracer) else Tracer(
            self.as_node(gradient), self)

    def grad(self, outputs: Any, inputs: Any, grad_outputs: Any = None,
             create_graph: bool = False, allow_unused: bool = False) -> tuple:
        """``dg.grad`` inside the trace: the gradients of ``outputs`` with respect to
        ``inputs`` (arguments, captured tensors or values computed in the function), traced
        into the same graph. With ``create_graph=True`` the gradient nodes are
        differentiable themselves, so a later ``backward()`` goes through them."""
        from .autodiff import reverse_accumulate

        # any iterable of tensors, as eagerly: ``model.parameters()`` is a generator
        outputs = [outputs] if isinstance(outputs, (Tracer, Tensor)) else list(outputs)
        inputs = [inputs] if isinstance(inputs, (Tracer, Tensor)) else list(inputs)
        if grad_outputs is None or not isinstance(grad_outputs, (list, tuple)):
            grad_outputs = [grad_outputs] * len(outputs)
        targets = []
        for x in inputs:
            if not isinstance(x, (Tracer, Tensor)) or id(self.as_node(x)) not in self.rg:
                raise RuntimeError("One of the differentiated Tensors does not require grad")
            targets.append(self.as_node(x))
        ct: dict[int, Any] = {}
        for k, (o, g) in enumerate(zip(outputs, grad_outputs)):
            node, seed = self._seed(o, g, k)
            ct[id(node)] = seed if id(node) not in ct else ct[id(node)] + seed
        keep: dict[int, Any] = {id(n): None for n in targets}
        prev = GRAD_ENABLED.value
        GRAD_ENABLED.value = bool(create_graph) and prev
        try:
            ct = reverse_accumulate(list(self.nodes), self.rg, ct, lambda n: Tracer(n, self),
                                    keep)
        finally:
            GRAD_ENABLED.value = prev
        result = []
        for n in targets:
            g = keep[id(n)] if keep[id(n)] is not None else ct.get(id(n))
            if g is None and not allow_unused:
                raise RuntimeError("One of the differentiated Tensors appears to not have "
                                   "been used in the graph. Set allow_unused=True if this is "
                                   "the desired behavior.")
            result.append(None if g is None else Tracer(self.as_node(g), self))
        return tuple(result)

    def backward(self, root: Tracer, gradient: Any) -> None:
        from .autodiff import reverse_accumulate

        node, seed = self._seed(root, gradient)
        keep: dict[int, Any] = dict.fromkeys(self.leaf_grads)
        prev = GRAD_ENABLED.value
        GRAD_ENABLED.value = False  # the backward pass itself is not differentiated
        try:
            ct = reverse_accumulate(list(self.nodes), self.rg, {id(node): seed},
                                    lambda n: Tracer(n, self), keep)
            for nid, g in keep.items():
                if g is not None:
                    old = self.leaf_grads[nid]
                    self.leaf_grads[nid] = Tracer(self.as_node(g), self) if old is None else \
                        Tracer(self.process(_add_op(), (old, g), {}).node, self)
            hooked = []
            for nid, t in self.leaves.items():
                g = ct.get(nid)
                if g is None:
                    continue
                hooks = leaf_hooks_of(t)
                if hooks:
                    # The leaf's gradient hooks run on the traced gradient, as the eager
                    # engine runs them; the trace holds while they stay the same.
                    hooked.append((t, hooks))
                    g = self._run_leaf_hooks(hooks, Tracer(self.as_node(g), self))
                if id(t) not in self.grad_before and t.grad is None:
                    # The graph assigns instead of accumulating: valid only while the
                    # tensor enters the call with no gradient (a guard of the compiled call).
                    self.grad_assumed_none.append(t)
                # A tracer of its own: two leaves can get the same gradient value (the two
                # inputs of an add), and an in-place op on one's .grad (clip_grad_norm_'s
                # mul_) must not change the other's, as in eager mode.
                t.grad = Tracer(self.as_node(g), self) if t.grad is None else Tracer(
                    self.process(_add_op(), (t.grad, g), {}).node, self)
            for t, hooks in hooked:
                for h in hooks:
                    if type(h) is PostAccumulateHook:
                        h.fn(t)
        finally:
            GRAD_ENABLED.value = prev
        self.backward_called = True
        check = LeafHooksUnchanged(list(self.leaves.values()))
        self.guard_value(check, True, "a gradient hook of a leaf the step differentiates was "
                         "registered or removed", keep=check)

    def _run_leaf_hooks(self, hooks: list, g: Tracer) -> Tracer:
        """``g`` through a leaf's gradient hooks, in order (a result replaces it)."""
        for h in hooks:
            if type(h) is PostAccumulateHook:
                continue
            r = h(g)
            if r is None:
                continue
            if not isinstance(r, Tracer) or tuple(r.shape) != tuple(g.shape) or \
                    r.dtype != g.dtype:
                name = getattr(h, "__name__", type(h).__name__)
                raise RuntimeError(f"hook '{name}' returned {type(r).__name__} of another "
                                   "type or size than the gradient; expected a tensor like it "
                                   "or None")
            g = r
        return g

    def __enter__(self) -> "TraceContext":
        modes.push_mode(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        modes.pop_mode()
        self.active = False


def _check_int_literals(op: Any, ins: tuple, attrs: dict, dtype: np.dtype) -> None:
    """A Python int operand out of an integer result's range raises where eager mode's NumPy
    kernel raises (``int32 + 2**40``; ``where`` wraps), where a literal in the graph would
    wrap: the kernel is run on one element of each input's dtype to tell."""
    info = np.iinfo(dtype)
    if not any(type(a) is int and not info.min <= a <= info.max for a in ins):
        return
    sample = [a if type(a) in (int, float, bool) else np.ones((), a.dtype) for a in ins]
    try:
        with np.errstate(all="ignore"):
            op.impl(*sample, **attrs)
    except (OverflowError, ValueError, TypeError) as e:
        raise RuntimeError(f"{op.name}: {e}") from e


def _wide_int_literals(ins: tuple) -> tuple:
    """``ins`` with an int literal beyond the range of a narrow integer operand as a float:
    eager mode's NumPy kernel compares ``uint8 > 300`` by value, where a kernel would cast
    the literal to the operand's dtype and wrap it. The float is exact enough: it stays
    beyond the range, on the same side."""
    narrow = [np.iinfo(n.dtype) for n in ins
              if isinstance(n, Node) and n.dtype.kind in "iu" and n.dtype.itemsize <= 4]
    if not narrow:
        return ins
    return tuple(float(a) if type(a) is int and any(not i.min <= a <= i.max for i in narrow)
                 else a for a in ins)


def _astype_op() -> Any:
    from ..ops.registry import OPS

    return OPS["astype"]


def _stop_gradient_op() -> Any:
    from ..ops.registry import OPS

    return OPS["stop_gradient"]


def _mul_op() -> Any:
    from ..ops.registry import OPS

    return OPS["mul"]


def _add_op() -> Any:
    from ..ops.registry import OPS

    return OPS["add"]


def _default_lift(t: Tensor) -> bool:
    from ..nn.modules import Parameter

    return isinstance(t, Parameter) or t.requires_grad


def _example_input(ctx: TraceContext, a: Any, i: int) -> Any:
    if isinstance(a, Tensor):
        return ctx.new_input(a.shape, a.dtype, a)
    if isinstance(a, (np.ndarray, np.generic)):
        a = np.asarray(a)
        return ctx.new_input(a.shape, a.dtype)
    if isinstance(a, Literal) or a is None:
        return a
    raise TypeError(
        f"trace: argument {i} is a {type(a).__name__}; example arguments must be tensors, "
        "NumPy arrays or Python scalars (scalars are baked into the graph as constants)"
    )


class OutputConstant:
    """A returned value that is not a tensor (``None``, a number, a string, a dtype, a
    NumPy array made from constants): fixed by the trace, given back by every call; an
    array as a fresh copy, as every eager call makes a new one."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value.copy() if isinstance(value, np.ndarray) else value

    def given(self) -> Any:
        v = self.value
        return v.copy() if isinstance(v, np.ndarray) else v


# The values a traced function may return beside tensors.
_CONSTANT_OUTPUTS = (type(None), bool, int, float, complex, str, bytes, np.ndarray,
                     np.generic, np.dtype, device)


class OutputNumber:
    """A returned Python number read from a traced value (``loss.item()``): a graph
    output, given back as the number (``kind``: float or int) its 0-d array holds."""

    __slots__ = ("kind",)

    def __init__(self, kind: type) -> None:
        self.kind = kind

    def given(self, t: Any) -> Any:
        return self.kind(array_of(t).item())


class OutputTree:
    """How a traced function's outputs nest, when they are more than one flat tuple:
    nested tuples and lists, named tuples (``x.max(dim=1)``), dicts. Falsy, like
    ``single=False``, for code that only asks whether the output is one tensor."""

    __slots__ = ("kind", "children", "keys")

    def __init__(self, kind: type, children: list, keys: list | None = None) -> None:
        self.kind = kind
        self.children = children  # per item: None (a tensor) or a nested OutputTree
        self.keys = keys  # a dict's keys, in order

    def __bool__(self) -> bool:
        return False

    def unflatten(self, flat: list) -> Any:
        """The flat results, nested as the traced function returned them."""
        return self._build(iter(flat))

    def _build(self, it: Any) -> Any:
        vals = [next(it) if c is None else c.given() if isinstance(c, OutputConstant)
                else c.given(next(it)) if isinstance(c, OutputNumber)
                else c._build(it) for c in self.children]
        if self.kind is object:  # one value that is not a container: a constant
            return vals[0]
        if self.kind is ComplexTensor:  # its real storage, or its two parts
            return ComplexTensor(*vals) if len(vals) == 1 else ComplexTensor(None, *vals)
        if self.kind is list:
            return vals
        if self.keys is not None:
            return self.kind(zip(self.keys, vals))
        if hasattr(self.kind, "_fields"):  # a named tuple
            return self.kind(*vals)
        return tuple(vals) if self.kind is tuple else self.kind(vals)  # ``Size``


def _read_number(v: Any, ctx: TraceContext) -> OutputNumber | None:
    """How a returned ``v`` is handed out when it is a number this trace read from a
    traced value (`symbolic.read_number`), else None."""
    kind = getattr(type(v), "read_kind", None)
    if kind is None or v.trace_value()._ctx is not ctx:
        return None
    return OutputNumber(kind)


def flatten_outputs(out: Any) -> list:
    """The tensors of a (possibly nested) tuple/list output, in order."""
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in flatten_outputs(o)]
    if isinstance(out, dict):
        return [t for o in out.values() for t in flatten_outputs(o)]
    if isinstance(out, ComplexTensor):
        return list(_complex_fields(out))
    return [out]


def _complex_fields(z: ComplexTensor) -> tuple:
    """The real values a complex output is: its storage, or its two parts (stacking them
    would be an op, and the trace has ended when its outputs are read)."""
    return (z._ri,) if z._ri is not None else (z._re, z._im)


def graph_outputs(ctx: TraceContext, out: Any, fn: Callable,
                  constants: bool = False) -> tuple[list[Node], Any]:
    """The output nodes, and ``single``: True for one tensor, False for a flat tuple, an
    `OutputTree` for nested or named tuples and lists. With ``constants`` (a compiled
    call), ``None``, numbers, strings, dtypes and arrays may be returned too
    (`OutputConstant`)."""
    kept = _CONSTANT_OUTPUTS if constants else ()
    name = getattr(fn, "__name__", type(fn).__name__)
    single: Any = not isinstance(out, (tuple, list, dict, ComplexTensor))
    items: list = []

    def walk(o: Any) -> OutputTree | OutputConstant | OutputNumber | None:
        number = _read_number(o, ctx) if constants else None
        if number is not None:
            items.append(o.trace_value())
            return number
        if isinstance(o, (tuple, list)):
            return OutputTree(type(o), [walk(x) for x in o])
        if isinstance(o, dict):
            return OutputTree(type(o), [walk(x) for x in o.values()], list(o))
        if isinstance(o, ComplexTensor):
            return OutputTree(ComplexTensor, [walk(x) for x in _complex_fields(o)])
        if isinstance(o, kept):
            return OutputConstant(o)
        items.append(o)
        return None

    if not single:
        tree = walk(out)
        if type(out) is not tuple or any(c is not None for c in tree.children):
            single = tree
    elif constants and _read_number(out, ctx) is not None:
        single = OutputTree(object, [walk(out)])
    elif isinstance(out, kept):
        # A training step that returns nothing: the call gives back None, as eagerly.
        single = OutputTree(object, [OutputConstant(out)])
    else:
        items = [out]
    if not items and not constants:
        raise TraceError(f"trace: {name} returned an empty {type(out).__name__}")
    nodes = []
    for k, o in enumerate(items):
        if isinstance(o, Tracer):
            nodes.append(ctx.as_node(o))
        elif isinstance(o, Tensor):
            nodes.append(ctx.lift(o))
        else:
            what = "nothing (None)" if o is None else f"a {type(o).__name__}"
            raise TraceError(
                f"trace: {name} returned {what}"
                + (f" as output {k}" if single is not True else "")
                + "; a traced function must return a tensor or a (nested) tuple of tensors"
            )
    return nodes, single


def trace(fn: Callable, *example_args: Any) -> Graph:
    """Run ``fn`` on tracers shaped like ``example_args`` and return the forward `Graph`.

    Tensors and arrays become graph inputs; Python scalars are baked in as literals.
    Module parameters (and other tensors that require grad) the function uses become extra
    inputs after the arguments (``graph.captured`` lists them); other tensors are ``const``.

    >>> g = dg.trace(lambda x, y: x * y + y ** 2, dg.tensor(2.0), dg.tensor(3.0))
    >>> [n.op for n in g.nodes]
    ['mul', 'pow', 'add']
    """
    ctx = TraceContext()
    args = [_example_input(ctx, a, i) for i, a in enumerate(example_args)]
    with ctx:
        out = fn(*args)
    outputs, single = graph_outputs(ctx, out, fn)
    return Graph(ctx.inputs + [n for _, n in ctx.captured], ctx.nodes, outputs,
                 captured=[t for t, _ in ctx.captured], n_args=len(ctx.inputs),
                 single_output=single, no_grad=ctx.no_grad)
