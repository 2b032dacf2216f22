# In the manner of attention-pooling / capsule-routing snippets written with einsum: a
# multi-head attention pooling with a learned query (torch.einsum('bhd,bnhd->bhn')),
# masked_fill with -inf of padded positions, einops-free rearranges by permute/reshape,
# dynamic routing between capsules with the squash nonlinearity (norm ** 2 / (1 + norm ** 2)),
# F.softmax over the routing logits, `b = b + (u_hat * v.unsqueeze(2)).sum(-1)` for three
# iterations, and a margin loss built from F.relu(0.9 - lengths) ** 2.
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class AttentionPool(nn.Module):
    def __init__(self, dim=8, heads=2):
        super().__init__()
        self.heads = heads
        self.query = nn.Parameter(torch.randn(heads, dim // heads))
        self.to_kv = nn.Linear(dim, dim * 2, bias=False)
        self.scale = (dim // heads) ** -0.5

    def forward(self, x, mask):
        b, n, d = x.shape
        k, v = self.to_kv(x).chunk(2, dim=-1)
        k = k.reshape(b, n, self.heads, -1)
        v = v.reshape(b, n, self.heads, -1)
        sim = torch.einsum('hd,bnhd->bhn', self.query, k) * self.scale
        sim = sim.masked_fill(~mask[:, None, :], float('-inf'))
        attn = sim.softmax(dim=-1)
        out = torch.einsum('bhn,bnhd->bhd', attn, v)
        return out.reshape(b, -1)


def squash(s, dim=-1):
    norm_sq = (s ** 2).sum(dim=dim, keepdim=True)
    return norm_sq / (1 + norm_sq) * s / torch.sqrt(norm_sq + 1e-8)


class CapsuleLayer(nn.Module):
    def __init__(self, in_caps=4, in_dim=4, out_caps=3, out_dim=6, iterations=3):
        super().__init__()
        self.iterations = iterations
        self.W = nn.Parameter(0.1 * torch.randn(1, in_caps, out_caps, out_dim, in_dim))

    def forward(self, u):
        u_hat = torch.einsum('iocj,bij->bioc', self.W[0], u)
        b = torch.zeros(u.size(0), u.size(1), self.W.size(2))
        for i in range(self.iterations):
            c = F.softmax(b, dim=2)
            s = (c.unsqueeze(-1) * u_hat).sum(dim=1)
            v = squash(s)
            if i < self.iterations - 1:
                b = b + (u_hat * v.unsqueeze(1)).sum(-1)
        return v


class Net(nn.Module):
    def __init__(self, vocab=12):
        super().__init__()
        self.emb = nn.Embedding(vocab, 8, padding_idx=0)
        self.pool = AttentionPool()
        self.primary = nn.Linear(8, 16)
        self.caps = CapsuleLayer()

    def forward(self, tokens):
        mask = tokens != 0
        pooled = self.pool(self.emb(tokens), mask)
        u = squash(self.primary(pooled).view(-1, 4, 4))
        v = self.caps(u)
        return v.norm(dim=-1)


def margin_loss(lengths, labels, m_pos=0.9, m_neg=0.1, lam=0.5):
    t = F.one_hot(labels, lengths.size(1)).float()
    loss = t * F.relu(m_pos - lengths) ** 2 + lam * (1 - t) * F.relu(lengths - m_neg) ** 2
    return loss.sum(dim=1).mean()


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    rng = np.random.default_rng(23)
    model = Net()
    if weights is not None:
        model.load_state_dict({k: torch.tensor(v) for k, v in weights.items()})
    w = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)

    def train_step(tokens, labels):
        optimizer.zero_grad()
        lengths = model(tokens)
        loss = margin_loss(lengths, labels)
        loss.backward()
        optimizer.step()
        return loss, lengths

    step = torch.compile(train_step) if compiled else train_step
    losses = []
    for i in range(10):
        tokens = rng.integers(1, 12, (8, 6))
        lens = rng.integers(3, 7, 8)
        tokens[np.arange(6)[None, :] >= lens[:, None]] = 0
        labels = torch.from_numpy(tokens[:, 0] % 3)
        loss, lengths = step(torch.from_numpy(tokens), labels)
        acc = (lengths.argmax(1) == labels).float().mean()
        losses += [loss.item(), acc.item()]
    return {"losses": losses, "weights": w, "fn": step}
