"""``dg.autograd.Function``: an op with a user-written forward and backward, as PyTorch's.

``apply`` runs the user's ``forward`` with gradients off and records one ``custom_function``
node (`dualgraph.ops.custom`) whose gradient rule is the user's ``backward``. The node is
an ordinary op to every mode: eagerly it is a tape node named ``<Name>Backward``; under
`dg.compile` the forward is traced like any code, and graph autodiff calls the backward with
traced gradients and saved values, so it becomes part of the compiled backward graph.

>>> class Square(dg.autograd.Function):
...     @staticmethod
...     def forward(ctx, x):
...         ctx.save_for_backward(x)
...         return x * x
...     @staticmethod
...     def backward(ctx, g):
...         (x,) = ctx.saved_tensors
...         return 2 * x * g
>>> y = Square.apply(x)          # y.grad_fn.name() == "SquareBackward"
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from ..eager.creation import zeros
from ..eager.grad_mode import GRAD_ENABLED, no_grad
from ..eager.internal import version_of
from ..eager.saved_hooks import STACK as SAVED_HOOKS
from ..eager.saved_hooks import pack_value, unpacked
from ..eager.tensor import Tensor
from ..modes import current_trace
from ..ops.custom import custom_function, pack, unpack
from ..ops.mixin import TensorOps

__all__ = ["Function", "FunctionCtx", "once_differentiable"]



def _inputs_before(args: tuple, needs: tuple) -> list:
    """``args`` with each traced value that needs a gradient held as its value now (a new
    `Tracer` of the same node, which a later in-place write to the argument leaves as it
    is); eager tensors keep their history through in-place writes themselves."""
    if current_trace() is None:
        return list(args)
    from ..trace.tracer import Tracer

    return [Tracer(a.node, a._ctx) if need and isinstance(a, Tracer) and a._vbase is None
            else a for a, need in zip(args, needs)]

class FunctionCtx:
    """The ``ctx`` a `Function`'s ``forward`` and ``backward`` receive.

    ``save_for_backward(*tensors)`` keeps tensors for ``backward`` (read back as
    ``saved_tensors``); ``needs_input_grad`` says, per ``forward`` argument, whether it
    wants a gradient; ``mark_non_differentiable(*outputs)`` marks outputs (an index, a
    mask) that get no gradient. Other attributes (``ctx.scale = 2``) are the user's.
    """

    def __init__(self) -> None:
        self.needs_input_grad: tuple = ()
        self.materialize_grads = True
        self.to_save: tuple = ()
        self.non_differentiable: tuple = ()
        self.saved_values: list | None = None  # what backward reads (set by the engine)

    def save_for_backward(self, *tensors: Any) -> None:
        for t in tensors:
            if t is not None and not isinstance(t, TensorOps):
                raise TypeError("save_for_backward can only save tensors (or None), but got "
                                f"{type(t).__name__}")
        self.to_save = tensors

    @property
    def saved_tensors(self) -> tuple:
        """The tensors given to ``save_for_backward`` (in ``backward``)."""
        if self.saved_values is None:
            return tuple(self.to_save)
        return tuple(self.saved_values)

    def mark_non_differentiable(self, *outputs: Any) -> None:
        self.non_differentiable = outputs

    def set_materialize_grads(self, value: bool) -> None:
        """With ``False``, ``backward`` receives ``None`` instead of zeros for an output
        that got no gradient."""
        self.materialize_grads = bool(value)

    def mark_dirty(self, *tensors: Any) -> None:
        raise NotImplementedError(
            "mark_dirty (a Function that changes its inputs in place) is not supported: "
            "return a new tensor from forward instead")


def once_differentiable(fn: Callable) -> Callable:
    """Decorate a ``backward`` that is not itself differentiable: it runs with gradients
    off (a ``create_graph=True`` backward records nothing through it)."""

    @functools.wraps(fn)
    def wrapper(ctx: Any, *args: Any) -> Any:
        with no_grad():
            return fn(ctx, *args)

    return wrapper


class _Call:
    """One ``apply``: what the ``custom_function`` node's gradient rule needs. The node's
    inputs are the packed differentiable outputs, then the arguments that want gradients
    (at ``grad_args`` positions of ``forward``'s arguments), then the saved tensors."""

    def __init__(self, cls: type, ctx: FunctionCtx, n_args: int, grad_args: list,
                 saved: list, outs: list, diff: list) -> None:
        self.cls = cls
        self.ctx = ctx
        self.n_args = n_args
        self.grad_args = grad_args
        self.saved = saved  # the values given to save_for_backward, None kept
        self.outs = outs  # per output: (shape, dtype), None for a non-tensor
        self.diff = diff  # indices of the differentiable outputs, in packing order
        # Eager saved tensors and their versions, checked before backward (in-place
        # changes after saving would give a wrong gradient).
        self.versions = [version_of(t) if isinstance(t, Tensor) else None for t in saved]

    @property
    def node_name(self) -> str:
        return f"{self.cls.__name__}Backward"

    def __repr__(self) -> str:
        return self.cls.__name__

    def __reduce__(self) -> tuple:
        # A compiled graph is pickled for the compile worker, which only lowers the node
        # (an identity) and never needs the user's Python objects.
        return (_Lowered, (self.node_name,))

    def vjp(self, node_ctx: Any, g: Any) -> tuple:
        n_grad = len(self.grad_args)
        args = node_ctx.args
        saved_nodes = [s for s in self.saved if s is not None]
        first = 1 + n_grad
        values = []
        for j, s in enumerate(saved_nodes):
            v = args[first + j]
            values.append(unpacked(s) if v is None else v)  # eager: the saved tensor
        self._check_versions()
        it = iter(values)
        self.ctx.saved_values = [None if s is None else next(it) for s in self.saved]
        grads_out = self._output_grads(g)
        try:
            result = self.cls.backward(self.ctx, *grads_out)
        finally:
            self.ctx.saved_values = None
        if not isinstance(result, tuple):
            result = (result,)
        if len(result) < self.n_args or any(r is not None for r in result[self.n_args:]):
            raise RuntimeError(
                f"function {self.node_name} returned an incorrect number of gradients "
                f"(expected {self.n_args}, got {len(result)})")
        grads = [None]
        for k, pos in enumerate(self.grad_args):
            gi = result[pos]
            if gi is not None:
                want = tuple(node_ctx.inputs[1 + k].shape)
                if not isinstance(gi, TensorOps):
                    raise TypeError(f"function {self.node_name} returned a gradient of type "
                                    f"{type(gi).__name__} at index {pos}; expected a Tensor")
                if tuple(gi.shape) != want and _broadcast(want, tuple(gi.shape)) != tuple(
                        gi.shape):
                    raise RuntimeError(
                        f"function {self.node_name} returned an invalid gradient at index "
                        f"{pos} - got {list(gi.shape)} but expected shape compatible with "
                        f"{list(want)}")
            grads.append(gi)
        return tuple(grads) + (None,) * len(saved_nodes)

    def _output_grads(self, g: Any) -> list:
        """One gradient per output tensor: the packed ``g`` split back, zeros (or None)
        for outputs without one."""
        per = dict(zip(self.diff, unpack(g, [self.outs[k] for k in self.diff])))
        out = []
        for k, meta in enumerate(self.outs):
            if k in per:
                out.append(per[k])
            elif meta is not None and self.ctx.materialize_grads:
                out.append(zeros(*meta[0], dtype=meta[1]))
            else:
                out.append(None)
        return out

    def _check_versions(self) -> None:
        for t, v in zip(self.saved, self.versions):
            if v is not None and version_of(t) != v:
                raise RuntimeError(
                    "one of the variables needed for gradient computation has been modified "
                    f"by an inplace operation: a tensor saved by {self.node_name} is at "
                    f"version {version_of(t)}; expected version {v} instead.")


def _broadcast(a: tuple, b: tuple) -> tuple | None:
    try:
        return tuple(np.broadcast_shapes(a, b))
    except ValueError:
        return None


class _Lowered:
    """What a `_Call` becomes in a pickled graph: its name only (the node's forward is the
    identity, and differentiation happened before the graph left this process)."""

    def __init__(self, node_name: str) -> None:
        self.node_name = node_name

    def __repr__(self) -> str:
        return self.node_name.removesuffix("Backward")

    def vjp(self, node_ctx: Any, g: Any) -> tuple:
        raise RuntimeError(f"{self.node_name}: the Python backward of this Function is not "
                           "available in this process")


def _has_own_setup_context(cls: type) -> bool:
    return cls.setup_context is not Function.setup_context


class Function:
    """Subclass with static ``forward(ctx, *args)`` and ``backward(ctx, *grad_outputs)``,
    call with ``apply``. ``backward`` returns one gradient (or ``None``) per ``forward``
    argument. As in PyTorch, ``forward(*args)`` may instead leave ``ctx`` to a static
    ``setup_context(ctx, inputs, output)``."""

    @staticmethod
    def forward(ctx: Any, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("a Function subclass must implement forward")

    @staticmethod
    def backward(ctx: Any, *grad_outputs: Any) -> Any:
        raise NotImplementedError("a Function subclass must implement backward to be "
                                  "differentiated")

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple, output: Any) -> None:
        raise NotImplementedError("setup_context is not overridden")

    @classmethod
    def vjp(cls, ctx: Any, *grad_outputs: Any) -> Any:
        """PyTorch's alias of ``backward``."""
        return cls.backward(ctx, *grad_outputs)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError(
            f"{type(self).__name__} is an autograd Function: call its apply method "
            f"({type(self).__name__}.apply(...)) instead of instantiating it")

    @classmethod
    def apply(cls, *args: Any, **kwargs: Any) -> Any:
        ctx = FunctionCtx()
        enabled = GRAD_ENABLED.value
        ctx.needs_input_grad = tuple(
            bool(enabled and isinstance(a, TensorOps) and a.requires_grad) for a in args)
        # The values the backward differentiates with respect to, as they are before the
        # forward runs: a forward may write into its input (TabNet's sparsemax does
        # ``input -= max_val``), which rebinds a traced value to the written one.
        before = _inputs_before(args, ctx.needs_input_grad)
        with no_grad():
            if _has_own_setup_context(cls):
                out = cls.forward(*args, **kwargs)
                cls.setup_context(ctx, args, out)
            else:
                out = cls.forward(ctx, *args, **kwargs)
        grad_args = [i for i, need in enumerate(ctx.needs_input_grad) if need]
        if not grad_args:
            return out
        single = not isinstance(out, tuple)
        outs = (out,) if single else out
        tensors = [k for k, o in enumerate(outs) if isinstance(o, TensorOps)]
        marked = {id(t) for t in ctx.non_differentiable}
        diff = [k for k in tensors
                if np.dtype(outs[k].dtype).kind == "f" and id(outs[k]) not in marked]
        if not diff:
            return out
        saved = list(ctx.to_save)
        metas = [(tuple(o.shape), o.dtype) if isinstance(o, TensorOps) else None for o in outs]
        call = _Call(cls, ctx, len(args), grad_args, saved, metas, diff)
        if SAVED_HOOKS and current_trace() is None:
            # The node still lists the saved tensors as inputs; backward reads the packed.
            call.saved = [None if s is None else pack_value(s) for s in saved]
            call.versions = [None] * len(saved)
        node = custom_function(pack([outs[k] for k in diff]), [before[i] for i in grad_args],
                               [s for s in saved if s is not None], call)
        results = list(outs)
        for k, r in zip(diff, unpack(node, [metas[k] for k in diff], call.node_name)):
            results[k] = r
        return results[0] if single else tuple(results)
