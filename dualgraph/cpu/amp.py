"""``torch.cpu.amp``: the (disabled) mixed-precision tools of `dg.amp`."""

from ..amp import GradScaler, autocast

__all__ = ["GradScaler", "autocast"]
