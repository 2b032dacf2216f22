# In the manner of the PyTorch Deep Ensembles implementations (Lakshminarayanan et al.
# 2017): each member a ``GaussianMLP`` predicting a mean and a variance
# ``F.softplus(var) + 1e-6`` from ``torch.split(output, 1, dim=1)``, trained on
# ``nn.GaussianNLLLoss()`` with adversarial examples by the fast gradient sign method
# (``x.requires_grad_()``, ``torch.autograd.grad(nll, x, retain_graph=True)[0]``,
# ``x + eps * torch.sign(grad)``, ``.detach()``), members kept in an ``nn.ModuleList`` with
# one Adamax optimizer each by a list comprehension, a ``HuberLoss`` metric logged, and the
# mixture's prediction ``mean = torch.stack(mus).mean(0)`` and ``var =
# (torch.stack(vars) + torch.stack(mus).pow(2)).mean(0) - mean.pow(2)`` with a Gaussian
# log-likelihood from ``torch.distributions.Normal(mean, var.sqrt()).log_prob``.
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class GaussianMLP(nn.Module):
    def __init__(self, inputs=1, outputs=1, hidden_layers=(16, 16), activation='relu'):
        super(GaussianMLP, self).__init__()
        self.activation = activation
        self.inputs, self.outputs = inputs, outputs
        layers = []
        for i in range(len(hidden_layers)):
            in_f = inputs if i == 0 else hidden_layers[i - 1]
            layers.append(nn.Linear(in_f, hidden_layers[i]))
        self.layers = nn.ModuleList(layers)
        self.out = nn.Linear(hidden_layers[-1], 2 * outputs)

    def forward(self, x):
        for layer in self.layers:
            x = getattr(F, self.activation)(layer(x))
        x = self.out(x)
        mean, variance = torch.split(x, self.outputs, dim=1)
        variance = F.softplus(variance) + 1e-6
        return mean, variance


class GaussianMixtureMLP(nn.Module):
    def __init__(self, num_models=3, inputs=1, outputs=1, hidden_layers=(16, 16), activation='relu'):
        super(GaussianMixtureMLP, self).__init__()
        self.num_models = num_models
        self.models = nn.ModuleList([GaussianMLP(inputs, outputs, hidden_layers, activation)
                                     for _ in range(num_models)])

    def forward(self, x):
        means, variances = [], []
        for model in self.models:
            mean, var = model(x)
            means.append(mean)
            variances.append(var)
        means = torch.stack(means)
        mean = means.mean(dim=0)
        variances = torch.stack(variances)
        variance = (variances + means.pow(2)).mean(dim=0) - mean.pow(2)
        return mean, variance


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    rng = np.random.default_rng(1210)
    gmm = GaussianMixtureMLP(num_models=3)
    if weights is not None:
        gmm.load_state_dict({k: torch.tensor(v) for k, v in weights.items()})
    w = {k: v.detach().numpy().copy() for k, v in gmm.state_dict().items()}
    optimizers = [torch.optim.Adamax(params=m.parameters(), lr=0.02) for m in gmm.models]
    criterion = nn.GaussianNLLLoss()
    huber = nn.HuberLoss(delta=0.5)
    epsilon = 0.01
    xs = rng.uniform(-2, 2, (3, 8, 1)).astype(np.float32)
    data = [(torch.from_numpy(x), torch.from_numpy((x ** 3 / 4 + 0.1 * rng.standard_normal(x.shape)).astype(np.float32)))
            for x in xs]

    def train_step(model, optimizer, x, y):
        x = x.clone().requires_grad_()
        optimizer.zero_grad()
        mean, var = model(x)
        nll = criterion(mean, y, var)
        x_grad = torch.autograd.grad(nll, x, retain_graph=True)[0]
        x_a = x + epsilon * torch.sign(x_grad)
        mean_a, var_a = model(x_a.detach())
        nll_a = criterion(mean_a, y, var_a)
        loss = nll + nll_a
        loss.backward()
        optimizer.step()
        return loss, huber(mean.detach(), y)

    step = torch.compile(train_step) if compiled else train_step
    losses = []
    for epoch in range(2):
        for x, y in data:
            for i, (model, optimizer) in enumerate(zip(gmm.models, optimizers)):
                loss, metric = step(model, optimizer, x, y)
                losses += [loss.item(), metric.item()]
    with torch.no_grad():
        x, y = data[0]
        mean, var = gmm(x)
        dist = torch.distributions.Normal(mean, var.sqrt())
        losses += [float(dist.log_prob(y).mean()), float(var.mean())]
    return {"losses": losses, "weights": w, "fn": step}
