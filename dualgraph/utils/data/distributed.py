"""``torch.utils.data.distributed``: `DistributedSampler`, one replica's share of a dataset.

dualgraph runs one process and has no process group (``dg.distributed.is_initialized()``
is False), so ``num_replicas`` and ``rank`` must be given; each replica's indices are then
PyTorch's: the (shuffled) indices padded by repetition, or cut with ``drop_last``, to a
multiple of ``num_replicas``, and every ``num_replicas``-th one from ``rank``. The shuffle
is seeded with ``seed + epoch`` (`set_epoch`): the same on every replica, but not the
order PyTorch's generator would give.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

from ...eager.creation import Generator, randperm
from ._impl import Sampler

__all__ = ["DistributedSampler"]


class DistributedSampler(Sampler):
    """Replica ``rank`` of ``num_replicas``'s indices of ``dataset``.

    >>> s = DistributedSampler(range(10), num_replicas=3, rank=1, shuffle=False)
    >>> list(s)
    [1, 4, 7, 0]
    """

    def __init__(self, dataset: Any, num_replicas: int | None = None, rank: int | None = None,
                 shuffle: bool = True, seed: int = 0, drop_last: bool = False) -> None:
        if num_replicas is None or rank is None:
            raise RuntimeError(
                "DistributedSampler: give num_replicas and rank (Default process group has "
                "not been initialized: dualgraph runs a single process)")
        if rank >= num_replicas or rank < 0:
            raise ValueError(f"Invalid rank {rank}, rank should be in the interval "
                             f"[0, {num_replicas - 1}]")
        self.dataset = dataset
        self.num_replicas = num_replicas
        self.rank = rank
        self.epoch = 0
        self.drop_last = drop_last
        n = len(dataset)
        if drop_last and n % num_replicas != 0:
            self.num_samples = math.ceil((n - num_replicas) / num_replicas)
        else:
            self.num_samples = math.ceil(n / num_replicas)
        self.total_size = self.num_samples * num_replicas
        self.shuffle = shuffle
        self.seed = seed

    def __iter__(self) -> Iterator[int]:
        n = len(self.dataset)
        if self.shuffle:
            gen = Generator().manual_seed(self.seed + self.epoch)
            indices = randperm(n, generator=gen).tolist()
        else:
            indices = list(range(n))
        if not self.drop_last:
            padding = self.total_size - len(indices)
            if padding <= len(indices):
                indices += indices[:padding]
            else:
                indices += (indices * math.ceil(padding / len(indices)))[:padding]
        else:
            indices = indices[:self.total_size]
        return iter(indices[self.rank:self.total_size:self.num_replicas])

    def __len__(self) -> int:
        return self.num_samples

    def set_epoch(self, epoch: int) -> None:
        """The epoch the next shuffle is seeded with (call it before each epoch)."""
        self.epoch = epoch
