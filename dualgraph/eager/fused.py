"""Eager forms of common op pairs recorded in one step, with the tape PyTorch records.

``nn.Linear`` on a batch of rows is ``addmm(bias, x, weight.T)``: two ops, each paying
the eager per-op cost (the argument pass, the signature lookup, the result tensor, the
tape node). Here the two run as one: the same kernels, the same result and view tensors,
and the same tape nodes (``TBackward0`` under ``AddmmBackward0``) with the same saved
values and versions, so the backward, hooks, ``retain_grad``, ``create_graph`` and
in-place checks behave exactly as if the ops had run one by one. Anything else (another
mode active, a view or mixed-dtype operand, other ranks) returns ``None`` and the caller
runs the ops.

The cross-entropy of a training loop (float (N, C) logits, (N,) integer classes in range,
no weights) is ``log_softmax`` then ``nll_loss`` in the same way: both kernels, one check
of the targets, and the two nodes (``LogSoftmaxBackward0`` under ``NllLossBackward0``)
with the saved values and versions the ops record.

``relu`` of a plain float tensor runs its kernel and records its ``ReluBackward0`` node
directly, as ``x.sum()`` does (`tensor._sum_all`): a one-input op whose shape rule every
such input passes needs none of the generic op path's steps.
"""

from __future__ import annotations

from typing import Any

from .. import modes
from ..modes import current_mode
from ..ops import elementwise as E
from ..ops import linalg as L
from ..ops import loss as N
from ..ops import shape as S
from ..ops import softmax as SM
from .autograd import Function, PlainNll
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
    record_unary,
)
from .tensor import _GRAD_FN as _GRAD_FN_SLOT
from .tensor import _RG as _RG_SLOT

_ADDMM = L.ADDMM
_TRANSPOSE = S.TRANSPOSE
_addmm_impl = L.ADDMM.impl
_LOG_SOFTMAX = SM.LOG_SOFTMAX
_NLL_LOSS = N.NLL_LOSS
_log_softmax_impl = SM.LOG_SOFTMAX.impl
_RELU = E.RELU
_relu_impl = E.RELU.impl


def _fresh(data: Any) -> Tensor:
    """A new plain tensor holding ``data``; its ``grad_fn`` and ``_rg`` are the caller's
    to set."""
    t = Tensor.__new__(Tensor)
    t._data = data
    t._grad = None
    t._node = None
    t._version = [0]
    return t


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
    t = _fresh(out)
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


def cross_entropy(x: Any, target: Any, ignore_index: int, reduction: str) -> Tensor | None:
    """``nll_loss(log_softmax(x, 1), target)`` of an eager float (N, C) tensor ``x``, N > 0,
    and (N,) integer classes ``target``, every one in ``[0, C)`` and ``ignore_index``
    outside it, ``reduction`` ``"mean"`` or ``"sum"``; ``None`` when these do not hold
    (the ops then run one by one and raise what is wrong).

    Under them both ops' shape rules accept, and ``nll_loss``'s kernel takes its plain
    path (no class weights or ignored positions), so neither needs its signature checked.
    """
    tensor, view = Tensor, _ViewTensor
    if (not isinstance(x, tensor) or not isinstance(target, tensor)
            or type(current_mode()) is not EagerMode):
        return None
    if type(x) is view and x._vseen != x._version[0]:
        x._regenerate()
    if type(target) is view and target._vseen != target._version[0]:
        target._regenerate()
    xd, td = x._data, target._data
    if (xd.ndim != 2 or xd.dtype.kind != "f" or td.ndim != 1 or td.dtype.kind not in "iu"
            or td.shape[0] != xd.shape[0] or not xd.shape[0]
            or (reduction != "mean" and reduction != "sum")
            or 0 <= ignore_index < xd.shape[1] or not N.classes_in_range(td, xd.shape[1])):
        return None
    quiet = _set_errstate(_QUIET)
    try:
        logp = _log_softmax_impl(xd, axis=1)
        loss = N.nll_plain(logp, td, reduction)
    finally:
        _reset_errstate(quiet)
    lt = _fresh(logp)
    t = _fresh(loss)
    if type(x) is view:
        xrg, xfn = _RG_SLOT.__get__(x), _GRAD_FN_SLOT.__get__(x)
    else:
        xrg, xfn = x._rg, x.grad_fn
    if not xrg or not _GRAD.value:
        lt.grad_fn = t.grad_fn = None
        lt._rg = t._rg = False
        return t
    # LogSoftmaxBackward0 saves its output, at its version now (0: just made).
    fn = Function(_LOG_SOFTMAX, (xfn or x._node or x._input_node(),), {"axis": 1}, logp,
                  (), [0], lt._version)
    if _SAVED_HOOKS:
        pack_node(fn, lt)
    _attach(lt, fn)
    # NllLossBackward0 saves the target (and the literal weight) for the input's gradient.
    tnode = (_GRAD_FN_SLOT.__get__(target) if type(target) is view else target.grad_fn) \
        or target._node or target._input_node()
    nfn = PlainNll(_NLL_LOSS, (fn, tnode, 1.0),
                   {"ignore_index": int(ignore_index), "reduction": reduction}, loss,
                   (target, 1.0), [target._version[0], None], None)
    if _SAVED_HOOKS:
        pack_node(nfn, t)
    _attach(t, nfn)
    return t


def relu(x: Any) -> Tensor | None:
    """``relu(x)`` of a plain (not a view) eager float tensor in eager mode, recorded as the
    op records it; ``None`` otherwise (the op runs)."""
    if type(x) is not Tensor or modes.ABOVE_BASE:
        return None
    d = x._data
    if d.dtype.kind != "f":
        return None
    quiet = _set_errstate(_QUIET)
    try:
        out = _relu_impl(d)
    finally:
        _reset_errstate(quiet)
    return record_unary(_RELU, x, out, {}, True)
