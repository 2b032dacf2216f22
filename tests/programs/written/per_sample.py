# In the manner of the torch.func per-sample-gradients tutorial and Opacus-style DP-SGD
# (per-sample gradients from vmap(grad(...)) over functional_call, clipped and averaged).
# Written for dualgraph's tests with the public programs' idioms, not copied from them.
# ruff: noqa
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.func import functional_call, vmap, grad


class SimpleMLP(nn.Module):
    def __init__(self):
        super(SimpleMLP, self).__init__()
        self.fc1 = nn.Linear(20, 32)
        self.fc2 = nn.Linear(32, 16)
        self.fc3 = nn.Linear(16, 4)

    def forward(self, x):
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    model = SimpleMLP()
    if weights is not None:
        model.load_state_dict({k: torch.tensor(v) for k, v in weights.items()})
    w = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    rng = np.random.default_rng(0)
    data = torch.tensor(rng.standard_normal((8, 6, 20)).astype(np.float32))
    targets = torch.tensor(rng.integers(0, 4, (8, 6)))

    params = {k: v.detach() for k, v in model.named_parameters()}
    buffers = {k: v.detach() for k, v in model.named_buffers()}

    def compute_loss(params, buffers, sample, target):
        batch = sample.unsqueeze(0)
        targets = target.unsqueeze(0)
        predictions = functional_call(model, (params, buffers), (batch,))
        loss = F.cross_entropy(predictions, targets)
        return loss

    ft_compute_grad = grad(compute_loss)
    ft_compute_sample_grad = vmap(ft_compute_grad, in_dims=(None, None, 0, 0))

    max_grad_norm, lr = 1.0, 0.5

    def dp_step(params, x, y):
        per_sample_grads = ft_compute_sample_grad(params, buffers, x, y)
        norms = torch.stack([g.reshape(g.shape[0], -1).norm(2, dim=1)
                             for g in per_sample_grads.values()], dim=1).norm(2, dim=1)
        factor = (max_grad_norm / (norms + 1e-6)).clamp(max=1.0)
        new = {}
        for k, p in params.items():
            g = per_sample_grads[k]
            clipped = torch.einsum("i,i...->...", factor, g) / x.shape[0]
            new[k] = p - lr * clipped
        loss = F.cross_entropy(functional_call(model, new, (x,)), y)
        return new, loss, norms

    step = torch.compile(dp_step) if compiled else dp_step
    losses = []
    for i in range(data.shape[0]):
        params, loss, norms = step(params, data[i], targets[i])
        losses.append(loss.item())
        losses.append(norms.sum().item())
    # one check the tutorial makes: the per-sample gradient equals the gradient of that
    # sample's loss alone
    model.load_state_dict(params)
    model.zero_grad()
    F.cross_entropy(model(data[0][:1]), targets[0][:1]).backward()
    g0 = ft_compute_sample_grad(params, buffers, data[0], targets[0])["fc1.weight"][0]
    losses.append(float(torch.allclose(g0, model.fc1.weight.grad, atol=1e-6)))
    return {"losses": losses, "weights": w, "fn": step}
