"""`dg.utils`: PyTorch's utilities (`dg.utils.data`: datasets, samplers, `DataLoader`;
`dg.utils.tensorboard`: a `SummaryWriter` for scalars)."""

from . import data, tensorboard

__all__ = ["data", "tensorboard"]
