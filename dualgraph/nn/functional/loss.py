"""Losses. softmax, log_softmax and nll_loss are primitives (ops/softmax.py, ops/loss.py):
cross_entropy with integer targets is two ops forward and two backward, as in PyTorch; the
other losses are compositions of registry ops (they fuse into one loop when compiled)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ...eager import fused
from ...eager.internal import array_of
from ...eager.tensor import Tensor
from ...errors import ShapeError
from ...modes import bind, current_mode
from ...ops import elementwise as E
from ...ops import index as I
from ...ops import loss as N
from ...ops import math as M
from ...ops import reduce as R
from ...ops import scan as SC
from ...ops import shape as S
from ...ops import softmax as SM
from ...ops.mixin import TensorOps
from ._args import _as_operand, _check_input
from .activation import logsigmoid
from .distance import pairwise_distance

__all__ = [
    "binary_cross_entropy", "binary_cross_entropy_with_logits", "cosine_embedding_loss",
    "cross_entropy", "ctc_loss", "gaussian_nll_loss", "hinge_embedding_loss", "huber_loss",
    "kl_div", "l1_loss", "margin_ranking_loss", "mse_loss", "multi_margin_loss",
    "multilabel_margin_loss", "multilabel_soft_margin_loss", "nll_loss",
    "poisson_nll_loss", "smooth_l1_loss", "soft_margin_loss", "triplet_margin_loss",
    "triplet_margin_with_distance_loss",
]


def _reduce(loss: Any, reduction: str) -> Any:
    if reduction == "mean":
        return R.mean(loss)
    if reduction == "sum":
        return R.sum(loss)
    if reduction == "none":
        return loss
    raise ValueError(f"reduction must be 'mean', 'sum' or 'none', got {reduction!r}")


def _same_shape(name: str, a: Any, b: Any) -> None:
    if a.shape != b.shape:
        raise ValueError(
            f"{name}: input shape {tuple(a.shape)} and target shape {tuple(b.shape)} differ"
        )


def mse_loss(input: Any, target: Any, reduction: str = "mean") -> Any:  # noqa: A002
    """Mean squared error ``(input - target) ** 2``, reduced."""
    target = _label_target("mse_loss", input, target)
    # pow(d, 2), not d * d: d has one consumer, so backward needs no accumulation.
    return S.torch_named(_reduce(E.pow(E.sub(input, target), 2), reduction), input,
                         "MseLossBackward0")


def binary_cross_entropy_with_logits(
    input: Any, target: Any, weight: Any = None, size_average: Any = None,  # noqa: A002
    reduce: Any = None, reduction: str = "mean", pos_weight: Any = None,
) -> Any:
    """``max(x, 0) - x * y + log(1 + exp(-|x|))``: stable for any logit. ``weight``
    scales each element's loss; ``pos_weight`` (broadcast along the last dim, one per
    class) scales the positive term: ``(1 - y) x + (1 + (p - 1) y) (log(1 + exp(-|x|)) +
    max(-x, 0))``, as PyTorch."""
    target = _label_target("binary_cross_entropy_with_logits", input, target)
    reduction = _legacy_reduction(size_average, reduce, reduction)
    soft = E.log(E.add(E.exp(E.neg(E.abs(input))), 1.0))
    if pos_weight is None:
        loss = E.add(E.sub(E.relu(input), E.mul(input, target)), soft)
    else:
        scale = E.add(E.mul(E.sub(_as_operand(pos_weight), 1.0), target), 1.0)
        loss = E.add(E.mul(E.sub(1.0, target), input),
                     E.mul(scale, E.add(soft, E.relu(E.neg(input)))))
    if weight is not None:
        loss = E.mul(loss, _as_operand(weight))
    return S.torch_named(_reduce(loss, reduction), input,
                         "BinaryCrossEntropyWithLogitsBackward0")


def _legacy_reduction(size_average: Any, reduce: Any, reduction: str) -> str:
    """PyTorch's deprecated ``size_average``/``reduce`` flags, when given, decide."""
    if size_average is None and reduce is None:
        return reduction
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    return ("mean" if size_average else "sum") if reduce else "none"


def _target(target: Any) -> Any:
    return target if hasattr(target, "shape") else np.asarray(target)


def _class_shape(x: Any, class_dim: int) -> tuple:
    """``(1, ..., C, ..., 1)``: a (C,) weight viewed to broadcast along ``class_dim``."""
    return tuple(x.shape[class_dim] if i == class_dim else 1 for i in range(x.ndim))


def _check_classes(x: Any, target: Any, ignore_index: int) -> None:
    """PyTorch's IndexError for a class target out of range, eagerly (a tracer's values
    are unknown: compiled kernels check as they read)."""
    data = target if isinstance(target, np.ndarray) else (
        array_of(target) if isinstance(target, Tensor) else None)
    if data is None or not data.size or data.dtype.kind not in "iu":
        return
    c = x.shape[0 if x.ndim == 1 else 1] if x.ndim else 0
    if N.classes_in_range(data, c):
        return
    bad = data[(data != ignore_index) & ((data < 0) | (data >= c))]
    if bad.size:
        raise IndexError(f"Target {bad.flat[0]} is out of bounds.")


def _weight_as(weight: Any, dtype: Any) -> Any:
    """A class weight in the loss's dtype (PyTorch requires them equal; we cast)."""
    if weight is None or weight.dtype == dtype:
        return weight
    if isinstance(weight, np.ndarray):
        return np.asarray(weight, dtype)
    return S.astype(weight, dtype)


def nll_loss(input: Any, target: Any, weight: Any = None,  # noqa: A002
             size_average: Any = None, ignore_index: int = -100, reduce: Any = None,
             reduction: str = "mean") -> Any:
    """Negative log-likelihood of log-probabilities ``input`` (C,), (N, C) or
    (N, C, d1, ...) at integer class ``target``; ``weight`` per class, targets equal to
    ``ignore_index`` count for nothing (PyTorch's ``F.nll_loss``)."""
    _check_input("nll_loss", input)
    reduction = _legacy_reduction(size_average, reduce, reduction)
    target = _target(target)
    _check_classes(input, target, ignore_index)
    return N.nll_loss(input, target, weight, ignore_index, reduction)


def cross_entropy(input: Any, target: Any, weight: Any = None,  # noqa: A002
                  size_average: Any = None, ignore_index: int = -100, reduce: Any = None,
                  reduction: str = "mean", label_smoothing: float = 0.0) -> Any:
    """Cross-entropy of logits ``input`` (C,), (N, C) or (N, C, d1, ...) against integer
    class ``target`` (``nll_loss(log_softmax(input, 1), ...)``) or class probabilities of
    the input's shape, with PyTorch's ``weight``, ``ignore_index``, ``reduction`` and
    ``label_smoothing``.

    The target stays an operand of the ops (never a Python constant), so a target passed
    to a compiled step is a runtime graph input.

    >>> loss = dg.nn.functional.cross_entropy(logits, labels, label_smoothing=0.1)
    """
    if (weight is None and label_smoothing == 0.0 and size_average is None and reduce is None
            and (reduction == "mean" or reduction == "sum")):
        loss = _plain_cross_entropy(input, target, ignore_index, reduction)
        if loss is not None:
            return loss
    _check_input("cross_entropy", input)
    reduction = _legacy_reduction(size_average, reduce, reduction)
    N.check_reduction(reduction)
    if not 0.0 <= label_smoothing <= 1.0:
        raise RuntimeError(f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}")
    target = _target(target)
    if input.ndim == 0:
        raise ShapeError("cross_entropy: input must have at least 1 dimension (the classes), "
                         "got a 0-d tensor")
    class_dim = 0 if input.ndim == 1 else 1
    logp = SM.log_softmax(input, class_dim)
    weight = _weight_as(weight, logp.dtype)
    if tuple(target.shape) == tuple(input.shape):
        return _cross_entropy_probs(logp, target, weight, ignore_index, reduction,
                                    label_smoothing, class_dim)
    _check_classes(input, target, ignore_index)
    loss = N.nll_loss(logp, target, weight, ignore_index, reduction)
    if label_smoothing == 0.0:
        return loss
    # PyTorch's smoothing: (1 - eps) * nll + eps / C * (the loss of a uniform target),
    # each weighted, ignored positions counting 0.
    c = input.shape[class_dim]
    wlogp = logp
    if weight is not None:
        wlogp = E.mul(logp, S.reshape(weight, _class_shape(input, class_dim)))
    smooth = E.where(E.eq(target, ignore_index), 0.0, E.neg(R.sum(wlogp, class_dim)))
    if reduction == "sum":
        smooth = R.sum(smooth)
    elif reduction == "mean":
        # The summed weights of the counted targets: nll_loss of -1 everywhere, summed.
        ones = S.broadcast_to(np.array(-1.0, dtype=logp.dtype), tuple(input.shape))
        total = N.nll_loss(ones, target, weight, ignore_index, "sum")
        smooth = E.div(R.sum(smooth), total)
    return E.add(E.mul(loss, 1.0 - label_smoothing), E.mul(smooth, label_smoothing / c))


def _plain_cross_entropy(input: Any, target: Any, ignore_index: int,  # noqa: A002
                         reduction: str) -> Any:
    """The training-loop case, float (N, C) logits against (N,) integer classes with no
    weights or smoothing: the same two binds as the general path, without re-checking
    what these conditions already settle (every step pays those checks, twice in-step
    what they cost alone). ``None`` when the case does not apply."""
    if not isinstance(input, TensorOps) or not hasattr(target, "shape"):
        return None
    # Eager tensors: both ops' kernels and nodes in one step.
    loss = fused.cross_entropy(input, target, ignore_index, reduction)
    if loss is not None:
        return loss
    shape, tshape = tuple(input.shape), tuple(target.shape)
    if (len(shape) != 2 or tshape != shape[:1] or not shape[0]
            or np.dtype(input.dtype).kind != "f" or np.dtype(target.dtype).kind not in "iu"):
        return None
    logp = bind(SM.LOG_SOFTMAX, input, axis=1)
    _check_classes(input, target, ignore_index)
    return bind(N.NLL_LOSS, logp, target, 1.0, ignore_index=int(ignore_index),
                reduction=reduction)


def _cross_entropy_probs(logp: Any, target: Any, weight: Any, ignore_index: int,
                         reduction: str, label_smoothing: float, class_dim: int) -> Any:
    if np.dtype(target.dtype).kind != "f":
        raise N.TargetDtypeError("Expected floating point type for target with class "
                                 f"probabilities, got {target.dtype}")
    if ignore_index >= 0:
        raise RuntimeError("ignore_index is not supported for floating point target")
    c = logp.shape[class_dim]
    if label_smoothing > 0.0:
        target = E.add(E.mul(target, 1.0 - label_smoothing), label_smoothing / c)
    prod = E.mul(logp, target)
    if weight is not None:
        prod = E.mul(prod, S.reshape(weight, _class_shape(logp, class_dim)))
    if reduction == "none":
        return E.neg(R.sum(prod, class_dim))
    total = E.neg(R.sum(prod))
    if reduction == "sum":
        return total
    n = math.prod(logp.shape) // c if c else 0
    # An empty batch: 0 / 0, nan (PyTorch).
    return E.div(total, n) if n else E.mul(total, math.nan)


# Everyday losses, compositions of registry ops (they fuse into one loop when compiled).
def _pointwise(name: str, input: Any, target: Any, size_average: Any, reduce: Any,  # noqa: A002
               reduction: str) -> tuple[Any, str]:
    _check_input(name, input)
    reduction = _legacy_reduction(size_average, reduce, reduction)
    N.check_reduction(reduction)
    return _label_target(name, input, target), reduction


def _label_target(name: str, input: Any, target: Any) -> Any:  # noqa: A002
    """A loss's ``target`` as an operand of ``input``'s shape. A recording mode passes a
    target that is a made constant of one value (a label) as a scalar argument."""
    target = _as_operand(target)
    _same_shape(name, input, target)
    current_mode().note_label(target)
    return target


def l1_loss(input: Any, target: Any, size_average: Any = None, reduce: Any = None,  # noqa: A002
            reduction: str = "mean") -> Any:
    """``|input - target|``, reduced."""
    target, reduction = _pointwise("l1_loss", input, target, size_average, reduce, reduction)
    return _reduce(E.abs(E.sub(input, target)), reduction)


def smooth_l1_loss(input: Any, target: Any, size_average: Any = None,  # noqa: A002
                   reduce: Any = None, reduction: str = "mean", beta: float = 1.0) -> Any:
    """``0.5 d^2 / beta`` where ``|d| < beta``, else ``|d| - 0.5 beta`` (``d = input -
    target``); ``beta=0`` is the L1 loss."""
    target, reduction = _pointwise("smooth_l1_loss", input, target, size_average, reduce,
                                   reduction)
    if beta < 0:
        raise RuntimeError("smooth_l1_loss does not support negative values for beta.")
    d = E.abs(E.sub(input, target))
    if beta == 0:
        return _reduce(d, reduction)
    far, near = _split_at(d, beta)
    quad = E.div(E.mul(E.mul(near, near), 0.5), beta)
    return S.torch_named(_reduce(E.where(far, E.sub(d, 0.5 * beta), quad), reduction),
                         input, "SmoothL1LossBackward0")


def _split_at(d: Any, bound: float) -> tuple:
    """``(d >= bound, d where below it, else 0)``: a NaN ``d`` takes the quadratic branch,
    as in PyTorch (its gradient is NaN), and an infinite one gives that branch no
    0 * inf gradient."""
    far = E.ge(d, bound)
    return far, E.where(far, 0.0, d)


def huber_loss(input: Any, target: Any, reduction: str = "mean",  # noqa: A002
               delta: float = 1.0, weight: Any = None) -> Any:
    """``0.5 d^2`` where ``|d| < delta``, else ``delta (|d| - 0.5 delta)``."""
    target, reduction = _pointwise("huber_loss", input, target, None, None, reduction)
    if delta <= 0:
        raise RuntimeError("huber_loss does not support non-positive values for delta.")
    d = E.abs(E.sub(input, target))
    far, near = _split_at(d, delta)
    loss = E.where(far, E.mul(E.sub(d, 0.5 * delta), delta), E.mul(E.mul(near, near), 0.5))
    if weight is not None:  # PyTorch composes the weighted loss too
        return _reduce(E.mul(loss, weight), reduction)
    return S.torch_named(_reduce(loss, reduction), input, "HuberLossBackward0")


def binary_cross_entropy(input: Any, target: Any, weight: Any = None,  # noqa: A002
                         size_average: Any = None, reduce: Any = None,
                         reduction: str = "mean") -> Any:
    """``-(y log x + (1 - y) log(1 - x))`` of probabilities ``input``, each log clamped at
    -100 as PyTorch does (so ``x = 0`` or ``1`` gives a finite loss)."""
    target, reduction = _pointwise("binary_cross_entropy", input, target, size_average, reduce,
                                   reduction)
    lx, l1x = _clamped_log(input), _clamped_log(E.sub(1.0, input))
    loss = E.neg(E.add(E.mul(target, lx), E.mul(E.sub(1.0, target), l1x)))
    weight = _weight_as(weight, input.dtype)
    return S.torch_named(_reduce(loss if weight is None else E.mul(loss, weight), reduction),
                         input, "BinaryCrossEntropyBackward0")


def _clamped_log(x: Any) -> Any:
    """``max(log x, -100)``, with no log of 0 evaluated (NumPy would warn)."""
    pos = E.gt(x, 0)
    return E.where(pos, E.maximum(E.log(E.where(pos, x, 1.0)), -100.0), -100.0)


def kl_div(input: Any, target: Any, size_average: Any = None, reduce: Any = None,  # noqa: A002
           reduction: str = "mean", log_target: bool = False) -> Any:
    """``target * (log target - input)`` for log-probabilities ``input`` (``0`` where
    ``target == 0``); ``log_target=True`` takes log-probability targets.
    ``reduction='batchmean'`` divides the sum by the batch size."""
    _check_input("kl_div", input)
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if reduction not in ("none", "mean", "sum", "batchmean"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    target = _as_operand(target)
    if log_target:
        loss = E.mul(E.exp(target), E.sub(target, input))
    else:
        pos = E.gt(target, 0)
        # log of a safe value: the branch `where` drops must not make nan gradients.
        xlogy = E.where(pos, E.mul(target, E.log(E.where(pos, target, 1.0))), 0.0)
        loss = E.sub(xlogy, E.mul(target, input))
    if reduction == "batchmean":
        total = R.sum(loss)
        return E.div(total, input.shape[0]) if input.ndim else total
    return _reduce(loss, reduction)


def soft_margin_loss(input: Any, target: Any, size_average: Any = None,  # noqa: A002
                     reduce: Any = None, reduction: str = "mean") -> Any:
    """``log(1 + exp(-target * input))`` for targets in {-1, 1}."""
    target, reduction = _pointwise("soft_margin_loss", input, target, size_average, reduce,
                                   reduction)
    return _reduce(E.log1p(E.exp(E.neg(E.mul(target, input)))), reduction)


# Margin, ranking, embedding and likelihood losses: compositions of registry ops.
def _loss_reduction(size_average: Any, reduce: Any, reduction: str) -> str:
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    return reduction


def margin_ranking_loss(input1: Any, input2: Any, target: Any, margin: float = 0.0,
                        size_average: Any = None, reduce: Any = None,
                        reduction: str = "mean") -> Any:
    """``max(0, -target * (input1 - input2) + margin)`` for targets in {1, -1}."""
    reduction = _loss_reduction(size_average, reduce, reduction)
    target = _as_operand(target)
    if not input1.ndim == input2.ndim == target.ndim:
        raise RuntimeError(f"margin_ranking_loss : All input tensors should have same "
                           f"dimension but got sizes: input1: {tuple(input1.shape)}, input2: "
                           f"{tuple(input2.shape)}, target: {tuple(target.shape)} ")
    loss = E.relu(E.add(E.mul(E.neg(target), E.sub(input1, input2)), margin))
    return _reduce(loss, reduction)


def hinge_embedding_loss(input: Any, target: Any, margin: float = 1.0,  # noqa: A002
                         size_average: Any = None, reduce: Any = None,
                         reduction: str = "mean") -> Any:
    """``x`` where ``target == 1``, ``max(0, margin - x)`` where ``target == -1``."""
    reduction = _loss_reduction(size_average, reduce, reduction)
    target = _as_operand(target)
    hinge = E.where(E.ne(target, 1), E.relu(E.sub(margin, input)), 0.0)
    return _reduce(E.add(hinge, E.where(E.ne(target, -1), input, 0.0)), reduction)


def multilabel_soft_margin_loss(input: Any, target: Any, weight: Any = None,  # noqa: A002
                                size_average: Any = None, reduce: Any = None,
                                reduction: str = "mean") -> Any:
    """One-versus-all logistic loss per class, averaged over the classes (the last dim)."""
    reduction = _loss_reduction(size_average, reduce, reduction)
    target = _as_operand(target)
    loss = E.neg(E.add(E.mul(target, logsigmoid(input)),
                       E.mul(E.sub(1.0, target), logsigmoid(E.neg(input)))))
    if weight is not None:
        loss = E.mul(loss, weight)
    c = input.shape[-1] if input.ndim else 1
    loss = E.div(R.sum(loss, input.ndim - 1) if input.ndim else loss, c)
    return _reduce(loss, reduction)


def cosine_embedding_loss(input1: Any, input2: Any, target: Any, margin: float = 0.0,
                          size_average: Any = None, reduce: Any = None,
                          reduction: str = "mean") -> Any:
    """``1 - cos(x1, x2)`` where ``target == 1``, ``max(0, cos(x1, x2) - margin)`` where
    ``target == -1``, the cosine along the last dim."""
    reduction = _loss_reduction(size_average, reduce, reduction)
    target = _as_operand(target)
    if target.ndim > 1:
        raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
    if input1.ndim != input2.ndim or input1.ndim != target.ndim + 1:
        raise RuntimeError(f"cosine_embedding_loss: expected {target.ndim + 1}D inputs for a "
                           f"{target.ndim}D target, but got input1 {tuple(input1.shape)} and "
                           f"input2 {tuple(input2.shape)}")
    dim = input1.ndim - 1
    eps = 1e-12
    prod = R.sum(E.mul(input1, input2), dim)
    mag1 = E.add(R.sum(E.mul(input1, input1), dim), eps)
    mag2 = E.add(R.sum(E.mul(input2, input2), dim), eps)
    cos = E.div(prod, E.sqrt(E.mul(mag1, mag2)))
    pos = E.where(E.eq(target, 1), E.sub(1.0, cos), 0.0)
    neg = E.where(E.eq(target, -1), E.relu(E.sub(cos, margin)), 0.0)
    return _reduce(E.add(pos, neg), reduction)


def poisson_nll_loss(input: Any, target: Any, log_input: bool = True,  # noqa: A002
                     full: bool = False, size_average: Any = None, eps: float = 1e-8,
                     reduce: Any = None, reduction: str = "mean") -> Any:
    """Poisson negative log-likelihood: ``exp(x) - target * x`` for log-rates (``log_input``),
    ``x - target * log(x + eps)`` for rates; ``full`` adds Stirling's term for targets above
    1."""
    reduction = _loss_reduction(size_average, reduce, reduction)
    target = _as_operand(target)
    if log_input:
        loss = E.sub(E.exp(input), E.mul(target, input))
    else:
        loss = E.sub(input, E.mul(target, E.log(E.add(input, eps))))
    if full:
        big = E.gt(target, 1)
        t = E.where(big, target, 2.0)  # a safe value where the term is masked out
        stirling = E.add(E.sub(E.mul(t, E.log(t)), t), E.mul(E.log(E.mul(t, 2 * math.pi)), 0.5))
        loss = E.add(loss, E.where(big, stirling, 0.0))
    return _reduce(loss, reduction)


def gaussian_nll_loss(input: Any, target: Any, var: Any, full: bool = False,  # noqa: A002
                      eps: float = 1e-6, reduction: str = "mean") -> Any:
    """Gaussian negative log-likelihood ``0.5 * (log(var) + (input - target) ** 2 / var)``,
    ``var`` clamped at ``eps`` (the clamp passes the gradient through, as PyTorch's in-place
    clamp under ``no_grad`` does); ``var`` may have one dim fewer, or one dim of size 1."""
    if isinstance(var, (int, float)):
        if var < 0:
            raise ValueError("var has negative entry/entries")
        var = E.add(E.mul(input, 0.0), float(var))
    elif isinstance(var, Tensor) and (array_of(var) < 0).any():
        raise ValueError("var has negative entry/entries")
    if tuple(var.shape) != tuple(input.shape):
        if tuple(input.shape[:-1]) == tuple(var.shape):
            var = S.reshape(var, tuple(var.shape) + (1,))
        elif not (input.ndim == var.ndim and sum(
                y for x, y in zip(input.shape, var.shape) if x != y) == 1):
            raise ValueError("var is of incorrect size")
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(reduction + " is not valid")
    var = E.add(var, S.stop_gradient(E.sub(M.clamp(var, eps), var)))
    d = E.sub(input, target)
    loss = E.mul(E.add(E.log(var), E.div(E.mul(d, d), var)), 0.5)
    if full:
        loss = E.add(loss, 0.5 * math.log(2 * math.pi))
    return _reduce(loss, reduction)


def triplet_margin_loss(anchor: Any, positive: Any, negative: Any, margin: float = 1.0,
                        p: float = 2.0, eps: float = 1e-6, swap: bool = False,
                        size_average: Any = None, reduce: Any = None,
                        reduction: str = "mean") -> Any:
    """``max(d(a, p) - d(a, n) + margin, 0)`` with the ``p``-norm `pairwise_distance`;
    ``swap`` uses ``min(d(a, n), d(p, n))``."""
    reduction = _loss_reduction(size_average, reduce, reduction)
    if not anchor.ndim == positive.ndim == negative.ndim:
        raise RuntimeError(f"The anchor, positive, and negative tensors are expected to have "
                           f"the same number of dimensions, but got: anchor {anchor.ndim}D, "
                           f"positive {positive.ndim}D, and negative {negative.ndim}D inputs")
    return triplet_margin_with_distance_loss(
        anchor, positive, negative,
        distance_function=lambda x, y: pairwise_distance(x, y, p, eps), margin=margin,
        swap=swap, reduction=reduction)


def triplet_margin_with_distance_loss(anchor: Any, positive: Any, negative: Any, *,
                                      distance_function: Any = None, margin: float = 1.0,
                                      swap: bool = False, reduction: str = "mean") -> Any:
    """`triplet_margin_loss` with any ``distance_function(x, y)`` (default
    `pairwise_distance`)."""
    if margin <= 0:
        raise ValueError(f"TripletMarginWithDistanceLoss: expected margin to be greater "
                         f"than 0, got {margin} instead")
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    dist = pairwise_distance if distance_function is None else distance_function
    d_pos = dist(anchor, positive)
    d_neg = dist(anchor, negative)
    if swap:
        d_neg = E.minimum(d_neg, dist(positive, negative))
    return _reduce(E.relu(E.add(E.sub(d_pos, d_neg), margin)), reduction)


def _class_scores(name: str, input: Any, target: Any) -> tuple[Any, Any, bool]:  # noqa: A002
    """(N, C) scores and (N,)-shaped integer targets, and whether the input was 1-D."""
    if input.ndim not in (1, 2) or (input.ndim == 2 and input.shape[1] == 0):
        raise RuntimeError(f"{name}: Expected non-empty vector or matrix with optional "
                           f"0-dim batch size, but got: {list(input.shape)}")
    single = input.ndim == 1
    return (S.reshape(input, (1, -1)) if single else input), target, single


def multi_margin_loss(input: Any, target: Any, p: int = 1, margin: float = 1.0,  # noqa: A002
                      weight: Any = None, size_average: Any = None, reduce: Any = None,
                      reduction: str = "mean") -> Any:
    """Multi-class hinge loss: ``sum_{j != y} max(0, margin - x[y] + x[j]) ** p / C`` per
    sample, ``weight[y]`` scaling each term."""
    reduction = _loss_reduction(size_average, reduce, reduction)
    if p not in (1, 2):
        raise ValueError("only p == 1 and p == 2 supported")
    x, target, single = _class_scores("multi_margin_loss", input, _target(target))
    n, c = x.shape
    t = S.reshape(target, (n, 1))
    _check_classes(x, S.reshape(target, (n,)) if isinstance(target, TensorOps) else
                   np.reshape(target, (n,)), -100)
    x_y = I.gather(x, 1, t)
    z = E.relu(E.add(E.sub(x, x_y), margin))
    if p == 2:
        z = E.mul(z, z)
    if weight is not None:
        z = E.mul(z, S.reshape(I.gather(weight, 0, S.reshape(t, (n,))), (n, 1)))
    is_y = E.eq(t, np.arange(c)[None, :])
    loss = E.div(R.sum(E.where(is_y, 0.0, z), 1), c)
    if single:
        loss = S.reshape(loss, ())
    return _reduce(loss, reduction)


def multilabel_margin_loss(input: Any, target: Any, size_average: Any = None,  # noqa: A002
                           reduce: Any = None, reduction: str = "mean") -> Any:
    """Multi-label hinge loss: ``target`` lists each sample's classes, ended by the first
    -1; ``sum over listed j and unlisted k of max(0, 1 - (x[j] - x[k])) / C``."""
    reduction = _loss_reduction(size_average, reduce, reduction)
    x, target, single = _class_scores("multilabel_margin_loss", input, _target(target))
    n, c = x.shape
    t = S.reshape(target, (n, c))
    # Slots before the first -1 count; later slots are ignored whatever they hold.
    valid = E.eq(SC.cumsum(S.astype(E.eq(t, -1), np.int64), 1), 0)
    safe = E.where(valid, t, 0)
    listed = R.any(M.logical_and(E.eq(S.reshape(safe, (n, c, 1)), np.arange(c)[None, None, :]),
                                 S.reshape(valid, (n, c, 1))), 1)  # (N, C): class k listed
    x_j = I.gather(x, 1, safe)  # (N, slots)
    hinge = E.relu(E.add(E.sub(S.reshape(x, (n, 1, c)), S.reshape(x_j, (n, c, 1))), 1.0))
    pair = M.logical_and(S.reshape(valid, (n, c, 1)),
                         S.reshape(M.logical_not(listed), (n, 1, c)))
    loss = E.div(R.sum(E.where(pair, hinge, 0.0), (1, 2)), c)
    if single:
        loss = S.reshape(loss, ())
    return _reduce(loss, reduction)


def _logsumexp3(a: Any, b: Any, c: Any) -> Any:
    """``log(exp(a) + exp(b) + exp(c))`` where all three may be -inf, with finite
    gradients (zero where every term is -inf)."""
    m = S.stop_gradient(E.maximum(E.maximum(a, b), c))
    m = E.where(E.eq(m, -math.inf), 0.0, m)
    s = E.add(E.add(E.exp(E.sub(a, m)), E.exp(E.sub(b, m))), E.exp(E.sub(c, m)))
    pos = E.gt(s, 0.0)
    return E.where(pos, E.add(E.log(E.where(pos, s, 1.0)), m), -math.inf)


def ctc_loss(log_probs: Any, targets: Any, input_lengths: Any, target_lengths: Any,
             blank: int = 0, reduction: str = "mean", zero_infinity: bool = False) -> Any:
    """Connectionist temporal classification loss of ``log_probs`` (T, N, C) or (T, C)
    (log-softmax outputs) against ``targets`` (N, S) padded, or 1-D concatenated, with
    per-sample ``input_lengths`` and ``target_lengths``. The forward (alpha) recursion
    runs in log space over the time steps; the gradient is its reverse. ``'mean'`` divides
    each loss by its target length, then averages over the batch, as PyTorch."""
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    unbatched = log_probs.ndim == 2
    if log_probs.ndim not in (2, 3):
        raise RuntimeError(f"ctc_loss: expected log_probs to be 2D or 3D, got shape "
                           f"{tuple(log_probs.shape)}")
    lp = S.reshape(log_probs, (log_probs.shape[0], 1, -1)) if unbatched else log_probs
    n_t, n, c = lp.shape
    if not 0 <= blank < c:
        raise RuntimeError("blank must be in label range")

    def lengths(v: Any) -> Any:
        if isinstance(v, (int, np.integer)):
            v = [v]
        arr = v if isinstance(v, TensorOps) else np.asarray(v, np.int64)
        return S.reshape(S.astype(arr, np.int64), (n,))

    in_len, tgt_len = lengths(input_lengths), lengths(target_lengths)
    tg = _target(targets)
    if unbatched or tg.ndim == 1:
        if not unbatched:  # concatenated targets: split them by the (known) lengths
            tl = array_of(tgt_len) if isinstance(tgt_len, Tensor) else None
            if tl is None:
                raise RuntimeError("ctc_loss: 1-D concatenated targets need concrete "
                                   "target_lengths; pass (N, S) padded targets instead")
            width = int(tl.max()) if tl.size else 0
            starts = np.concatenate([[0], np.cumsum(tl)[:-1]]).astype(np.int64)
            pos = np.minimum(starts[:, None] + np.arange(width)[None, :],
                             max(int(tg.shape[0]) - 1, 0))
            tg = I.gather(S.reshape(tg, (1, -1)), 1, pos.reshape(1, -1)) if width else \
                np.zeros((n, 0), np.int64)
            tg = S.reshape(tg, (n, width))
        else:
            tg = S.reshape(tg, (1, -1))
    s_max = tg.shape[1]
    width = 2 * s_max + 1
    # The extended label sequence: blank, l1, blank, l2, ..., blank.
    blanks = np.full((n, s_max), blank, np.int64)
    ext = S.reshape(S.stack([blanks, S.astype(tg, np.int64)], -1), (n, 2 * s_max)) \
        if s_max else np.zeros((n, 0), np.int64)
    ext = S.concatenate([ext, np.full((n, 1), blank, np.int64)], 1)
    # A label may follow the one two places back when it is not blank and differs from it.
    prev2 = S.concatenate([np.full((n, 2), blank, np.int64), ext[:, :-2]], 1)
    skip = M.logical_and(E.ne(ext, blank), E.ne(ext, prev2))
    neg_inf = np.full((n, 1), -math.inf, np.dtype(lp.dtype))
    neg_inf2 = np.full((n, 2), -math.inf, np.dtype(lp.dtype))
    start = np.full((n, width), -math.inf, np.dtype(lp.dtype))
    start[:, :2] = 0.0
    t_idx = np.arange(n_t)
    alpha, final = None, None
    for t in range(n_t):
        emit = I.gather(lp[t], 1, ext)
        if alpha is None:
            alpha = E.add(start, emit)
        else:
            a1 = S.concatenate([neg_inf, alpha[:, :-1]], 1)
            a2 = E.where(skip, S.concatenate([neg_inf2, alpha[:, :-2]], 1), -math.inf)
            alpha = E.add(_logsumexp3(alpha, a1, a2), emit)
        at_end = S.reshape(E.eq(E.sub(in_len, 1), int(t_idx[t])), (n, 1))
        final = E.where(at_end, alpha, -math.inf if final is None else final)
    # The paths end at the last label or the blank after it.
    last = S.reshape(E.mul(tgt_len, 2), (n, 1))
    end_blank = I.gather(final, 1, last)
    end_label = E.where(E.gt(last, 0), I.gather(final, 1, E.maximum(E.sub(last, 1), 0)),
                        -math.inf)
    loss = S.reshape(E.neg(_logsumexp3(end_blank, end_label, neg_inf)), (n,))
    if zero_infinity:
        loss = E.where(E.eq(loss, math.inf), 0.0, loss)
    if unbatched:
        loss = S.reshape(loss, ())
    if reduction == "mean":
        per = E.div(loss, S.astype(E.maximum(S.reshape(tgt_len, tuple(loss.shape)), 1),
                                   loss.dtype))
        return R.mean(per)
    return _reduce(loss, reduction)

