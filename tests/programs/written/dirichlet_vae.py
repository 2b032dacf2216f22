# In the manner of Dirichlet-latent VAEs for bag-of-words topics (ProdLDA-style: an encoder
# giving Dirichlet concentrations, a KL to a sparse Dirichlet prior, a softmax decoder)
# with a Beta prior on a learned gate and a Gamma prior on a learned temperature.
# Written for dualgraph's tests with the public programs' idioms, not copied from them.
# The latent is the posterior mean here (a test device: torch's and dualgraph's random
# streams differ, so rsample draws would not match).
# ruff: noqa
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributions import Beta, Dirichlet, Gamma, kl_divergence


class DirVAE(nn.Module):
    def __init__(self, vocab=30, hidden=24, topics=5):
        super().__init__()
        self.enc = nn.Sequential(nn.Linear(vocab, hidden), nn.Softplus(), nn.Linear(hidden, topics))
        self.dec = nn.Linear(topics, vocab, bias=False)
        self.gate_logit = nn.Parameter(torch.zeros(topics))
        self.log_temp = nn.Parameter(torch.zeros(()))
        self.register_buffer("prior_alpha", torch.full((topics,), 0.3))

    def forward(self, bow):
        alpha = F.softplus(self.enc(bow)) + 1e-3
        posterior = Dirichlet(alpha)
        theta = posterior.mean
        gate = torch.sigmoid(self.gate_logit)
        logits = self.dec(theta * gate) / self.log_temp.exp()
        recon = -(bow * F.log_softmax(logits, dim=-1)).sum(-1)
        kl = kl_divergence(posterior, Dirichlet(self.prior_alpha.expand_as(alpha)))
        gate_prior = Beta(torch.tensor(2.0), torch.tensor(5.0)).log_prob(gate).sum()
        temp_prior = Gamma(torch.tensor(2.0), torch.tensor(2.0)).log_prob(self.log_temp.exp())
        entropy = posterior.entropy().mean()
        return recon.mean() + kl.mean() - 0.1 * gate_prior - 0.1 * temp_prior, entropy


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    model = DirVAE()
    if weights is not None:
        model.load_state_dict({k: torch.tensor(v) for k, v in weights.items()})
    w = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    rng = np.random.default_rng(0)
    docs = torch.tensor(rng.poisson(0.7, (8, 16, 30)).astype(np.float32))
    opt = torch.optim.Adam(model.parameters(), lr=2e-2)

    def step(bow):
        opt.zero_grad()
        loss, ent = model(bow)
        loss.backward()
        opt.step()
        return loss, ent

    f = torch.compile(step) if compiled else step
    losses = []
    for i in range(docs.shape[0]):
        loss, ent = f(docs[i])
        losses += [loss.item(), ent.item()]
    losses.append(Beta(torch.tensor(2.0), torch.tensor(5.0)).mean.item())
    return {"losses": losses, "weights": w, "fn": f}
