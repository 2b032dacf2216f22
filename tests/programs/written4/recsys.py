# In the manner of recommender-system tutorials: matrix factorisation with user and item
# nn.Embedding tables and bias embeddings initialised by nn.init.normal_/zeros_,
# `(u * v).sum(1)` plus biases, MSELoss with SparseAdam-free Adam(weight_decay), a neural
# collaborative-filtering model concatenating embeddings into an MLP with
# BCEWithLogitsLoss, and an nn.EmbeddingBag(mode='mean') over each user's item history
# with offsets built by torch.cumsum; evaluation by RMSE and hit counts via topk.
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import numpy as np
import torch
import torch.nn as nn


class MatrixFactorization(nn.Module):
    def __init__(self, n_users, n_items, n_factors=8):
        super().__init__()
        self.user_factors = nn.Embedding(n_users, n_factors)
        self.item_factors = nn.Embedding(n_items, n_factors)
        self.user_bias = nn.Embedding(n_users, 1)
        self.item_bias = nn.Embedding(n_items, 1)
        self.global_bias = nn.Parameter(torch.tensor(3.0))
        nn.init.normal_(self.user_factors.weight, std=0.1)
        nn.init.normal_(self.item_factors.weight, std=0.1)
        nn.init.zeros_(self.user_bias.weight)
        nn.init.zeros_(self.item_bias.weight)

    def forward(self, user, item):
        u = self.user_factors(user)
        v = self.item_factors(item)
        dot = (u * v).sum(1)
        return dot + self.user_bias(user).squeeze() + self.item_bias(item).squeeze() + self.global_bias


class NCF(nn.Module):
    def __init__(self, n_users, n_items, dim=8, layers=(16, 8)):
        super().__init__()
        self.user_emb = nn.Embedding(n_users, dim)
        self.item_emb = nn.Embedding(n_items, dim)
        self.history = nn.EmbeddingBag(n_items, dim, mode='mean')
        mlp = []
        in_dim = 3 * dim
        for out_dim in layers:
            mlp += [nn.Linear(in_dim, out_dim), nn.ReLU()]
            in_dim = out_dim
        self.mlp = nn.Sequential(*mlp)
        self.out = nn.Linear(in_dim, 1)

    def forward(self, user, item, hist, offsets):
        x = torch.cat([self.user_emb(user), self.item_emb(item), self.history(hist, offsets)], dim=-1)
        return self.out(self.mlp(x)).view(-1)


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    rng = np.random.default_rng(11)
    n_users, n_items = 10, 15
    users = rng.integers(0, n_users, 120)
    items = rng.integers(0, n_items, 120)
    ratings = (1 + (users % 5) * 0.5 + (items % 3) + rng.normal(0, 0.3, 120)).astype(np.float32)
    mf = MatrixFactorization(n_users, n_items)
    ncf = NCF(n_users, n_items)
    w = {}
    for j, model in enumerate((mf, ncf)):
        if weights is not None:
            model.load_state_dict({k[2:]: torch.tensor(v) for k, v in weights.items() if k.startswith(f'{j}.')})
        w.update({f'{j}.' + k: v.detach().numpy().copy() for k, v in model.state_dict().items()})
    loss_fn = nn.MSELoss()
    optimizer = torch.optim.Adam(mf.parameters(), lr=0.02, weight_decay=1e-5)

    def mf_step(user, item, rating):
        optimizer.zero_grad()
        pred = mf(user, item)
        loss = loss_fn(pred, rating)
        loss.backward()
        optimizer.step()
        return loss

    step1 = torch.compile(mf_step) if compiled else mf_step
    losses = []
    for epoch in range(3):
        for i in range(0, 96, 24):
            u = torch.LongTensor(users[i:i + 24])
            it = torch.LongTensor(items[i:i + 24])
            r = torch.FloatTensor(ratings[i:i + 24])
            losses.append(step1(u, it, r).item())
    mf.eval()
    with torch.no_grad():
        pred = mf(torch.LongTensor(users[96:]), torch.LongTensor(items[96:]))
        rmse = torch.sqrt(((pred - torch.FloatTensor(ratings[96:])) ** 2).mean())
        losses.append(rmse.item())
        scores = mf.user_factors.weight @ mf.item_factors.weight.T + mf.item_bias.weight.T
        losses += scores.topk(3, dim=1).indices[:3].flatten().tolist()

    # implicit feedback with item histories
    hist_lists = [rng.integers(0, n_items, int(rng.integers(1, 5))) for _ in range(n_users)]
    lengths = torch.tensor([len(h) for h in hist_lists])
    criterion = nn.BCEWithLogitsLoss()
    opt2 = torch.optim.Adam(ncf.parameters(), lr=0.01)

    def ncf_step(user, item, hist, offsets, label):
        opt2.zero_grad()
        logits = ncf(user, item, hist, offsets)
        loss = criterion(logits, label)
        loss.backward()
        opt2.step()
        return loss

    step2 = torch.compile(ncf_step) if compiled else ncf_step
    for epoch in range(2):
        for i in range(0, 96, 24):
            u = users[i:i + 24]
            hist = torch.cat([torch.from_numpy(hist_lists[k]) for k in u])
            lens = lengths[torch.from_numpy(u)]
            offsets = torch.cat([torch.zeros(1, dtype=torch.long), torch.cumsum(lens, dim=0)[:-1]])
            label = torch.from_numpy((ratings[i:i + 24] > 2.5).astype(np.float32))
            losses.append(step2(torch.from_numpy(u), torch.from_numpy(items[i:i + 24]), hist, offsets, label).item())
    return {"losses": losses, "weights": w, "fn": [step1, step2]}
