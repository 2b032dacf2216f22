"""Eager forms of common op pairs recorded in one step, with the tape PyTorch records.

``nn.Linear`` on a batch of rows is ``addmm(bias, x, weight.T)``: two ops, each paying
the eager per-op cost (the argument pass, the signature lookup, the result tensor, the
tape node). Here the two run as one: the same kernels, the same result and view tensors,
and the same tape nodes (``TBackward0`` under ``AddmmBackward0``) with the same saved
values and versions, so the backward, hooks, ``retain_grad``, ``create_graph`` and
in-place checks behave exactly as if the ops had run one by one. Anything else (another
mode active, a view or mixed-dtype operand, other ranks) returns ``None`` and the caller
runs the ops.
"""

from __future__ import annotations

from typing import Any

from ..modes import current_mode
from ..ops import linalg as L
from ..ops import shape as S
from .autograd import Function
from .saved_hooks import STACK as _SAVED_HOOKS
from .saved_hooks import pack_node
from .tensor import (
    _GRAD,
    _QUIET,
    EagerMode,
    Tensor,
    _attach,
    _new_view,
    _reset_errstate,
    _set_errstate,
    _ViewTensor,
)

_ADDMM = L.ADDMM
_TRANSPOSE = S.TRANSPOSE
_addmm_impl = L.ADDMM.impl


def linear(x: Any, weight: Any, bias: Any) -> Tensor | None:
    """``addmm(bias, x, weight.T)`` of plain eager tensors of one floating dtype, ``x``
    (m, k), ``weight`` (n, k), ``bias`` (n,); ``None`` when these do not hold.

    Under them both ops' shape rules accept (a 2-D transpose; aligned 2-D matrices whose
    product the bias broadcasts to, of one dtype), so neither needs its signature checked.
    """
    tensor, view = Tensor, _ViewTensor
    if (not isinstance(x, tensor) or not isinstance(weight, tensor)
            or not isinstance(bias, tensor) or type(x) is view or type(weight) is view
            or type(bias) is view or type(current_mode()) is not EagerMode):
        return None
    xd, wd, bd = x._data, weight._data, bias._data
    dt = wd.dtype
    if (xd.ndim != 2 or wd.ndim != 2 or bd.ndim != 1 or xd.dtype != dt or bd.dtype != dt
            or dt.kind != "f" or xd.shape[1] != wd.shape[1] or bd.shape[0] != wd.shape[0]):
        return None
    wtd = wd.transpose((1, 0))
    quiet = _set_errstate(_QUIET)
    try:
        out = _addmm_impl(bd, xd, wtd)
    except Exception:  # noqa: BLE001 - the ops, run one by one, raise the clear error
        return None
    finally:
        _reset_errstate(quiet)
    t = Tensor.__new__(Tensor)
    t._data = out
    t._grad = None
    t._node = None
    t._version = [0]
    xrg, wrg, brg = x._rg, weight._rg, bias._rg
    if not (xrg or wrg or brg) or not _GRAD.value:
        t.grad_fn = None
        t._rg = False
        return t
    # ``weight.T``: the view tensor and, when the weight needs grad, its TBackward0 node.
    t_attrs = {"axes": (1, 0)}
    wt = _new_view(_TRANSPOSE, weight, t_attrs, wtd)
    wt._data = wtd
    wt._grad = None
    wt._node = None
    if wrg:
        fn = weight.grad_fn or weight._node
        tnode = Function(_TRANSPOSE, (fn if fn is not None else weight._input_node(),),
                         t_attrs, wtd, (), (), None)
        _attach(wt, tnode)
        wnode = tnode
    else:
        wnode = wt._input_node()
    # AddmmBackward0 saves x for the weight's gradient and weight.T for x's (its
    # ``saves_for``), with their versions at this point.
    sx = x if wrg else None
    swt = wt if xrg else None
    bnode = bias.grad_fn or bias._node or bias._input_node()
    xnode = x.grad_fn or x._node or x._input_node()
    fn = Function(_ADDMM, (bnode, xnode, wnode), {}, out, (sx, swt),
                  (x._version[0] if wrg else None, weight._version[0] if xrg else None), None)
    if _SAVED_HOOKS:
        pack_node(fn, t)
    t.grad_fn = fn
    t._rg = True
    return t
