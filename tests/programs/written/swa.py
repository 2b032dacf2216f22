# In the manner of the torch.optim.swa_utils documentation's training loop (SGD with a
# cosine schedule, then stochastic weight averaging with SWALR and update_bn) and of EMA
# models built with get_ema_multi_avg_fn, on a small regression problem.
# Written for dualgraph's tests with the public programs' idioms, not copied from them.
# ruff: noqa
import numpy as np
import torch
import torch.nn as nn
from torch.optim.swa_utils import AveragedModel, SWALR, update_bn, get_ema_multi_avg_fn
from torch.utils.data import DataLoader, TensorDataset


def make_model():
    return nn.Sequential(nn.Linear(4, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Linear(32, 1))


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    model = make_model()
    if weights is not None:
        model.load_state_dict({k: torch.tensor(v) for k, v in weights.items()})
    w = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    rng = np.random.default_rng(0)
    X = rng.standard_normal((64, 4)).astype(np.float32)
    Y = (X @ np.array([[1.0], [-2.0], [0.5], [3.0]], np.float32) + 0.1 * np.sin(X[:, :1] * 3)).astype(np.float32)
    loader = DataLoader(TensorDataset(torch.from_numpy(X), torch.from_numpy(Y)), batch_size=16)
    loss_fn = nn.MSELoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    swa_model = AveragedModel(model)
    ema_model = AveragedModel(model, multi_avg_fn=get_ema_multi_avg_fn(0.9))
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=10)
    swa_start = 3
    swa_scheduler = SWALR(optimizer, swa_lr=0.02, anneal_epochs=2)

    def train_step(xb, yb):
        optimizer.zero_grad()
        loss = loss_fn(model(xb), yb)
        loss.backward()
        optimizer.step()
        return loss

    step = torch.compile(train_step) if compiled else train_step
    losses = []
    for epoch in range(6):
        for xb, yb in loader:
            losses.append(step(xb, yb).item())
            ema_model.update_parameters(model)
        if epoch > swa_start:
            swa_model.update_parameters(model)
            swa_scheduler.step()
        else:
            scheduler.step()
        losses.append(optimizer.param_groups[0]["lr"])
    update_bn(loader, swa_model)
    swa_model.eval()
    ema_model.eval()
    with torch.no_grad():
        xt = torch.from_numpy(X)
        yt = torch.from_numpy(Y)
        losses.append(loss_fn(swa_model(xt), yt).item())
        losses.append(loss_fn(ema_model(xt), yt).item())
        losses.append(swa_model.module[1].running_var.sum().item())
    losses.append(int(swa_model.n_averaged))
    return {"losses": losses, "weights": w, "fn": step}
