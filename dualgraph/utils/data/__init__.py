"""`dg.utils.data`: datasets, samplers and `DataLoader`, as ``torch.utils.data``.

A map-style `Dataset` answers ``dataset[i]`` and ``len(dataset)``; an `IterableDataset`
yields samples. `DataLoader` draws indices from a sampler (`SequentialSampler`, or
`RandomSampler` with ``shuffle=True``), groups them with a `BatchSampler`, fetches the
samples and merges them with ``collate_fn`` (`default_collate`: tensors, NumPy arrays
and numbers are stacked into tensors, tuples, lists and dicts are collated field by
field).

Samples are always loaded in the calling process: ``num_workers`` may be any
non-negative int (and ``pin_memory``, ``prefetch_factor``, ``persistent_workers``,
``timeout``, ``worker_init_fn``, ``multiprocessing_context`` are accepted), but no worker
process is started, so a loader gives the same batches, in the same order, whatever
``num_workers`` says. Shuffling draws from the ``generator`` given (a `dg.Generator`) or
from dualgraph's default generator: reproducible under `dg.manual_seed`, but not the
order PyTorch's generator would give.

>>> ds = dg.utils.data.TensorDataset(dg.arange(6.0).reshape(3, 2), dg.tensor([0, 1, 0]))
>>> [tuple(x.shape) for x, y in dg.utils.data.DataLoader(ds, batch_size=2)]
[(2, 2), (1, 2)]
"""

from . import dataloader, dataset, distributed, sampler
from ._impl import (
    BatchSampler,
    ChainDataset,
    ConcatDataset,
    DataLoader,
    Dataset,
    IterableDataset,
    RandomSampler,
    Sampler,
    SequentialSampler,
    StackDataset,
    Subset,
    SubsetRandomSampler,
    TensorDataset,
    WeightedRandomSampler,
    default_collate,
    default_convert,
    get_worker_info,
    random_split,
)
from .distributed import DistributedSampler

__all__ = [
    "BatchSampler", "ChainDataset", "ConcatDataset", "DataLoader", "Dataset",
    "DistributedSampler", "IterableDataset", "RandomSampler", "Sampler", "SequentialSampler",
    "StackDataset", "Subset", "SubsetRandomSampler", "TensorDataset", "WeightedRandomSampler",
    "dataloader", "dataset", "default_collate", "default_convert", "distributed",
    "get_worker_info", "random_split", "sampler",
]
