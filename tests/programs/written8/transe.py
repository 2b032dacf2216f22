# In the manner of mklimasz/TransE-PyTorch's model.py and metric.py (MIT licence) and the
# DistMult/RotatE-style scorers of knowledge-graph embedding code: entity and relation
# ``nn.Embedding``s with a padding row, ``uniform_(-uniform_range, uniform_range)`` init
# from ``6 / np.sqrt(dim)``, relations normalised once with ``.div(...norm(p=1, dim=1,
# keepdim=True))``, entities renormalised in place before each step
# (``self.entities_emb.weight.data[:-1, :].div_(... .norm(p=2, dim=1, keepdim=True))``),
# triplets split by ``triplets[:, 0]``, L1 distances by ``torch.norm(..., p=1, dim=1)``,
# ``nn.MarginRankingLoss(margin=1.0, reduction='none')`` against ``torch.tensor([-1])``,
# corrupted triplets built with ``torch.where`` on a head-or-tail coin, a DistMult scorer
# (``torch.sum(h * r * t, dim=-1)``) trained with ``F.softplus`` and an N3-style
# regulariser, an ``Embedding(max_norm=1.0)`` renormalised on lookup, and hits@k and mean
# reciprocal rank from ``torch.argsort``/``nonzero`` and ``torch.eq``.
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class TransE(nn.Module):
    def __init__(self, entity_count, relation_count, norm=1, dim=8, margin=1.0):
        super(TransE, self).__init__()
        self.entity_count = entity_count
        self.relation_count = relation_count
        self.norm = norm
        self.dim = dim
        self.entities_emb = self._init_enitity_emb()
        self.relations_emb = self._init_relation_emb()
        self.criterion = nn.MarginRankingLoss(margin=margin, reduction='none')

    def _init_enitity_emb(self):
        entities_emb = nn.Embedding(num_embeddings=self.entity_count + 1,
                                    embedding_dim=self.dim,
                                    padding_idx=self.entity_count)
        uniform_range = 6 / np.sqrt(self.dim)
        entities_emb.weight.data.uniform_(-uniform_range, uniform_range)
        return entities_emb

    def _init_relation_emb(self):
        relations_emb = nn.Embedding(num_embeddings=self.relation_count + 1,
                                     embedding_dim=self.dim,
                                     padding_idx=self.relation_count)
        uniform_range = 6 / np.sqrt(self.dim)
        relations_emb.weight.data.uniform_(-uniform_range, uniform_range)
        relations_emb.weight.data[:-1, :].div_(relations_emb.weight.data[:-1, :].norm(p=1, dim=1, keepdim=True))
        return relations_emb

    def forward(self, positive_triplets, negative_triplets):
        self.entities_emb.weight.data[:-1, :].div_(self.entities_emb.weight.data[:-1, :].norm(p=2, dim=1, keepdim=True))
        assert positive_triplets.size()[1] == 3
        positive_distances = self._distance(positive_triplets)
        assert negative_triplets.size()[1] == 3
        negative_distances = self._distance(negative_triplets)
        return self.loss(positive_distances, negative_distances), positive_distances, negative_distances

    def predict(self, triplets):
        return self._distance(triplets)

    def loss(self, positive_distances, negative_distances):
        target = torch.tensor([-1], dtype=torch.long)
        return self.criterion(positive_distances, negative_distances, target)

    def _distance(self, triplets):
        assert triplets.size()[1] == 3
        heads = triplets[:, 0]
        relations = triplets[:, 1]
        tails = triplets[:, 2]
        return (self.entities_emb(heads) + self.relations_emb(relations) - self.entities_emb(tails)).norm(p=self.norm, dim=1)


class DistMult(nn.Module):
    def __init__(self, n_ent, n_rel, dim=8):
        super().__init__()
        self.ent = nn.Embedding(n_ent, dim, max_norm=1.0)
        self.rel = nn.Embedding(n_rel, dim)
        nn.init.xavier_uniform_(self.ent.weight.data)
        nn.init.xavier_uniform_(self.rel.weight.data)

    def forward(self, h, r, t):
        return torch.sum(self.ent(h) * self.rel(r) * self.ent(t), dim=-1)


def hit_at_k(predictions, ground_truth_idx, k=10):
    assert predictions.size(0) == ground_truth_idx.size(0)
    zero_tensor = torch.tensor([0])
    one_tensor = torch.tensor([1])
    _, indices = predictions.topk(k=k, largest=False)
    return torch.where(indices == ground_truth_idx, one_tensor, zero_tensor).sum().item()


def mrr(predictions, ground_truth_idx):
    indices = predictions.argsort()
    return (1.0 / (indices == ground_truth_idx).nonzero()[:, 1].float().add(1.0)).sum().item()


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    rng = np.random.default_rng(809)
    n_ent, n_rel = 10, 3
    transe = TransE(n_ent, n_rel)
    distmult = DistMult(n_ent, n_rel)
    models = {"transe": transe, "distmult": distmult}
    if weights is not None:
        for name, model in models.items():
            model.load_state_dict({k[len(name) + 1:]: torch.tensor(v) for k, v in weights.items()
                                   if k.startswith(name + ".")})
    w = {f"{name}.{k}": v.detach().numpy().copy() for name, model in models.items()
         for k, v in model.state_dict().items()}
    triples = np.stack([rng.integers(0, n_ent, 12), rng.integers(0, n_rel, 12), rng.integers(0, n_ent, 12)], 1)
    batches = []
    for i in range(3):
        local_heads, local_relations, local_tails = (torch.tensor(triples[i * 4:(i + 1) * 4, j]) for j in range(3))
        positive_triples = torch.stack((local_heads, local_relations, local_tails), dim=1)
        head_or_tail = torch.tensor(rng.integers(0, 2, size=4))
        random_entities = torch.tensor(rng.integers(0, n_ent, size=4))
        broken_heads = torch.where(head_or_tail == 1, random_entities, local_heads)
        broken_tails = torch.where(head_or_tail == 0, random_entities, local_tails)
        negative_triples = torch.stack((broken_heads, local_relations, broken_tails), dim=1)
        batches.append((positive_triples, negative_triples))
    opt_t = torch.optim.SGD(transe.parameters(), lr=0.05)
    opt_d = torch.optim.Adagrad(distmult.parameters(), lr=0.1)

    def transe_step(positive_triples, negative_triples):
        opt_t.zero_grad()
        loss, pd, nd = transe(positive_triples, negative_triples)
        loss.mean().backward()
        opt_t.step()
        return loss.sum()

    def distmult_step(positive_triples, negative_triples):
        opt_d.zero_grad()
        pos = distmult(*positive_triples.unbind(1))
        neg = distmult(negative_triples[:, 0], negative_triples[:, 1], negative_triples[:, 2])
        loss = F.softplus(-pos).mean() + F.softplus(neg).mean()
        reg = sum(torch.sum(torch.abs(e) ** 3) for e in (distmult.rel(positive_triples[:, 1]),))
        loss = loss + 1e-3 * reg
        loss.backward()
        opt_d.step()
        return loss

    steps = [torch.compile(transe_step), torch.compile(distmult_step)] if compiled else [transe_step, distmult_step]
    losses = [float(transe.relations_emb.weight[:-1].abs().sum(1).sum())]
    for epoch in range(3):
        for pos, neg in batches:
            losses.append(steps[0](pos, neg).item())
            losses.append(steps[1](pos, neg).item())
    losses.append(float(transe.entities_emb.weight[-1].abs().sum()))
    with torch.no_grad():
        heads = torch.tensor(triples[:4, 0])
        relations = torch.tensor(triples[:4, 1])
        tails = torch.tensor(triples[:4, 2])
        all_entities = torch.arange(end=n_ent).unsqueeze(0).repeat(4, 1)
        triplets = torch.stack((heads.reshape(-1, 1).repeat(1, n_ent), relations.reshape(-1, 1).repeat(1, n_ent),
                                all_entities), dim=2).reshape(-1, 3)
        tails_predictions = transe.predict(triplets).reshape(4, -1)
        ground_truth = tails.reshape(-1, 1)
        losses.append(hit_at_k(tails_predictions, ground_truth, k=3))
        losses.append(mrr(tails_predictions, ground_truth))
        losses += tails_predictions[0].tolist()
        losses += distmult.ent.weight.norm(dim=1).tolist()
    return {"losses": losses, "weights": w, "fn": steps}
