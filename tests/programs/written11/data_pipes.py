# In the manner of the ``torch.utils.data`` pipelines of tutorials and research code (the
# PyTorch data documentation's examples, the "writing custom datasets" tutorial, BSD
# licence): an ``IterableDataset`` that shards its range by ``get_worker_info()`` and a
# ``ChainDataset`` of two of them, a map-style dataset returning dicts whose
# ``default_collate`` stacks NumPy arrays and turns Python floats into float64 tensors,
# ``Subset`` by index lists, ``ConcatDataset`` and ``dataset_a + dataset_b`` with
# ``cumulative_sizes``, a ``BatchSampler(SequentialSampler(...), batch_size, drop_last)``
# given as ``batch_sampler=``, ``DataLoader(batch_size=None)`` without automatic batching, a
# ``collate_fn`` padding variable-length token lists with ``pad_sequence(batch_first=True)``
# and returning lengths, ``worker_init_fn``/``pin_memory``/``persistent_workers`` accepted
# with ``num_workers=0``, ``random_split`` by fractions (only its lengths are used), and
# ``model(**batch)`` over a dict batch in the compiled step.
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import math
from collections import namedtuple

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import (BatchSampler, ChainDataset, ConcatDataset, DataLoader, Dataset,
                              IterableDataset, SequentialSampler, Subset, get_worker_info, random_split)
from torch.utils.data.dataloader import default_collate

Pair = namedtuple("Pair", ["x", "y"])


class RangeStream(IterableDataset):
    def __init__(self, start, end, table):
        super().__init__()
        assert end > start
        self.start, self.end, self.table = start, end, table

    def __iter__(self):
        worker_info = get_worker_info()
        if worker_info is None:
            iter_start, iter_end = self.start, self.end
        else:
            per_worker = int(math.ceil((self.end - self.start) / float(worker_info.num_workers)))
            iter_start = self.start + worker_info.id * per_worker
            iter_end = min(iter_start + per_worker, self.end)
        for i in range(iter_start, iter_end):
            yield Pair(self.table[i, :-1], self.table[i, -1:])


class Tabular(Dataset):
    def __init__(self, features, targets, weights):
        self.features, self.targets, self.weights = features, targets, weights

    def __len__(self):
        return len(self.features)

    def __getitem__(self, idx):
        if torch.is_tensor(idx):
            idx = idx.tolist()
        return {"features": self.features[idx], "target": self.targets[idx], "weight": float(self.weights[idx])}


class Tokens(Dataset):
    def __init__(self, seqs, labels):
        self.seqs, self.labels = seqs, labels

    def __len__(self):
        return len(self.seqs)

    def __getitem__(self, i):
        return self.seqs[i], self.labels[i]


def pad_collate(batch):
    seqs, labels = zip(*batch)
    lengths = torch.tensor([len(s) for s in seqs])
    padded = pad_sequence([torch.tensor(s) for s in seqs], batch_first=True, padding_value=0)
    return padded, lengths, torch.tensor(labels, dtype=torch.float32)


class Regressor(nn.Module):
    def __init__(self, n_features=5, vocab=9, emb=6):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(n_features, 12), nn.Tanh(), nn.Linear(12, 1))
        self.embed = nn.Embedding(vocab, emb, padding_idx=0)
        self.head = nn.Linear(emb, 1)

    def forward(self, features=None, target=None, weight=None, tokens=None, lengths=None):
        if tokens is not None:
            mask = (torch.arange(tokens.size(1))[None, :] < lengths[:, None]).unsqueeze(-1)
            pooled = (self.embed(tokens) * mask).sum(1) / lengths.unsqueeze(-1).float()
            return self.head(pooled).squeeze(-1)
        pred = self.mlp(features.float()).squeeze(-1)
        return (weight * (pred.double() - target) ** 2).mean()


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    rng = np.random.default_rng(1107)
    model = Regressor()
    if weights is not None:
        model.load_state_dict({k: torch.tensor(v) for k, v in weights.items()})
    w = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses = []

    feats = rng.standard_normal((14, 5)).astype(np.float32)
    targets = feats @ rng.standard_normal(5) + 0.1
    tab = Tabular(feats, targets, rng.uniform(0.5, 1.5, 14))
    first, second = Subset(tab, list(range(0, 8))), Subset(tab, [8, 10, 12, 9, 11, 13])
    both = ConcatDataset([first, second])
    also = first + second
    losses += [len(both), both.cumulative_sizes[-1], len(also), float(also[9]["target"])]
    sampler = BatchSampler(SequentialSampler(both), batch_size=4, drop_last=False)
    loader = DataLoader(both, batch_sampler=sampler, num_workers=0, pin_memory=True,
                        worker_init_fn=lambda worker_id: np.random.seed(worker_id))
    losses += [len(loader), len(list(sampler))]
    train, val = random_split(tab, [0.75, 0.25], generator=torch.Generator().manual_seed(0))
    losses += [len(train), len(val)]

    def dict_step(batch):
        optimizer.zero_grad()
        loss = model(**batch)
        loss.backward()
        optimizer.step()
        return loss

    def token_step(tokens, lengths, labels):
        optimizer.zero_grad()
        loss = F.mse_loss(model(tokens=tokens, lengths=lengths), labels)
        loss.backward()
        optimizer.step()
        return loss

    dstep = torch.compile(dict_step) if compiled else dict_step
    tstep = torch.compile(token_step) if compiled else token_step
    model.train()
    for epoch in range(2):
        for i, batch in enumerate(loader, start=1):
            if epoch == 0 and i == 1:
                losses += [batch["weight"].dtype == torch.float64, batch["target"].dtype == torch.float64,
                           tuple(batch["features"].shape) == (4, 5)]
            if batch["features"].size(0) < 4:
                continue
            losses.append(dstep(batch).item())

    table = np.concatenate([feats, targets[:, None].astype(np.float32)], axis=1)
    stream = ChainDataset([RangeStream(0, 5, table), RangeStream(9, 12, table)])
    unbatched = DataLoader(stream, batch_size=None)
    pairs = list(unbatched)
    losses += [len(pairs), isinstance(pairs[0], Pair), float(pairs[5].y[0])]
    batched = DataLoader(stream, batch_size=3, collate_fn=default_collate)
    with torch.no_grad():
        model.eval()
        for b in batched:
            losses.append(float(F.mse_loss(model.mlp(torch.as_tensor(b.x)).squeeze(-1), torch.as_tensor(b.y).squeeze(-1))))
    model.train()

    seqs = [list(rng.integers(1, 9, n)) for n in (3, 5, 2, 4, 5, 3, 2, 4)]
    labels = [float(np.mean(s) / 9) for s in seqs]
    token_loader = DataLoader(Tokens(seqs, labels), batch_size=4, shuffle=False, collate_fn=pad_collate,
                              persistent_workers=False)
    for epoch in range(2):
        for tokens, lengths, y in token_loader:
            losses.append(tstep(tokens, lengths, y).item())
    return {"losses": losses, "weights": w, "fn": [dstep, tstep]}
