"""``torch.nn.modules.instancenorm``'s names (the layers live in `normalization`)."""

# PyTorch's private base too: custom norm layers import it from here.
from .normalization import (  # noqa: F401
    InstanceNorm1d,
    InstanceNorm2d,
    InstanceNorm3d,
    _InstanceNorm,
)

__all__ = ["InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d"]
