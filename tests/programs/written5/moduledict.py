# In the manner of multi-task / multi-head models built from containers: an
# nn.ModuleDict of task heads chosen by key, an nn.ParameterList of per-layer scales, an
# nn.ParameterDict of task temperatures, nn.Sequential built from an OrderedDict with
# named layers (accessed as model.encoder.fc1), modules registered by add_module and read
# by getattr, named_modules/named_children filters, requires_grad_(False) freezing of one
# head, parameter groups with different learning rates, and RMSprop.
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
from collections import OrderedDict

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class MultiTaskNet(nn.Module):
    def __init__(self, in_dim=6, hidden=16, tasks=None):
        super().__init__()
        tasks = tasks or {"cls": 3, "reg": 1, "aux": 2}
        self.encoder = nn.Sequential(OrderedDict([
            ("fc1", nn.Linear(in_dim, hidden)),
            ("act1", nn.Tanh()),
            ("fc2", nn.Linear(hidden, hidden)),
            ("act2", nn.ReLU()),
        ]))
        self.heads = nn.ModuleDict({name: nn.Linear(hidden, n) for name, n in tasks.items()})
        self.scales = nn.ParameterList([nn.Parameter(torch.ones(hidden)) for _ in range(2)])
        self.temperature = nn.ParameterDict({name: nn.Parameter(torch.tensor(1.0)) for name in tasks})
        for i in range(2):
            self.add_module(f"adapter{i}", nn.Linear(hidden, hidden, bias=False))

    def forward(self, x, task):
        h = self.encoder(x)
        for i, scale in enumerate(self.scales):
            h = h + scale * getattr(self, f"adapter{i}")(h)
        return self.heads[task](h) / self.temperature[task]


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    rng = np.random.default_rng(21)
    model = MultiTaskNet()
    if weights is not None:
        model.load_state_dict({k: torch.tensor(v) for k, v in weights.items()})
    w = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    model.heads["aux"].requires_grad_(False)
    n_linear = sum(1 for name, m in model.named_modules() if isinstance(m, nn.Linear))
    children = [name for name, _ in model.named_children()]
    head_params = [p for n, p in model.named_parameters() if n.startswith("heads.") and p.requires_grad]
    other = [p for n, p in model.named_parameters() if not n.startswith("heads.") and p.requires_grad]
    optimizer = torch.optim.RMSprop([{"params": other}, {"params": head_params, "lr": 3e-3}], lr=1e-3, alpha=0.9)

    def cls_step(x, y):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x, "cls"), y)
        loss.backward()
        optimizer.step()
        return loss

    def reg_step(x, t):
        optimizer.zero_grad()
        loss = F.smooth_l1_loss(model(x, "reg").squeeze(-1), t)
        loss.backward()
        optimizer.step()
        return loss

    s1 = torch.compile(cls_step) if compiled else cls_step
    s2 = torch.compile(reg_step) if compiled else reg_step
    losses = [n_linear, len(children), len(list(model.parameters())), sum(p.numel() for p in model.parameters() if p.requires_grad)]
    for i in range(10):
        x = rng.normal(size=(16, 6)).astype(np.float32)
        y = (x[:, 0] > 0).astype(np.int64) + (x[:, 1] > 1).astype(np.int64)
        t = (x[:, 2] * 2 + x[:, 3]).astype(np.float32)
        losses.append(s1(torch.from_numpy(x), torch.from_numpy(y)).item())
        losses.append(s2(torch.from_numpy(x), torch.from_numpy(t)).item())
    with torch.no_grad():
        losses += model(torch.ones(2, 6), "aux").flatten().tolist()
    losses += [model.temperature["cls"].item(), model.scales[1].mean().item(), float(model.encoder.fc1.weight.sum())]
    return {"losses": losses, "weights": w, "fn": [s1, s2]}
