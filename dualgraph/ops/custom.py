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

from .registry import OpDef, register


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
