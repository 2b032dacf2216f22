"""`DistributedSampler`, `ChainDataset` and `StackDataset` of `dg.utils.data`, with the
index lists PyTorch's sampler gives (worked out from its padding rule)."""

from __future__ import annotations

import pytest

import dualgraph as dg
from dualgraph.utils.data import (
    ChainDataset,
    DataLoader,
    DistributedSampler,
    IterableDataset,
    StackDataset,
)


@pytest.mark.parametrize("n, replicas, drop_last, want", [
    # padded by repeating the first indices to a multiple of the replicas
    (10, 3, False, [[0, 3, 6, 9], [1, 4, 7, 0], [2, 5, 8, 1]]),
    # cut to a multiple instead
    (10, 3, True, [[0, 3, 6], [1, 4, 7], [2, 5, 8]]),
    # fewer samples than replicas: the indices repeat more than once
    (2, 5, False, [[0], [1], [0], [1], [0]]),
    (8, 4, True, [[0, 4], [1, 5], [2, 6], [3, 7]]),
])
def test_each_replica_gets_pytorchs_share(n, replicas, drop_last, want):
    got = [list(DistributedSampler(range(n), replicas, r, shuffle=False, drop_last=drop_last))
           for r in range(replicas)]
    assert got == want
    assert [len(DistributedSampler(range(n), replicas, r, drop_last=drop_last))
            for r in range(replicas)] == [len(w) for w in want]


def test_shuffle_is_shared_by_the_replicas_and_reseeded_by_set_epoch():
    samplers = [DistributedSampler(range(12), 3, r, seed=5) for r in range(3)]
    parts = [list(s) for s in samplers]
    assert sorted(sum(parts, [])) == list(range(12))  # one permutation, split
    assert parts == [list(s) for s in samplers]  # the same epoch, the same order
    for s in samplers:
        s.set_epoch(1)
    assert [list(s) for s in samplers] != parts
    loader = DataLoader(list(range(12)), batch_size=2, sampler=samplers[0])
    assert sum(len(b) for b in loader) == 4


def test_distributed_sampler_needs_replicas_and_a_valid_rank():
    with pytest.raises(RuntimeError, match="num_replicas and rank"):
        DistributedSampler(range(4))
    with pytest.raises(ValueError, match="Invalid rank 3"):
        DistributedSampler(range(4), num_replicas=3, rank=3)


class _Count(IterableDataset):
    def __init__(self, k: int) -> None:
        self.k = k

    def __iter__(self):
        return iter(range(self.k))

    def __len__(self) -> int:
        return self.k


def test_chain_and_stack_datasets():
    chain = ChainDataset([_Count(2), _Count(3)])
    assert list(chain) == [0, 1, 0, 1, 2] and len(chain) == 5
    with pytest.raises(AssertionError, match="IterableDataset"):
        list(ChainDataset([[1, 2]]))
    xs, ys = dg.arange(3.0), dg.tensor([5, 6, 7])
    s = StackDataset(xs, ys)
    assert len(s) == 3 and s[1][1].item() == 6
    d = StackDataset(x=xs, y=ys)
    batch = next(iter(DataLoader(d, batch_size=3)))
    dg.testing.assert_close(batch["x"], xs)
    dg.testing.assert_close(batch["y"], ys)
    with pytest.raises(ValueError, match="Size mismatch"):
        StackDataset(xs, dg.ones(2))
    with pytest.raises(ValueError, match="both types"):
        StackDataset(xs, y=ys)
