# In the manner of exact Gaussian-process regression written in plain PyTorch (the GPyTorch
# "simple GP regression" tutorial's model, written by hand as blog posts and course notes
# do; MIT licence): float64 data from ``torch.linspace(..., dtype=torch.float64)``,
# positive hyperparameters as raw ``nn.Parameter``s through ``F.softplus`` (a
# ``Positive`` constraint with an ``inverse_transform`` by ``torch.log(torch.expm1(x))``),
# an RBF kernel from ``(x1.unsqueeze(-2) - x2.unsqueeze(-3)).pow(2).sum(-1)`` and a
# Matern-5/2 kernel from ``torch.cdist``, the marginal log likelihood by
# ``torch.linalg.cholesky``, ``torch.cholesky_solve`` and ``torch.diagonal(L).log().sum()``
# with jitter ``torch.eye(n, dtype=..., device=...) * 1e-6``, predictions by
# ``torch.linalg.solve_triangular(L, K_s, upper=False)``, Adam on the negative MLL per
# datum, ``model.eval()`` with ``torch.no_grad()``, and figures printed with ``.item()``.
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class Positive:
    def transform(self, x):
        return F.softplus(x)

    def inverse_transform(self, x):
        return torch.log(torch.expm1(x))


class RBFKernel(nn.Module):
    def __init__(self, lengthscale=1.0, outputscale=1.0):
        super().__init__()
        self.constraint = Positive()
        self.raw_lengthscale = nn.Parameter(self.constraint.inverse_transform(torch.tensor(lengthscale, dtype=torch.float64)))
        self.raw_outputscale = nn.Parameter(self.constraint.inverse_transform(torch.tensor(outputscale, dtype=torch.float64)))

    @property
    def lengthscale(self):
        return self.constraint.transform(self.raw_lengthscale)

    @property
    def outputscale(self):
        return self.constraint.transform(self.raw_outputscale)

    def forward(self, x1, x2):
        x1_ = x1 / self.lengthscale
        x2_ = x2 / self.lengthscale
        sq_dist = (x1_.unsqueeze(-2) - x2_.unsqueeze(-3)).pow(2).sum(-1)
        return self.outputscale * torch.exp(-0.5 * sq_dist)


class MaternKernel(RBFKernel):
    def forward(self, x1, x2):
        distance = torch.cdist(x1 / self.lengthscale, x2 / self.lengthscale, p=2)
        exp_component = torch.exp(-math.sqrt(5) * distance)
        constant_component = (math.sqrt(5) * distance).add(1).add(5.0 / 3.0 * distance ** 2)
        return self.outputscale * constant_component * exp_component


class ExactGP(nn.Module):
    def __init__(self, train_x, train_y, kernel):
        super().__init__()
        self.train_x = train_x
        self.train_y = train_y
        self.kernel = kernel
        self.raw_noise = nn.Parameter(torch.tensor(-1.0, dtype=torch.float64))
        self.mean_constant = nn.Parameter(torch.zeros((), dtype=torch.float64))

    @property
    def noise(self):
        return F.softplus(self.raw_noise) + 1e-4

    def _chol(self):
        n = self.train_x.size(0)
        K = self.kernel(self.train_x, self.train_x)
        K = K + (self.noise + 1e-6) * torch.eye(n, dtype=K.dtype, device=K.device)
        return torch.linalg.cholesky(K)

    def neg_mll(self):
        n = self.train_x.size(0)
        L = self._chol()
        resid = (self.train_y - self.mean_constant).unsqueeze(-1)
        alpha = torch.cholesky_solve(resid, L)
        data_fit = 0.5 * (resid * alpha).sum()
        complexity = torch.diagonal(L).log().sum()
        return (data_fit + complexity + 0.5 * n * math.log(2 * math.pi)) / n

    def predict(self, test_x):
        L = self._chol()
        resid = (self.train_y - self.mean_constant).unsqueeze(-1)
        alpha = torch.cholesky_solve(resid, L)
        K_s = self.kernel(self.train_x, test_x)
        mean = self.mean_constant + (K_s.transpose(-1, -2) @ alpha).squeeze(-1)
        v = torch.linalg.solve_triangular(L, K_s, upper=False)
        var = self.kernel.outputscale - v.pow(2).sum(0)
        return mean, var.clamp_min(1e-10)


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    rng = np.random.default_rng(909)
    train_x = torch.linspace(0, 1, 15, dtype=torch.float64).unsqueeze(-1)
    train_y = torch.sin(train_x.squeeze(-1) * (2 * math.pi)) + torch.from_numpy(rng.normal(size=15) * 0.2)
    test_x = torch.linspace(0, 1, 5, dtype=torch.float64).unsqueeze(-1)
    models = {"rbf": ExactGP(train_x, train_y, RBFKernel(0.5)),
              "matern": ExactGP(train_x, train_y, MaternKernel(0.3, 2.0))}
    if weights is not None:
        for name, model in models.items():
            model.load_state_dict({k[len(name) + 1:]: torch.tensor(v) for k, v in weights.items()
                                   if k.startswith(name + ".")})
    w = {f"{name}.{k}": v.detach().numpy().copy() for name, model in models.items()
         for k, v in model.state_dict().items()}
    losses = []
    fns = []
    for name, model in models.items():
        optimizer = torch.optim.Adam(model.parameters(), lr=0.1)

        def train_step():
            optimizer.zero_grad()
            loss = model.neg_mll()
            loss.backward()
            optimizer.step()
            return loss

        step = torch.compile(train_step) if compiled else train_step
        fns.append(step)
        model.train()
        for i in range(8):
            loss = step()
            losses.append(loss.item())
        losses += [model.kernel.lengthscale.item(), model.noise.item()]
        model.eval()
        with torch.no_grad():
            mean, var = model.predict(test_x)
            losses += mean.tolist() + var.tolist()
    return {"losses": losses, "weights": w, "fn": fns}
