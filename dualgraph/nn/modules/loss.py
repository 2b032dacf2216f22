"""Loss modules: PyTorch's constructor arguments over the `functional` losses."""

from __future__ import annotations

from typing import Any

from .. import functional as F
from .module import Module

__all__ = [
    "BCELoss", "BCEWithLogitsLoss", "CrossEntropyLoss", "HuberLoss", "KLDivLoss", "L1Loss",
    "MSELoss", "NLLLoss", "SmoothL1Loss", "SoftMarginLoss",
]


class _Loss(Module):
    def __init__(self, reduction: str = "mean") -> None:
        super().__init__()
        if reduction not in ("mean", "sum", "none"):
            raise ValueError(f"reduction must be 'mean', 'sum' or 'none', got {reduction!r}")
        self.reduction = reduction

    def extra_repr(self) -> str:
        return "" if self.reduction == "mean" else f"reduction={self.reduction!r}"


class MSELoss(_Loss):
    def forward(self, input: Any, target: Any) -> Any:  # noqa: A002
        return F.mse_loss(input, target, self.reduction)


class CrossEntropyLoss(_Loss):
    """``F.cross_entropy`` with PyTorch's arguments: class ``weight``, ``ignore_index``,
    ``reduction`` and ``label_smoothing`` (``size_average``/``reduce`` are the deprecated
    spellings of ``reduction``)."""

    def __init__(self, weight: Any = None, size_average: Any = None, ignore_index: int = -100,
                 reduce: Any = None, reduction: str = "mean",
                 label_smoothing: float = 0.0) -> None:
        super().__init__(F._legacy_reduction(size_average, reduce, reduction))
        self.weight = weight
        self.ignore_index = ignore_index
        self.label_smoothing = label_smoothing

    def forward(self, input: Any, target: Any) -> Any:  # noqa: A002
        return F.cross_entropy(input, target, self.weight, None, self.ignore_index, None,
                               self.reduction, self.label_smoothing)


class BCEWithLogitsLoss(_Loss):
    def __init__(self, weight: Any = None, size_average: Any = None, reduce: Any = None,
                 reduction: str = "mean", pos_weight: Any = None) -> None:
        super().__init__(F._legacy_reduction(size_average, reduce, reduction))
        self.weight = weight
        self.pos_weight = pos_weight

    def forward(self, input: Any, target: Any) -> Any:  # noqa: A002
        return F.binary_cross_entropy_with_logits(input, target, self.weight,
                                                  reduction=self.reduction,
                                                  pos_weight=self.pos_weight)


class NLLLoss(_Loss):
    """``F.nll_loss`` with PyTorch's arguments (``weight``, ``ignore_index``, ``reduction``)."""

    def __init__(self, weight: Any = None, size_average: Any = None, ignore_index: int = -100,
                 reduce: Any = None, reduction: str = "mean") -> None:
        super().__init__(F._legacy_reduction(size_average, reduce, reduction))
        self.weight = weight
        self.ignore_index = ignore_index

    def forward(self, input: Any, target: Any) -> Any:  # noqa: A002
        return F.nll_loss(input, target, self.weight, None, self.ignore_index, None,
                          self.reduction)


class L1Loss(_Loss):
    def forward(self, input: Any, target: Any) -> Any:  # noqa: A002
        return F.l1_loss(input, target, reduction=self.reduction)


class SmoothL1Loss(_Loss):
    def __init__(self, size_average: Any = None, reduce: Any = None, reduction: str = "mean",
                 beta: float = 1.0) -> None:
        super().__init__(F._legacy_reduction(size_average, reduce, reduction))
        self.beta = beta

    def forward(self, input: Any, target: Any) -> Any:  # noqa: A002
        return F.smooth_l1_loss(input, target, reduction=self.reduction, beta=self.beta)


class HuberLoss(_Loss):
    def __init__(self, reduction: str = "mean", delta: float = 1.0) -> None:
        super().__init__(reduction)
        self.delta = delta

    def forward(self, input: Any, target: Any) -> Any:  # noqa: A002
        return F.huber_loss(input, target, reduction=self.reduction, delta=self.delta)


class BCELoss(_Loss):
    def __init__(self, weight: Any = None, size_average: Any = None, reduce: Any = None,
                 reduction: str = "mean") -> None:
        super().__init__(F._legacy_reduction(size_average, reduce, reduction))
        self.weight = weight

    def forward(self, input: Any, target: Any) -> Any:  # noqa: A002
        return F.binary_cross_entropy(input, target, self.weight, reduction=self.reduction)


class KLDivLoss(Module):
    def __init__(self, size_average: Any = None, reduce: Any = None, reduction: str = "mean",
                 log_target: bool = False) -> None:
        super().__init__()
        self.reduction = F._legacy_reduction(size_average, reduce, reduction)
        self.log_target = log_target

    def forward(self, input: Any, target: Any) -> Any:  # noqa: A002
        return F.kl_div(input, target, reduction=self.reduction, log_target=self.log_target)


class SoftMarginLoss(_Loss):
    def forward(self, input: Any, target: Any) -> Any:  # noqa: A002
        return F.soft_margin_loss(input, target, reduction=self.reduction)
