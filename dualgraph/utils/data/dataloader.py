"""``torch.utils.data.dataloader``'s names (``from torch.utils.data.dataloader import
DataLoader``)."""

from ._impl import DataLoader, default_collate, default_convert, get_worker_info

__all__ = ["DataLoader", "default_collate", "default_convert", "get_worker_info"]
