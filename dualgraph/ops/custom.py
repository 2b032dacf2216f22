"""``custom_function``: the node of a user-defined ``dg.autograd.Function``.

Its forward is the identity on its first input, the result the user's ``forward`` computed
(with gradients off, so that computation is on neither the tape nor the traced graph's
gradient path). Its other inputs are the tensors the user's function gives gradients to,
then the tensors it saved for backward: they make the node depend on what it differentiates
and carry the saved values into the backward (in a traced graph they become residuals like
any op's). The gradient rule is the user's ``backward``, reached through the ``_fn``
attribute (a `dualgraph.autograd.function` record; attributes starting with ``_`` are not
printed), so eager mode runs it as ops on the tape and graph autodiff traces it into the
backward graph.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..modes import bind
from .registry import OpDef, register
from .shape import astype, concatenate, reshape


def _impl(y: np.ndarray, *rest: Any, _fn: Any) -> np.ndarray:
    # A copy: the user's forward may return one of its inputs unchanged, and the result
    # must not alias it (an in-place change of one would silently change the other).
    return np.array(y, copy=True)


def _infer(y: Any, *rest: Any, _fn: Any) -> tuple:
    return tuple(y.shape), y.dtype


def _vjp(ctx: Any, g: Any) -> tuple:
    return ctx.attrs["_fn"].vjp(ctx, g)


def _name(node: Any) -> str:
    return node.attrs["_fn"].node_name


CUSTOM_FUNCTION = register(OpDef("custom_function", _impl, _infer, _vjp, _name))


def custom_function(value: Any, grad_inputs: Any, saved: Any, record: Any) -> Any:
    """The ``custom_function`` node: ``value``, whose gradient rule is ``record.vjp``
    (``record.node_name`` names the tape node), differentiated in ``grad_inputs``."""
    return bind(CUSTOM_FUNCTION, value, *grad_inputs, *saved, _fn=record)


def pack(values: list) -> Any:
    """Several tensors as one flat tensor of their common dtype (one node can then carry
    all of them); one tensor as itself."""
    if len(values) == 1:
        return values[0]
    dtype = np.result_type(*[v.dtype for v in values])
    return concatenate([astype(reshape(v, -1), dtype) for v in values])


def unpack(packed: Any, metas: list, node_name: str | None = None) -> list:
    """The tensors `pack` joined, from ``packed`` (or its gradient): ``metas`` gives each
    one's ``(shape, dtype)``. With ``node_name``, each part is a ``custom_function`` node
    of that name (a Function's every output has the Function's node as its grad_fn, as in
    PyTorch) whose gradient is its own gradient placed into the pack's."""
    if len(metas) == 1:
        return [packed]
    out = []
    start = 0
    total = int(np.prod(packed.shape, dtype=np.int64))
    for shape, dtype in metas:
        n = int(np.prod(shape, dtype=np.int64))
        part = reshape(packed[start:start + n], shape)
        part = part if part.dtype == dtype else astype(part, dtype)
        if node_name is not None:
            part = custom_function(part, [packed], (), _Part(node_name, start, n, total,
                                                             np.dtype(packed.dtype)))
        out.append(part)
        start += n
    return out


class _Part:
    """The gradient rule of one unpacked part: its gradient, zero elsewhere in the pack."""

    def __init__(self, node_name: str, start: int, n: int, total: int,
                 dtype: np.dtype) -> None:
        self.node_name = node_name
        self.start, self.n, self.total, self.dtype = start, n, total, dtype

    def __repr__(self) -> str:
        return self.node_name.removesuffix("Backward")

    def vjp(self, ctx: Any, g: Any) -> tuple:
        from .pool import pad

        flat = reshape(g, (self.n,))
        if flat.dtype != self.dtype:
            flat = astype(flat, self.dtype)
        return None, pad(flat, (self.start, self.total - self.start - self.n))
