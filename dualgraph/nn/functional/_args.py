"""Argument checks that several families of `nn.functional` share."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...ops.mixin import TensorOps


def _as_operand(x: Any) -> Any:
    if hasattr(x, "shape") and hasattr(x, "dtype"):
        return x
    return np.asarray(x, dtype=np.float32)


def _check_input(name: str, x: Any) -> None:
    if not isinstance(x, TensorOps):
        raise TypeError(f"{name}: input must be a tensor, got {type(x).__name__}")

