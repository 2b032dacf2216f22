# In the manner of the popular word2vec-pytorch implementations of skip-gram with negative
# sampling: two nn.Embedding tables (sparse=True) initialised with uniform_(-r, r) and
# constant_(0), the score through torch.mul(...).sum / torch.bmm of negatives,
# F.logsigmoid with clamp, SparseAdam with a CosineAnnealingLR, and a nearest-neighbour
# query by cosine similarity of the normalised input vectors. Negatives come from NumPy's
# unigram**0.75 table (a test device: the random streams of the two libraries differ).
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn import init
import torch.optim as optim


class SkipGramModel(nn.Module):

    def __init__(self, emb_size, emb_dimension):
        super(SkipGramModel, self).__init__()
        self.emb_size = emb_size
        self.emb_dimension = emb_dimension
        self.u_embeddings = nn.Embedding(emb_size, emb_dimension, sparse=True)
        self.v_embeddings = nn.Embedding(emb_size, emb_dimension, sparse=True)

        initrange = 1.0 / self.emb_dimension
        init.uniform_(self.u_embeddings.weight.data, -initrange, initrange)
        init.constant_(self.v_embeddings.weight.data, 0)

    def forward(self, pos_u, pos_v, neg_v):
        emb_u = self.u_embeddings(pos_u)
        emb_v = self.v_embeddings(pos_v)
        emb_neg_v = self.v_embeddings(neg_v)

        score = torch.sum(torch.mul(emb_u, emb_v), dim=1)
        score = torch.clamp(score, max=10, min=-10)
        score = -F.logsigmoid(score)

        neg_score = torch.bmm(emb_neg_v, emb_u.unsqueeze(2)).squeeze()
        neg_score = torch.clamp(neg_score, max=10, min=-10)
        neg_score = -torch.sum(F.logsigmoid(-neg_score), dim=1)

        return torch.mean(score + neg_score)


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    vocab = 30
    # a corpus where word i tends to be followed by i + 1
    corpus = [int(rng.integers(0, vocab))]
    for _ in range(400):
        corpus.append((corpus[-1] + 1) % vocab if rng.uniform() < 0.7 else int(rng.integers(0, vocab)))
    counts = np.bincount(corpus, minlength=vocab).astype(np.float64)
    table = counts ** 0.75
    table /= table.sum()
    pairs = [(corpus[i], corpus[i + j]) for i in range(len(corpus) - 2) for j in (1, 2)]
    model = SkipGramModel(vocab, 8)
    if weights is not None:
        model.load_state_dict({k: torch.tensor(v) for k, v in weights.items()})
    w = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    optimizer = optim.SparseAdam(list(model.parameters()), lr=0.01)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, 20)

    def step(pos_u, pos_v, neg_v):
        optimizer.zero_grad()
        loss = model.forward(pos_u, pos_v, neg_v)
        loss.backward()
        optimizer.step()
        return loss

    f = torch.compile(step) if compiled else step
    losses = []
    batch_size = 32
    for iteration in range(2):
        running_loss = 0.0
        for i in range(0, 320, batch_size):
            batch = pairs[i:i + batch_size]
            pos_u = torch.LongTensor([u for u, _ in batch])
            pos_v = torch.LongTensor([v for _, v in batch])
            neg_v = torch.from_numpy(rng.choice(vocab, size=(len(batch), 5), p=table))
            loss = f(pos_u, pos_v, neg_v)
            scheduler.step()
            running_loss = running_loss * 0.9 + loss.item() * 0.1
            losses.append(loss.item())
        losses.append(running_loss)
    emb = F.normalize(model.u_embeddings.weight.detach(), dim=1)
    sims = emb @ emb[3]
    losses += sims.topk(4).values.tolist()
    return {"losses": losses, "weights": w, "fn": f}
