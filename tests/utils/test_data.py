"""`dg.utils.data`: datasets, samplers, collation and `DataLoader`, with PyTorch's
behaviour (the collate results below are what torch 2.13 returns for the same input)."""

from __future__ import annotations

import collections

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.utils.data import (
    BatchSampler,
    ConcatDataset,
    DataLoader,
    Dataset,
    IterableDataset,
    RandomSampler,
    SequentialSampler,
    Subset,
    SubsetRandomSampler,
    TensorDataset,
    WeightedRandomSampler,
    default_collate,
    random_split,
)


class Squares(Dataset):
    def __init__(self, n: int) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> tuple:
        return dg.tensor([float(i), float(i * i)]), i


class Stream(IterableDataset):
    def __init__(self, n: int) -> None:
        self.n = n

    def __iter__(self):
        return iter(range(self.n))

    def __len__(self) -> int:
        return self.n


def test_tensor_dataset_indexing_and_size_check() -> None:
    x, y = dg.arange(12.0).reshape(6, 2), dg.arange(6)
    ds = TensorDataset(x, y)
    assert len(ds) == 6
    a, b = ds[2]
    np.testing.assert_array_equal(a.numpy(), [4.0, 5.0])
    assert int(b) == 2
    with pytest.raises(ValueError, match="Size mismatch between tensors"):
        TensorDataset(x, dg.arange(5))


def test_sequential_batches_keep_order_and_drop_last() -> None:
    loader = DataLoader(Squares(5), batch_size=2)
    batches = list(loader)
    assert len(loader) == 3 and len(batches) == 3
    xs, ys = batches[0]
    np.testing.assert_array_equal(xs.numpy(), [[0.0, 0.0], [1.0, 1.0]])
    np.testing.assert_array_equal(ys.numpy(), [0, 1])
    assert batches[2][0].shape == (1, 2)
    dropped = DataLoader(Squares(5), batch_size=2, drop_last=True)
    assert len(dropped) == 2 and len(list(dropped)) == 2


def test_shuffle_with_a_generator_is_reproducible_and_a_permutation() -> None:
    def order(seed):
        g = dg.Generator().manual_seed(seed)
        loader = DataLoader(Squares(10), batch_size=3, shuffle=True, generator=g)
        return [i for _, ys in loader for i in ys.tolist()]

    a, b = order(0), order(0)
    assert a == b and sorted(a) == list(range(10)) and a != list(range(10))
    assert order(1) != a


def test_shuffle_without_a_generator_follows_manual_seed_and_changes_per_epoch() -> None:
    loader = DataLoader(Squares(8), batch_size=8, shuffle=True)
    dg.manual_seed(3)
    e1, e2 = [next(iter(loader))[1].tolist() for _ in range(2)]
    dg.manual_seed(3)
    assert next(iter(loader))[1].tolist() == e1 and e1 != e2


def test_collate_fn_and_default_collate_forms() -> None:
    loader = DataLoader(Squares(4), batch_size=2, collate_fn=lambda batch: len(batch))
    assert list(loader) == [2, 2]
    assert default_collate([1.5, 2.0]).dtype == np.float64
    assert default_collate([True, False]).dtype == np.bool_
    assert default_collate([np.float32(1), np.float32(2)]).dtype == np.float32
    assert default_collate([np.array([1, 2]), np.array([3, 4])]).dtype == np.int64
    point = collections.namedtuple("point", "a b")
    p = default_collate([point(1, 2.0), point(3, 4.0)])
    assert type(p) is point and p.a.tolist() == [1, 3] and p.b.dtype == np.float64
    d = default_collate([{"x": 1, "y": "s"}, {"x": 2, "y": "t"}])
    assert d["x"].tolist() == [1, 2] and d["y"] == ["s", "t"]
    cols = default_collate([[1, 2], [3, 4]])
    assert isinstance(cols, list) and [c.tolist() for c in cols] == [[1, 3], [2, 4]]
    tup = default_collate([(dg.zeros(2), 1), (dg.ones(2), 0)])
    assert isinstance(tup, list) and tup[0].shape == (2, 2)
    with pytest.raises(RuntimeError, match="equal size"):
        default_collate([[1, 2], [3]])
    with pytest.raises(TypeError, match="found object"):
        default_collate([object(), object()])


def test_batch_size_none_converts_single_samples() -> None:
    out = list(DataLoader(TensorDataset(dg.arange(3.0)), batch_size=None))
    assert len(out) == 3 and isinstance(out[0], list) and out[0][0].shape == ()
    assert [int(x) for x in DataLoader(list(range(3)), batch_size=None)] == [0, 1, 2]


def test_plain_sequences_are_datasets() -> None:
    loader = DataLoader(list(range(5)), batch_size=2)
    assert [b.tolist() for b in loader] == [[0, 1], [2, 3], [4]] and len(loader) == 3


def test_iterable_dataset_batches_and_refuses_shuffle() -> None:
    loader = DataLoader(Stream(5), batch_size=2)
    assert [b.tolist() for b in loader] == [[0, 1], [2, 3], [4]] and len(loader) == 3
    assert [b.tolist() for b in DataLoader(Stream(5), batch_size=2, drop_last=True)] == [
        [0, 1], [2, 3]]
    with pytest.raises(ValueError, match="expected unspecified shuffle"):
        DataLoader(Stream(3), shuffle=True)
    with pytest.raises(TypeError, match="no indexing"):
        Stream(3)[0]


def test_num_workers_and_process_options_are_accepted_and_change_nothing() -> None:
    ref = [b[1].tolist() for b in DataLoader(Squares(6), batch_size=4)]
    loader = DataLoader(Squares(6), batch_size=4, num_workers=4, pin_memory=True,
                        persistent_workers=True, prefetch_factor=2, timeout=5,
                        worker_init_fn=lambda i: None)
    assert [b[1].tolist() for b in loader] == ref
    assert dg.utils.data.get_worker_info() is None


@pytest.mark.parametrize("kwargs, match", [
    ({"num_workers": -1}, "num_workers option should be non-negative"),
    ({"prefetch_factor": 2}, "prefetch_factor option could only be specified"),
    ({"persistent_workers": True}, "persistent_workers option needs num_workers > 0"),
    ({"sampler": [0, 1], "shuffle": True}, "mutually exclusive with shuffle"),
    ({"batch_sampler": [[0]], "batch_size": 2}, "mutually exclusive with batch_size"),
    ({"batch_size": None, "drop_last": True}, "mutually exclusive with drop_last"),
    ({"batch_size": 0}, "batch_size should be a positive integer"),
])
def test_dataloader_option_errors_like_torch(kwargs, match) -> None:
    with pytest.raises(ValueError, match=match):
        DataLoader(Squares(4), **kwargs)


def test_samplers() -> None:
    assert list(SequentialSampler(range(4))) == [0, 1, 2, 3]
    g = dg.Generator().manual_seed(0)
    perm = list(RandomSampler(range(6), generator=g))
    assert sorted(perm) == list(range(6))
    drawn = list(RandomSampler(range(3), replacement=True, num_samples=50, generator=g))
    assert len(drawn) == 50 and set(drawn) <= {0, 1, 2}
    more = list(RandomSampler(range(3), num_samples=7, generator=g))
    assert len(more) == 7 and sorted(more[:3]) == [0, 1, 2]
    assert sorted(SubsetRandomSampler([5, 7, 9], generator=g)) == [5, 7, 9]
    w = list(WeightedRandomSampler([0.0, 1.0, 0.0], 5, generator=g))
    assert w == [1] * 5
    bs = BatchSampler(SequentialSampler(range(5)), 2, drop_last=False)
    assert list(bs) == [[0, 1], [2, 3], [4]] and len(bs) == 3
    assert len(BatchSampler(range(5), 2, drop_last=True)) == 2
    loader = DataLoader(Squares(5), batch_sampler=BatchSampler(range(5), 3, False))
    assert [b[1].tolist() for b in loader] == [[0, 1, 2], [3, 4]]
    with pytest.raises(ValueError, match="num_samples should be a positive integer"):
        RandomSampler(range(3), num_samples=0)


def test_subset_concat_and_random_split() -> None:
    sub = Subset(Squares(10), [7, 3])
    assert len(sub) == 2 and sub[0][1] == 7
    cat = ConcatDataset([Squares(2), Squares(3)])
    assert len(cat) == 5 and cat[3][1] == 1 and cat[-1][1] == 2
    assert len(Squares(2) + Squares(3)) == 5
    g = dg.Generator().manual_seed(0)
    a, b = random_split(range(10), [7, 3], generator=g)
    assert len(a) == 7 and len(b) == 3
    assert sorted(list(a) + list(b)) == list(range(10))
    parts = random_split(range(10), [0.5, 0.3, 0.2])
    assert [len(p) for p in parts] == [5, 3, 2]
    parts = random_split(range(11), [0.5, 0.5])  # the remainder goes to the first part
    assert [len(p) for p in parts] == [6, 5]
    again = random_split(range(10), [7, 3], generator=dg.Generator().manual_seed(0))
    assert list(again[0]) == list(a)
    with pytest.raises(ValueError, match="Sum of input lengths"):
        random_split(range(10), [3, 3])


def test_training_loop_with_a_dataloader_and_a_compiled_step() -> None:
    """The usual pattern: batches from a loader feed one compiled step per batch (one
    trace for the full batches, one more for the short last one), matching eager."""
    rng = np.random.default_rng(0)
    x = dg.tensor(rng.standard_normal((10, 3)).astype(np.float32))
    y = dg.tensor(rng.standard_normal((10, 1)).astype(np.float32))

    def train(compiled: bool) -> list:
        dg.manual_seed(0)
        net = dg.nn.Linear(3, 1)
        opt = dg.optim.SGD(net.parameters(), lr=0.1)

        def step(xb, yb):
            opt.zero_grad()
            loss = dg.nn.functional.mse_loss(net(xb), yb)
            loss.backward()
            opt.step()
            return loss

        run = dg.compile(step) if compiled else step
        g = dg.Generator().manual_seed(1)
        loader = DataLoader(TensorDataset(x, y), batch_size=4, shuffle=True, generator=g)
        out = [float(run(xb, yb)) for _ in range(2) for xb, yb in loader]
        if compiled:
            assert run.stats.traces == 2
        return out

    losses = [train(False), train(True)]
    dg.testing.assert_close(losses[1], losses[0], rtol=1e-5, atol=0, equal_nan=True,
                            check_dtype=False)


def test_torchs_submodule_paths_and_a_huge_replacement_sampler() -> None:
    """minGPT's trainer: ``from torch.utils.data.dataloader import DataLoader`` and a
    RandomSampler(replacement=True, num_samples=int(1e10)) of which it reads a few
    batches (drawn lazily, never all at once)."""
    from dualgraph.utils.data.dataloader import DataLoader as Loader
    from dualgraph.utils.data.sampler import RandomSampler as Random

    ds = Squares(6)
    loader = Loader(ds, sampler=Random(ds, replacement=True, num_samples=int(1e10)), shuffle=False,
                pin_memory=True, batch_size=4, num_workers=4)
    it = iter(loader)
    xs, ys = next(it)
    assert xs.shape == (4, 2) and set(ys.tolist()) <= set(range(6))
    assert len(next(it)[1]) == 4
    assert dg.utils.data.dataset.TensorDataset is TensorDataset
