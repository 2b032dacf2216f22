"""`dg.utils`: PyTorch's utilities (`dg.utils.data`: datasets, samplers, `DataLoader`)."""

from . import data

__all__ = ["data"]
