# In the manner of MAML on sinusoid regression (learn2learn/higher-style examples written
# with torch.func.functional_call): an inner loop of plain gradient steps on a task's
# support set with create_graph=True, and an outer Adam step on the query loss.
# Written for dualgraph's tests with the public programs' idioms, not copied from them.
# ruff: noqa
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.func import functional_call


def sample_tasks(rng, n_tasks, k):
    amp = rng.uniform(0.1, 5.0, n_tasks)
    phase = rng.uniform(0, np.pi, n_tasks)
    xs = rng.uniform(-5, 5, (n_tasks, 2 * k, 1))
    ys = amp[:, None, None] * np.sin(xs + phase[:, None, None])
    return xs.astype(np.float32), ys.astype(np.float32)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(1, 40), nn.ReLU(), nn.Linear(40, 40), nn.ReLU(),
                                 nn.Linear(40, 1))

    def forward(self, x):
        return self.net(x)


def inner_adapt(model, params, x, y, inner_lr, steps):
    for _ in range(steps):
        loss = F.mse_loss(functional_call(model, params, (x,)), y)
        grads = torch.autograd.grad(loss, list(params.values()), create_graph=True)
        params = {name: p - inner_lr * g for (name, p), g in zip(params.items(), grads)}
    return params


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    model = Net()
    if weights is not None:
        model.load_state_dict({k: torch.tensor(v) for k, v in weights.items()})
    w = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    meta_opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    rng = np.random.default_rng(0)
    k, n_tasks = 5, 4

    def meta_step(xs, ys):
        meta_opt.zero_grad()
        total = 0.0
        for t in range(n_tasks):
            params = dict(model.named_parameters())
            adapted = inner_adapt(model, params, xs[t, :k], ys[t, :k], 0.01, 2)
            query_loss = F.mse_loss(functional_call(model, adapted, (xs[t, k:],)), ys[t, k:])
            query_loss.backward()
            total = total + query_loss.detach()
        meta_opt.step()
        return total / n_tasks

    step = torch.compile(meta_step) if compiled else meta_step
    losses = []
    for it in range(6):
        xs, ys = sample_tasks(rng, n_tasks, k)
        losses.append(step(torch.from_numpy(xs), torch.from_numpy(ys)).item())
    return {"losses": losses, "weights": w, "fn": step}
