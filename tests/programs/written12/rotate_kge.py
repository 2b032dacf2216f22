# In the manner of KnowledgeGraphEmbedding's RotatE (DeepGraphLearning, MIT licence): entity
# and relation embeddings as bare ``nn.Parameter(torch.zeros(...))`` initialised by
# ``nn.init.uniform_(tensor=..., a=-r, b=r)`` from a non-trainable ``embedding_range``
# parameter, ``torch.index_select`` of heads, relations and tails for the "single" and
# "tail-batch" modes, ``torch.chunk(head, 2, dim=2)``, relation phases
# ``relation / (embedding_range.item() / pi)`` through ``torch.cos``/``torch.sin``, the
# score ``gamma - torch.stack([re, im], dim=0).norm(dim=0).sum(dim=2)``, self-adversarial
# negative sampling ``(F.softmax(negative_score * temperature, dim=1).detach() *
# F.logsigmoid(-negative_score)).sum(dim=1)``, subsampling weights, an L3 regulariser
# ``norm(p=3) ** 3``, Adam, and a filtered-free ranking evaluation by ``torch.argsort(score,
# dim=1, descending=True)`` and ``(argsort[i, :] == positive_arg[i]).nonzero()``, giving MRR
# and Hits@k.
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class KGEModel(nn.Module):
    def __init__(self, nentity, nrelation, hidden_dim, gamma, double_entity_embedding=True):
        super(KGEModel, self).__init__()
        self.nentity = nentity
        self.nrelation = nrelation
        self.hidden_dim = hidden_dim
        self.epsilon = 2.0
        self.gamma = nn.Parameter(torch.Tensor([gamma]), requires_grad=False)
        self.embedding_range = nn.Parameter(
            torch.Tensor([(self.gamma.item() + self.epsilon) / hidden_dim]), requires_grad=False)
        self.entity_dim = hidden_dim * 2 if double_entity_embedding else hidden_dim
        self.relation_dim = hidden_dim
        self.entity_embedding = nn.Parameter(torch.zeros(nentity, self.entity_dim))
        nn.init.uniform_(tensor=self.entity_embedding, a=-self.embedding_range.item(), b=self.embedding_range.item())
        self.relation_embedding = nn.Parameter(torch.zeros(nrelation, self.relation_dim))
        nn.init.uniform_(tensor=self.relation_embedding, a=-self.embedding_range.item(), b=self.embedding_range.item())

    def forward(self, sample, mode='single'):
        if mode == 'single':
            head = torch.index_select(self.entity_embedding, dim=0, index=sample[:, 0]).unsqueeze(1)
            relation = torch.index_select(self.relation_embedding, dim=0, index=sample[:, 1]).unsqueeze(1)
            tail = torch.index_select(self.entity_embedding, dim=0, index=sample[:, 2]).unsqueeze(1)
        elif mode == 'tail-batch':
            head_part, tail_part = sample
            batch_size, negative_sample_size = tail_part.size(0), tail_part.size(1)
            head = torch.index_select(self.entity_embedding, dim=0, index=head_part[:, 0]).unsqueeze(1)
            relation = torch.index_select(self.relation_embedding, dim=0, index=head_part[:, 1]).unsqueeze(1)
            tail = torch.index_select(self.entity_embedding, dim=0, index=tail_part.view(-1)).view(
                batch_size, negative_sample_size, -1)
        else:
            raise ValueError('mode %s not supported' % mode)
        return self.RotatE(head, relation, tail, mode)

    def RotatE(self, head, relation, tail, mode):
        pi = 3.14159265358979323846
        re_head, im_head = torch.chunk(head, 2, dim=2)
        re_tail, im_tail = torch.chunk(tail, 2, dim=2)
        phase_relation = relation / (self.embedding_range.item() / pi)
        re_relation = torch.cos(phase_relation)
        im_relation = torch.sin(phase_relation)
        re_score = re_head * re_relation - im_head * im_relation
        im_score = re_head * im_relation + im_head * re_relation
        re_score = re_score - re_tail
        im_score = im_score - im_tail
        score = torch.stack([re_score, im_score], dim=0)
        score = score.norm(dim=0)
        score = self.gamma.item() - score.sum(dim=2)
        return score


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    rng = np.random.default_rng(1205)
    nentity, nrelation, neg = 12, 3, 4
    model = KGEModel(nentity, nrelation, hidden_dim=6, gamma=6.0)
    if weights is not None:
        model.load_state_dict({k: torch.tensor(v) for k, v in weights.items()})
    w = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    optimizer = torch.optim.Adam(filter(lambda p: p.requires_grad, model.parameters()), lr=0.05)
    adversarial_temperature, regularization = 1.0, 1e-4
    triples = np.stack([rng.integers(0, nentity, 30), rng.integers(0, nrelation, 30),
                        rng.integers(0, nentity, 30)], 1)
    counts = np.bincount(np.concatenate([triples[:, 0], triples[:, 2]]), minlength=nentity) + 4

    def train_step(positive_sample, negative_sample, subsampling_weight):
        model.train()
        optimizer.zero_grad()
        negative_score = model((positive_sample, negative_sample), mode='tail-batch')
        negative_score = (F.softmax(negative_score * adversarial_temperature, dim=1).detach()
                          * F.logsigmoid(-negative_score)).sum(dim=1)
        positive_score = model(positive_sample)
        positive_score = F.logsigmoid(positive_score).squeeze(dim=1)
        positive_sample_loss = - (subsampling_weight * positive_score).sum() / subsampling_weight.sum()
        negative_sample_loss = - (subsampling_weight * negative_score).sum() / subsampling_weight.sum()
        loss = (positive_sample_loss + negative_sample_loss) / 2
        regularization_loss = regularization * (
            model.entity_embedding.norm(p=3) ** 3 + model.relation_embedding.norm(p=3).norm(p=3) ** 3)
        loss = loss + regularization_loss
        loss.backward()
        optimizer.step()
        return {'positive_sample_loss': positive_sample_loss.item(),
                'negative_sample_loss': negative_sample_loss.item(),
                'loss': loss.item()}

    step = torch.compile(train_step) if compiled else train_step
    losses = []
    for it in range(6):
        idx = rng.choice(len(triples), 6, replace=False)
        pos = triples[idx]
        negs = rng.integers(0, nentity, (6, neg))
        weight = np.sqrt(1 / (counts[pos[:, 0]] + counts[pos[:, 2]])).astype(np.float32)
        log = step(torch.from_numpy(pos), torch.from_numpy(negs), torch.from_numpy(weight))
        losses += [log['positive_sample_loss'], log['negative_sample_loss'], log['loss']]
    model.eval()
    with torch.no_grad():
        test = torch.from_numpy(triples[:8])
        all_tails = torch.arange(nentity).repeat(8, 1)
        score = model((test, all_tails), mode='tail-batch')
        argsort = torch.argsort(score, dim=1, descending=True)
        positive_arg = test[:, 2]
        logs = []
        for i in range(8):
            ranking = (argsort[i, :] == positive_arg[i]).nonzero()
            assert ranking.size(0) == 1
            ranking = 1 + ranking.item()
            logs.append({'MRR': 1.0 / ranking, 'HITS@1': 1.0 if ranking <= 1 else 0.0,
                         'HITS@3': 1.0 if ranking <= 3 else 0.0})
        losses += [sum(log[m] for log in logs) / len(logs) for m in ('MRR', 'HITS@1', 'HITS@3')]
        losses.append(float(score.sum()))
    return {"losses": losses, "weights": w, "fn": step}
