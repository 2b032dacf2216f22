"""The implementation of `dg.utils.data` (see the package docstring)."""

from __future__ import annotations

import bisect
import collections.abc
import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np

from ...eager.creation import Generator, default_generator, multinomial, randint, randperm
from ...eager.tensor import Tensor, tensor
from ...ops.shape import stack

__all__ = [
    "BatchSampler", "ChainDataset", "ConcatDataset", "DataLoader", "Dataset",
    "IterableDataset", "RandomSampler", "Sampler", "SequentialSampler", "StackDataset",
    "Subset", "SubsetRandomSampler", "TensorDataset", "WeightedRandomSampler",
    "default_collate", "default_convert", "get_worker_info", "random_split",
]


# ------------------------------------------------------------------------- datasets


class Dataset:
    """A map-style dataset: subclasses define ``__getitem__`` (and usually ``__len__``)."""

    def __getitem__(self, index: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} does not define __getitem__")

    def __add__(self, other: "Dataset") -> "ConcatDataset":
        return ConcatDataset([self, other])


class IterableDataset(Dataset):
    """A dataset that is a stream of samples: subclasses define ``__iter__``."""

    def __iter__(self) -> Iterator:
        raise NotImplementedError(f"{type(self).__name__} does not define __iter__")

    def __getitem__(self, index: Any) -> Any:
        raise TypeError(f"{type(self).__name__} is an IterableDataset: it has no indexing")


class TensorDataset(Dataset):
    """Samples are the ``i``-th rows of tensors that share their first dimension.

    >>> ds = dg.utils.data.TensorDataset(dg.zeros(4, 3), dg.ones(4))
    >>> len(ds), tuple(ds[1][0].shape)
    (4, (3,))
    """

    def __init__(self, *tensors: Any) -> None:
        if not tensors:
            raise ValueError("TensorDataset needs at least one tensor")
        n = tensors[0].shape[0] if tensors[0].shape else None
        if n is None or any(not t.shape or t.shape[0] != n for t in tensors):
            raise ValueError("Size mismatch between tensors: shapes "
                             + ", ".join(str(tuple(t.shape)) for t in tensors))
        self.tensors = tensors

    def __getitem__(self, index: Any) -> tuple:
        return tuple(t[index] for t in self.tensors)

    def __len__(self) -> int:
        return self.tensors[0].shape[0]


class Subset(Dataset):
    """The samples of ``dataset`` at ``indices``, in that order."""

    def __init__(self, dataset: Any, indices: Sequence[int]) -> None:
        self.dataset = dataset
        self.indices = indices

    def __getitem__(self, idx: Any) -> Any:
        if isinstance(idx, list):
            return self.dataset[[self.indices[i] for i in idx]]
        return self.dataset[self.indices[idx]]

    def __len__(self) -> int:
        return len(self.indices)


class ConcatDataset(Dataset):
    """Map-style datasets one after the other."""

    def __init__(self, datasets: Iterable[Any]) -> None:
        self.datasets = list(datasets)
        if not self.datasets:
            raise ValueError("datasets should not be an empty iterable")
        for d in self.datasets:
            if isinstance(d, IterableDataset):
                raise TypeError("ConcatDataset does not support IterableDataset")
        self.cumulative_sizes = list(np.cumsum([len(d) for d in self.datasets]))

    def __len__(self) -> int:
        return int(self.cumulative_sizes[-1])

    def __getitem__(self, idx: int) -> Any:
        if idx < 0:
            if -idx > len(self):
                raise ValueError("absolute value of index should not exceed dataset length")
            idx += len(self)
        d = bisect.bisect_right(self.cumulative_sizes, idx)
        start = 0 if d == 0 else int(self.cumulative_sizes[d - 1])
        return self.datasets[d][idx - start]


class ChainDataset(IterableDataset):
    """Iterable datasets one after the other (chained as their iterators are read)."""

    def __init__(self, datasets: Iterable[Any]) -> None:
        self.datasets = datasets

    def __iter__(self) -> Iterator[Any]:
        for d in self.datasets:
            if not isinstance(d, IterableDataset):
                raise AssertionError("ChainDataset only supports IterableDataset")
            yield from d

    def __len__(self) -> int:
        total = 0
        for d in self.datasets:
            if not isinstance(d, IterableDataset):
                raise AssertionError("ChainDataset only supports IterableDataset")
            total += len(d)
        return total


class StackDataset(Dataset):
    """Datasets of one length read together: ``StackDataset(a, b)[i]`` is ``(a[i], b[i])``
    and ``StackDataset(x=a, y=b)[i]`` is ``{"x": a[i], "y": b[i]}``."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if args and kwargs:
            raise ValueError("Supported either ``tuple``- (via ``args``) or``dict``- (via "
                             "``kwargs``) like input/output, but both types are given.")
        if not args and not kwargs:
            raise ValueError("At least one dataset should be passed")
        self.datasets: Any = args if args else kwargs
        parts = list(args) if args else list(kwargs.values())
        self._length = len(parts[0])
        if any(len(d) != self._length for d in parts):
            raise ValueError("Size mismatch between datasets")

    def __getitem__(self, index: int) -> Any:
        if isinstance(self.datasets, dict):
            return {k: d[index] for k, d in self.datasets.items()}
        return tuple(d[index] for d in self.datasets)

    def __len__(self) -> int:
        return self._length


def random_split(dataset: Any, lengths: Sequence[Any],
                 generator: Generator = default_generator) -> list[Subset]:
    """Split ``dataset`` into non-overlapping random `Subset`\\ s of the given lengths, or
    of the given fractions of its length (the remainder goes one by one to the first
    parts, as PyTorch).

    >>> a, b = dg.utils.data.random_split(range(10), [0.7, 0.3])
    >>> len(a), len(b)
    (7, 3)
    """
    n = len(dataset)
    lengths = list(lengths)
    if lengths and math.isclose(sum(lengths), 1) and sum(lengths) <= 1:
        counts = [int(math.floor(n * f)) for f in lengths]
        for f in lengths:
            if not 0 <= f <= 1:
                raise ValueError(f"Fraction at index {lengths.index(f)} is not between 0 and 1")
        for i in range(n - sum(counts)):
            counts[i % len(counts)] += 1
        lengths = counts
    if sum(lengths) != n:
        raise ValueError("Sum of input lengths does not equal the length of the input dataset!")
    order = randperm(n, generator=generator).tolist()
    out, start = [], 0
    for k in lengths:
        out.append(Subset(dataset, order[start:start + k]))
        start += k
    return out


# ------------------------------------------------------------------------- samplers


class Sampler:
    """Yields dataset indices (or lists of them, for a batch sampler)."""

    def __init__(self, data_source: Any = None) -> None:
        pass

    def __iter__(self) -> Iterator:
        raise NotImplementedError(f"{type(self).__name__} does not define __iter__")


class SequentialSampler(Sampler):
    """``0, 1, ..., len(data_source) - 1``."""

    def __init__(self, data_source: Any) -> None:
        self.data_source = data_source

    def __iter__(self) -> Iterator[int]:
        return iter(range(len(self.data_source)))

    def __len__(self) -> int:
        return len(self.data_source)


def _epoch_generator(generator: Generator | None) -> Generator:
    """The generator of one pass: ``generator`` itself, or (as PyTorch) a fresh one seeded
    from the default generator, so each epoch's order is new and reproducible."""
    if generator is not None:
        return generator
    return Generator().manual_seed(int(randint(0, 2 ** 62, (1,)).item()))


class RandomSampler(Sampler):
    """A random permutation of the indices (or ``num_samples`` draws with
    ``replacement``), from ``generator`` or the default generator."""

    def __init__(self, data_source: Any, replacement: bool = False,
                 num_samples: int | None = None, generator: Generator | None = None) -> None:
        if not isinstance(replacement, bool):
            raise TypeError(f"replacement should be a boolean value, but got "
                            f"replacement={replacement}")
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = num_samples
        self.generator = generator
        if not isinstance(self.num_samples, int) or self.num_samples <= 0:
            raise ValueError(f"num_samples should be a positive integer value, but got "
                             f"num_samples={self.num_samples}")

    @property
    def num_samples(self) -> int:
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self) -> Iterator[int]:
        n = len(self.data_source)
        gen = _epoch_generator(self.generator)
        if self.replacement:
            # In chunks: minGPT asks for num_samples=1e10 and reads only a few batches.
            for start in range(0, self.num_samples, 32):
                k = min(32, self.num_samples - start)
                yield from randint(0, n, (k,), generator=gen).tolist()
            return
        for _ in range(self.num_samples // n):
            yield from randperm(n, generator=gen).tolist()
        yield from randperm(n, generator=gen).tolist()[:self.num_samples % n]

    def __len__(self) -> int:
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given ``indices`` in a random order."""

    def __init__(self, indices: Sequence[int], generator: Generator | None = None) -> None:
        self.indices = indices
        self.generator = generator

    def __iter__(self) -> Iterator[int]:
        for i in randperm(len(self.indices), generator=self.generator).tolist():
            yield self.indices[i]

    def __len__(self) -> int:
        return len(self.indices)


class WeightedRandomSampler(Sampler):
    """``num_samples`` indices drawn with probability proportional to ``weights``."""

    def __init__(self, weights: Sequence[float], num_samples: int, replacement: bool = True,
                 generator: Generator | None = None) -> None:
        if isinstance(num_samples, bool) or not isinstance(num_samples, int) or num_samples <= 0:
            raise ValueError(f"num_samples should be a positive integer value, but got "
                             f"num_samples={num_samples}")
        self.weights = tensor(np.asarray(weights, np.float64))
        if self.weights.ndim != 1:
            raise ValueError(f"weights should be a 1d sequence but given weights have shape "
                             f"{tuple(self.weights.shape)}")
        self.num_samples = num_samples
        self.replacement = replacement
        self.generator = generator

    def __iter__(self) -> Iterator[int]:
        yield from multinomial(self.weights, self.num_samples, self.replacement,
                               generator=self.generator).tolist()

    def __len__(self) -> int:
        return self.num_samples


class BatchSampler(Sampler):
    """Lists of ``batch_size`` indices from ``sampler`` (the last one shorter unless
    ``drop_last``)."""

    def __init__(self, sampler: Iterable[int], batch_size: int, drop_last: bool) -> None:
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size <= 0:
            raise ValueError(f"batch_size should be a positive integer value, but got "
                             f"batch_size={batch_size}")
        if not isinstance(drop_last, bool):
            raise ValueError(f"drop_last should be a boolean value, but got "
                             f"drop_last={drop_last}")
        self.sampler = sampler
        self.batch_size = batch_size
        self.drop_last = drop_last

    def __iter__(self) -> Iterator[list[int]]:
        batch: list[int] = []
        for i in self.sampler:
            batch.append(i)
            if len(batch) == self.batch_size:
                yield batch
                batch = []
        if batch and not self.drop_last:
            yield batch

    def __len__(self) -> int:
        n = len(self.sampler)  # type: ignore[arg-type]
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)


# -------------------------------------------------------------------------- collate


def _is_namedtuple(x: Any) -> bool:
    return isinstance(x, tuple) and hasattr(x, "_fields")


def default_convert(data: Any) -> Any:
    """What an unbatched sample becomes (``batch_size=None``): NumPy arrays and scalars to
    tensors, containers converted element by element, everything else as it is."""
    if isinstance(data, np.ndarray) and data.dtype.kind not in "OUSV":
        return tensor(data)
    if isinstance(data, np.generic):
        return tensor(data)
    if isinstance(data, collections.abc.Mapping):
        return type(data)({k: default_convert(v) for k, v in data.items()})  # type: ignore
    if _is_namedtuple(data):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, list):
        return [default_convert(d) for d in data]
    return data


def default_collate(batch: Sequence[Any]) -> Any:
    """Merge a list of samples into a batch, as PyTorch's ``default_collate``: tensors and
    NumPy arrays are stacked (a new first dimension), Python floats become a float64
    tensor and ints an int64 one, strings stay a list, and dicts, named tuples, tuples and
    lists are collated field by field (a tuple gives a list, as in PyTorch).

    >>> dg.utils.data.default_collate([(dg.zeros(2), 1), (dg.ones(2), 0)])
    [tensor([[0., 0.],
            [1., 1.]]), tensor([1, 0])]
    """
    if not batch:
        raise IndexError("default_collate: the batch is empty")
    elem = batch[0]
    if isinstance(elem, Tensor):
        return stack(list(batch), 0)
    if isinstance(elem, np.ndarray):
        if elem.dtype.kind in "OUSV":
            raise TypeError(f"default_collate: batch must contain tensors, numpy arrays, "
                            f"numbers, dicts or lists; found {elem.dtype}")
        return stack([tensor(b) for b in batch], 0)
    if isinstance(elem, np.generic):
        return tensor(np.array(batch))
    if isinstance(elem, float):
        return tensor(batch, dtype=np.float64)
    if isinstance(elem, int):  # bool too: a bool tensor
        return tensor(batch)
    if isinstance(elem, (str, bytes)):
        return list(batch)
    if isinstance(elem, collections.abc.Mapping):
        try:
            return type(elem)({k: default_collate([d[k] for d in batch]) for k in elem})
        except TypeError:  # a mapping type that cannot be built from a dict
            return {k: default_collate([d[k] for d in batch]) for k in elem}
    if _is_namedtuple(elem):
        return type(elem)(*(default_collate(s) for s in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        size = len(elem)
        if any(len(e) != size for e in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        columns = [default_collate(list(s)) for s in zip(*batch)]
        if isinstance(elem, tuple):
            return columns
        try:
            return type(elem)(columns)
        except TypeError:
            return columns
    raise TypeError(f"default_collate: batch must contain tensors, numpy arrays, numbers, "
                    f"dicts or lists; found {type(elem).__name__}")


def get_worker_info() -> None:
    """None: samples are always loaded in the calling process."""
    return None


# ----------------------------------------------------------------------- DataLoader


class DataLoader:
    """Batches from a dataset, as ``torch.utils.data.DataLoader`` (see the module's
    docstring for what ``num_workers`` and the other process options do here).

    >>> ds = dg.utils.data.TensorDataset(dg.arange(10.0))
    >>> g = dg.Generator().manual_seed(0)
    >>> loader = dg.utils.data.DataLoader(ds, batch_size=4, shuffle=True, generator=g,
    ...                                   drop_last=True)
    >>> len(loader), [tuple(b[0].shape) for b in loader]
    (2, [(4,), (4,)])
    """

    def __init__(self, dataset: Any, batch_size: int | None = 1, shuffle: bool | None = None,
                 sampler: Any = None, batch_sampler: Any = None, num_workers: int = 0,
                 collate_fn: Callable | None = None, pin_memory: bool = False,
                 drop_last: bool = False, timeout: float = 0,
                 worker_init_fn: Callable | None = None, multiprocessing_context: Any = None,
                 generator: Generator | None = None, *, prefetch_factor: int | None = None,
                 persistent_workers: bool = False, pin_memory_device: str = "",
                 in_order: bool = True) -> None:
        if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 0:
            raise ValueError("num_workers option should be non-negative; use num_workers=0 to "
                             "disable multiprocessing.")
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        if num_workers == 0 and prefetch_factor is not None:
            raise ValueError("prefetch_factor option could only be specified in "
                             "multiprocessing. let num_workers > 0 to enable multiprocessing, "
                             "otherwise set prefetch_factor to None.")
        if persistent_workers and num_workers == 0:
            raise ValueError("persistent_workers option needs num_workers > 0")
        self.dataset = dataset
        self.num_workers = num_workers
        self.pin_memory = pin_memory
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.prefetch_factor = prefetch_factor
        self.persistent_workers = persistent_workers
        self.generator = generator
        self._iterable = isinstance(dataset, IterableDataset)
        if self._iterable:
            if shuffle not in (None, False):
                raise ValueError(f"DataLoader with IterableDataset: expected unspecified "
                                 f"shuffle option, but got shuffle={shuffle}")
            if sampler is not None:
                raise ValueError("DataLoader with IterableDataset: expected unspecified sampler "
                                 f"option, but got sampler={sampler}")
            if batch_sampler is not None:
                raise ValueError("DataLoader with IterableDataset: expected unspecified "
                                 f"batch_sampler option, but got batch_sampler={batch_sampler}")
        else:
            if sampler is not None and shuffle:
                raise ValueError("sampler option is mutually exclusive with shuffle")
            if sampler is None:
                sampler = (RandomSampler(dataset, generator=generator) if shuffle
                           else SequentialSampler(dataset))
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None and not isinstance(
                    sampler, SequentialSampler) or drop_last:
                raise ValueError("batch_sampler option is mutually exclusive with batch_size, "
                                 "shuffle, sampler, and drop_last")
            batch_size, drop_last = None, False
        elif batch_size is None and drop_last:
            raise ValueError("batch_size=None option disables auto-batching and is mutually "
                             "exclusive with drop_last")
        if batch_sampler is None and batch_size is not None and not self._iterable:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self.batch_size = batch_size
        self.drop_last = drop_last
        auto = batch_sampler is not None or (self._iterable and batch_size is not None)
        self.collate_fn = collate_fn or (default_collate if auto else default_convert)

    def __iter__(self) -> Iterator:
        fetch, collate = self.dataset.__getitem__, self.collate_fn
        if self._iterable:
            if self.batch_size is None:
                for sample in self.dataset:
                    yield collate(sample)
                return
            batch: list = []
            for sample in self.dataset:
                batch.append(sample)
                if len(batch) == self.batch_size:
                    yield collate(batch)
                    batch = []
            if batch and not self.drop_last:
                yield collate(batch)
        elif self.batch_sampler is not None:
            for indices in self.batch_sampler:
                yield collate([fetch(i) for i in indices])
        else:
            for i in self.sampler:
                yield collate(fetch(i))

    def __len__(self) -> int:
        if self._iterable:
            n = len(self.dataset)
            if self.batch_size is None:
                return n
            return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
        if self.batch_sampler is not None:
            return len(self.batch_sampler)
        return len(self.sampler)
