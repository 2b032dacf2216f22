# In the manner of Mixture-of-Experts layers from public tutorials (switch / top-k gating):
# a router nn.Linear, F.softmax over expert logits, torch.topk of the gates with
# renormalisation, experts in an nn.ModuleList, dispatch by (indices == i).nonzero /
# torch.where, combination with index_add_ into a zeros_like buffer, a load-balancing
# auxiliary loss from the one-hot dispatch (F.one_hot, mean over tokens) and the router's
# probability mass, plus a scatter_add_ token count per expert.
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class Expert(nn.Module):
    def __init__(self, d_model, d_hidden):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d_model, d_hidden), nn.GELU(), nn.Linear(d_hidden, d_model))

    def forward(self, x):
        return self.net(x)


class MoELayer(nn.Module):
    def __init__(self, d_model=8, d_hidden=16, num_experts=4, top_k=2):
        super().__init__()
        self.num_experts = num_experts
        self.top_k = top_k
        self.router = nn.Linear(d_model, num_experts, bias=False)
        self.experts = nn.ModuleList([Expert(d_model, d_hidden) for _ in range(num_experts)])

    def forward(self, x):
        B, T, C = x.shape
        x_flat = x.view(-1, C)
        router_logits = self.router(x_flat)
        probs = F.softmax(router_logits, dim=-1)
        topk_probs, topk_idx = torch.topk(probs, self.top_k, dim=-1)
        topk_probs = topk_probs / topk_probs.sum(dim=-1, keepdim=True)
        out = torch.zeros_like(x_flat)
        for i, expert in enumerate(self.experts):
            mask = topk_idx == i
            token_idx, slot = torch.where(mask)
            if token_idx.numel() == 0:
                continue
            expert_out = expert(x_flat[token_idx])
            out.index_add_(0, token_idx, expert_out * topk_probs[token_idx, slot].unsqueeze(-1))
        one_hot = F.one_hot(topk_idx[:, 0], num_classes=self.num_experts).float()
        tokens_per_expert = one_hot.mean(0)
        prob_per_expert = probs.mean(0)
        aux_loss = self.num_experts * (tokens_per_expert * prob_per_expert).sum()
        counts = torch.zeros(self.num_experts, dtype=torch.long)
        counts.scatter_add_(0, topk_idx.flatten(), torch.ones_like(topk_idx.flatten()))
        return out.view(B, T, C), aux_loss, counts


class MoEClassifier(nn.Module):
    def __init__(self, vocab=16, d_model=8, n_classes=3):
        super().__init__()
        self.emb = nn.Embedding(vocab, d_model)
        self.ln = nn.LayerNorm(d_model)
        self.moe = MoELayer(d_model)
        self.head = nn.Linear(d_model, n_classes)

    def forward(self, idx):
        h = self.emb(idx)
        m, aux, counts = self.moe(self.ln(h))
        h = h + m
        return self.head(h.mean(1)), aux, counts


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    rng = np.random.default_rng(6)
    model = MoEClassifier()
    if weights is not None:
        model.load_state_dict({k: torch.tensor(v) for k, v in weights.items()})
    w = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.01)

    def train_step(idx, y):
        logits, aux, counts = model(idx)
        loss = F.cross_entropy(logits, y) + 0.01 * aux
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        return loss, aux, counts

    step = torch.compile(train_step) if compiled else train_step
    losses = []
    for i in range(10):
        idx = rng.integers(0, 16, (8, 6))
        y = torch.from_numpy(idx.max(1) % 3)
        loss, aux, counts = step(torch.from_numpy(idx), y)
        losses += [loss.item(), aux.item()] + counts.tolist()
    return {"losses": losses, "weights": w, "fn": step}
