"""`dg.utils`: PyTorch's utilities (`dg.utils.data`: datasets, samplers, `DataLoader`;
`dg.utils.tensorboard`: a `SummaryWriter` for scalars; `dg.utils.checkpoint`: activation
checkpointing's API)."""

from . import benchmark, checkpoint, data, tensorboard

__all__ = ["benchmark", "checkpoint", "data", "tensorboard"]
