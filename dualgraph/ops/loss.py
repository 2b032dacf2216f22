"""The negative log-likelihood: ``nll_loss`` and its backward, one op each.

With ``log_softmax`` (`dualgraph.ops.softmax`), the common cross-entropy step is two ops
forward (``log_softmax``, ``nll_loss``) and two backward (``log_softmax_backward``,
``nll_loss_backward``), as in PyTorch, where the class pick as a composition was about ten
small ops each way. ``nll_loss`` and ``nll_loss_backward`` are each other's adjoint (both
are linear in the value they read at the targets), so double backward works.

Layouts follow PyTorch: the class dim of ``nll_loss`` is dim 1, or dim 0 for (C,) input
with a 0-d target; any trailing dims (N, C, d1, ...) are positions, each with a target.
A missing ``weight`` is the literal ``1.0``, so every op has the same inputs.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..errors import ShapeError
from ..modes import bind
from .registry import OpDef, register

REDUCTIONS = ("none", "mean", "sum")


class TargetDtypeError(RuntimeError, TypeError):
    """A class target that is not integer: PyTorch's RuntimeError, and a TypeError."""


def nll_layout(shape: tuple) -> tuple[int, int, int]:
    """(N, C, R): the input viewed as N samples, C classes and R positions per sample
    (C-order, so a plain reshape); (C,) input is one sample."""
    if len(shape) == 1:
        return 1, shape[0], 1
    return shape[0], shape[1], math.prod(shape[2:])


def check_reduction(reduction: Any) -> None:
    if reduction not in REDUCTIONS:
        raise ValueError(f"{reduction} is not a valid value for reduction")


def _nll_check(x: Any, target: Any, weight: Any) -> None:
    """PyTorch's shape and dtype errors of nll_loss (the infer rule and the public
    functions share them)."""
    xs, ts = tuple(x.shape), tuple(target.shape)
    if np.dtype(target.dtype).kind not in "iu":
        name = {"f": "Float", "b": "Bool"}.get(np.dtype(target.dtype).kind, str(target.dtype))
        if np.dtype(target.dtype) == np.float64:
            name = "Double"
        raise TargetDtypeError(f"expected target dtype to be Long or Byte, but got {name} "
                               "(class targets are integer classes)")
    if np.dtype(x.dtype).kind != "f":
        raise RuntimeError(f"nll_loss: input must be floating point, got {x.dtype}")
    if len(xs) == 0:
        raise ShapeError(f"nll_loss: input must have at least 1 dimension, got shape {xs}")
    if len(xs) == 1:
        if ts not in ((), (1,)):
            raise ShapeError(f"nll_loss: for input of shape {xs} (one sample) the target "
                             f"must be 0-d, got shape {ts}")
    elif len(ts) != len(xs) - 1 or ts[:1] != xs[:1]:
        if len(xs) == 2 and len(ts) == 1:
            raise ShapeError(f"Expected input batch_size ({xs[0]}) to match target "
                             f"batch_size ({ts[0]}): target of shape {ts}, input of shape {xs}")
        if len(xs) == 2:
            raise ShapeError("0D or 1D target tensor expected, multi-target not supported: "
                             f"target of shape {ts}, input of shape {xs}")
        raise ShapeError(f"Expected target size {list(xs[:1] + xs[2:])}, got {list(ts)} "
                         f"(input of shape {xs})")
    elif ts[1:] != xs[2:]:
        raise ShapeError(f"Expected target size {list(xs[:1] + xs[2:])}, got {list(ts)} "
                         f"(input of shape {xs})")
    if not isinstance(weight, (int, float)):
        c = xs[0] if len(xs) == 1 else xs[1]
        if tuple(weight.shape) != (c,):
            raise ShapeError(f"weight tensor should be defined either for all {c} classes or "
                             f"no classes but got weight tensor of shape: "
                             f"{list(weight.shape)}")


def _nll_infer(x: Any, target: Any, weight: Any = 1.0, *, ignore_index: int = -100,
               reduction: str = "mean") -> tuple:
    check_reduction(reduction)
    _nll_check(x, target, weight)
    shape = loss_shape(tuple(x.shape)) if reduction == "none" else ()
    return shape, np.dtype(x.dtype)


def loss_shape(shape: tuple) -> tuple:
    """The shape of ``nll_loss(..., reduction='none')`` for an input of ``shape``."""
    return tuple(shape[:1]) + tuple(shape[2:]) if len(shape) > 1 else ()


def _picks(shape: tuple, dtype: np.dtype, target: np.ndarray, weight: Any,
           ignore_index: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per (N, R) position of an input of ``shape``: whether it counts (its target is not
    ``ignore_index``), its class index (0 where ignored) and its weight (0 where ignored).
    Raises PyTorch's IndexError for a class out of range."""
    n, c, r = nll_layout(shape)
    t = target.reshape(n, r)
    keep = t != ignore_index
    bad = keep & ((t < 0) | (t >= c))
    if bad.any():
        raise IndexError(f"Target {t[bad][0]} is out of bounds.")
    safe = np.where(keep, t, 0)
    if isinstance(weight, (int, float)):
        w = keep.astype(dtype)
        if weight != 1.0:
            w *= weight
    else:
        w = np.where(keep, weight.astype(dtype, copy=False)[safe], 0).astype(dtype)
    return keep, safe, w


def _plain_targets(shape: tuple, target: np.ndarray, weight: Any, ignore_index: int,
                   reduction: str) -> bool:
    """Whether a 2-D (N, C) nll_loss is the common case the fast paths below take: no class
    weights, a reduction, N > 0, every target a class in range and none ignored (the
    general path's masks and weights then change nothing, so both give the same bits)."""
    if len(shape) != 2 or weight != 1.0 or reduction == "none" or target.ndim != 1:
        return False
    n, c = shape
    if not n or target.shape[0] != n or 0 <= ignore_index < c:
        return False
    return classes_in_range(target, c)


def classes_in_range(target: np.ndarray, c: int) -> bool:
    """Whether every value of the non-empty integer array ``target`` is in ``[0, c)``: one
    max over the values read as unsigned, where a negative one is huge (a min and a max
    cost twice that, and every training step checks its targets)."""
    if target.dtype.kind == "i":
        # The unsigned dtype from a table: building it from its name costs more than the max.
        target = target.view(_UNSIGNED[target.dtype.itemsize])
    return bool(np.maximum.reduce(target, axis=None) < c)


_UNSIGNED = {n: np.dtype(f"u{n}") for n in (1, 2, 4, 8)}


_ARANGE: dict = {}


def _rows(n: int) -> np.ndarray:
    """``np.arange(n)``, kept per ``n`` (read-only): every step of a training loop asks
    for the same batch size."""
    r = _ARANGE.get(n)
    if r is None:
        if len(_ARANGE) > 64:
            _ARANGE.clear()
        r = _ARANGE[n] = np.arange(n)
        r.flags.writeable = False
    return r


def _nll_impl(x: np.ndarray, target: np.ndarray, weight: Any = 1.0, *,
              ignore_index: int = -100, reduction: str = "mean") -> np.ndarray:
    if type(weight) is float and _plain_targets(x.shape, target, weight, ignore_index,
                                                reduction):
        return nll_plain(x, target, reduction)
    keep, safe, w = _picks(x.shape, x.dtype, target, weight, ignore_index)
    n, c, r = nll_layout(x.shape)
    picked = np.take_along_axis(x.reshape(n, c, r), safe[:, None, :], axis=1)[:, 0, :]
    # where, not a product: an ignored position's -inf must not become nan.
    loss = np.where(keep, picked * -w, 0).astype(x.dtype, copy=False)
    if reduction == "none":
        return loss.reshape(loss_shape(x.shape))
    total = np.add.reduce(loss, axis=None)
    if reduction == "sum":
        return np.asarray(total, x.dtype)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.asarray(total / np.add.reduce(w, axis=None), x.dtype)


def nll_plain(x: np.ndarray, target: np.ndarray, reduction: str) -> np.ndarray:
    """`_nll_impl` in the case `_plain_targets` accepts (the caller has checked it): the
    negated values at the targets, summed (and divided by N for ``"mean"``)."""
    total = np.add.reduce(np.negative(x[_rows(x.shape[0]), target]), axis=None)
    if reduction == "mean":
        total = total / x.dtype.type(x.shape[0])
    return np.asarray(total, x.dtype)


def nll_plain_scale(g: np.ndarray, n: int, reduction: str) -> np.ndarray:
    """The magnitude ``c`` of `nll_plain`'s input gradient for output gradient ``g``:
    ``g / N`` for ``"mean"``, ``g`` for ``"sum"``."""
    return g / g.dtype.type(n) if reduction == "mean" else g


def nll_plain_grad(shape: tuple, target: np.ndarray, c: np.ndarray) -> np.ndarray:
    """`nll_plain`'s input gradient: ``-c`` at each row's target class, zeros elsewhere."""
    out = np.zeros(shape, c.dtype)
    out[_rows(shape[0]), target] = -c
    return out


def nll_log_softmax_grad(logp: np.ndarray, target: np.ndarray, c: np.ndarray) -> np.ndarray:
    """The gradient reaching ``x`` through ``nll_plain(log_softmax(x, 1), target)`` from
    `nll_plain_grad`'s ``c``, in one temporary: ``exp(logp) * c``, less ``c`` at each row's
    target. These are the bits of the two backward kernels run in turn (log_softmax's is
    ``g - exp(logp) * sum(g)``, and each row of ``g`` sums to exactly ``-c``: elsewhere
    ``0 - exp(logp) * -c`` is ``exp(logp) * c`` negated twice, at the target ``-c +
    exp(logp) * c`` the same sum)."""
    out = np.exp(logp)
    out *= c
    out[_rows(logp.shape[0]), target] -= c
    return out


def _nll_backward_infer(g: Any, target: Any, weight: Any = 1.0, *, shape: tuple = (),
                        ignore_index: int = -100, reduction: str = "mean") -> tuple:
    check_reduction(reduction)
    want = loss_shape(tuple(shape)) if reduction == "none" else ()
    if tuple(g.shape) != want:
        raise ShapeError(f"nll_loss_backward: gradient of shape {tuple(g.shape)}, expected "
                         f"{want}")
    return tuple(shape), np.dtype(g.dtype)


def _nll_backward_impl(g: np.ndarray, target: np.ndarray, weight: Any = 1.0, *,
                       shape: tuple = (), ignore_index: int = -100,
                       reduction: str = "mean") -> np.ndarray:
    dtype = g.dtype
    if type(weight) is float and _plain_targets(tuple(shape), target, weight, ignore_index,
                                                reduction):
        return nll_plain_grad(tuple(shape), target, nll_plain_scale(g, shape[0], reduction))
    keep, safe, w = _picks(shape, dtype, target, weight, ignore_index)
    n, c, r = nll_layout(tuple(shape))
    if reduction == "none":
        coef = -w * g.reshape(n, r)
    elif reduction == "sum":
        coef = -w * g
    else:
        with np.errstate(divide="ignore", invalid="ignore"):
            coef = -w * (g / np.add.reduce(w, axis=None))
    coef = np.where(keep, coef, 0).astype(dtype, copy=False)  # ignored: exactly 0
    out = np.zeros((n, c, r), dtype)
    np.put_along_axis(out, safe[:, None, :], coef[:, None, :], axis=1)
    return out.reshape(shape)


def _nll_vjp(ctx, g):
    x_node = ctx.inputs[0]
    _, target, weight = ctx.args
    a = ctx.attrs
    gx = bind(NLL_LOSS_BACKWARD, g, target, weight, shape=tuple(x_node.shape),
              ignore_index=a["ignore_index"], reduction=a["reduction"])
    return gx, None, None


def _nll_vjp_arrays(ctx, args, out, g):
    _, target, weight = args
    a = ctx.attrs
    return (_nll_backward_impl(g, target, weight, shape=tuple(ctx.inputs[0].shape),
                               ignore_index=a["ignore_index"], reduction=a["reduction"]),
            None, None)


def _nll_backward_vjp(ctx, h):
    # Linear in g; its adjoint reads h at the targets with the same weights and scaling:
    # nll_loss itself.
    _, target, weight = ctx.args
    a = ctx.attrs
    gg = bind(NLL_LOSS, h, target, weight, ignore_index=a["ignore_index"],
              reduction=a["reduction"])
    return gg, None, None


def _nll_name(node: Any) -> str:
    return "NllLoss2DBackward0" if len(node.inputs[0].shape) >= 3 else "NllLossBackward0"


NLL_LOSS = register(OpDef(
    "nll_loss", _nll_impl, _nll_infer, _nll_vjp, _nll_name, saves=(1, 2), saves_for=(0, 0),
    vjp_arrays=_nll_vjp_arrays,
))
NLL_LOSS_BACKWARD = register(OpDef(
    "nll_loss_backward", _nll_backward_impl, _nll_backward_infer, _nll_backward_vjp,
    "NllLossBackwardBackward0", saves=(1, 2), saves_for=(0, 0),
))


def nll_loss(input: Any, target: Any, weight: Any = None, ignore_index: int = -100,  # noqa: A002
             reduction: str = "mean") -> Any:
    """The negative log-likelihood of log-probabilities ``input`` (C,), (N, C) or
    (N, C, d1, ...) at integer class ``target`` (), (N,) or (N, d1, ...): PyTorch's
    ``F.nll_loss``, one op (``NllLossBackward0``). The weighted mean divides by the summed
    weights of the targets not equal to ``ignore_index``.

    >>> loss = dg.nn.functional.nll_loss(dg.log_softmax(logits, 1), labels)
    """
    check_reduction(reduction)
    if not hasattr(target, "shape"):
        target = np.asarray(target)
    w = 1.0 if weight is None else weight
    _nll_check(input, target, w)
    return bind(NLL_LOSS, input, target, w, ignore_index=int(ignore_index),
                reduction=reduction)
