"""``torch.nn.modules.batchnorm``'s names (the layers live in `normalization`)."""

# PyTorch's private bases too: custom norm layers import them from here.
from .normalization import (  # noqa: F401
    BatchNorm1d,
    BatchNorm2d,
    BatchNorm3d,
    SyncBatchNorm,
    _BatchNorm,
    _NormBase,
)

__all__ = ["BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "SyncBatchNorm"]
