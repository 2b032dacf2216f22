# In the manner of rtqichen/torchdiffeq's examples/ode_demo.py (MIT licence) with a
# fixed-grid RK4 ``odeint`` written by hand as torchdiffeq's ``rk4`` method steps (the 3/8
# rule, ``_one_third``/``_two_thirds`` constants, a solution filled by
# ``torch.empty(len(t), *y0.shape, dtype=y0.dtype, device=y0.device)`` and
# ``solution[i] = y``), ``true_A`` dynamics in a ``Lambda`` module, ``get_batch`` by
# ``torch.from_numpy(np.random.choice(...))`` and ``torch.stack([true_y[s + i] ...])``,
# an ``ODEFunc`` whose forward counts calls in ``self.nfe`` and cubes its state, weights
# initialised by ``nn.init.normal_(m.weight, mean=0, std=0.1)``, a ``RunningAverageMeter``,
# RMSprop, and a ``torch.no_grad()`` evaluation over the whole trajectory.
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim

_one_third = 1 / 3
_two_thirds = 2 / 3
_one_sixth = 1 / 6


def rk4_alt_step_func(func, t0, dt, t1, y0, f0=None):
    k1 = f0
    if k1 is None:
        k1 = func(t0, y0)
    k2 = func(t0 + dt * _one_third, y0 + dt * k1 * _one_third)
    k3 = func(t0 + dt * _two_thirds, y0 + dt * (k2 - k1 * _one_third))
    k4 = func(t1, y0 + dt * (k1 - k2 + k3))
    return (k1 + 3 * (k2 + k3) + k4) * dt * 0.125


def odeint(func, y0, t, method='rk4'):
    assert method == 'rk4'
    assert t.dim() == 1, "t must be one dimensional"
    solution = torch.empty(len(t), *y0.shape, dtype=y0.dtype, device=y0.device)
    solution[0] = y0
    y = y0
    for i, (t0, t1) in enumerate(zip(t[:-1], t[1:]), start=1):
        dt = t1 - t0
        dy = rk4_alt_step_func(func, t0, dt, t1, y)
        y = y + dy
        solution[i] = y
    return solution


class Lambda(nn.Module):
    def __init__(self, true_A):
        super().__init__()
        self.true_A = true_A

    def forward(self, t, y):
        return torch.mm(y ** 3, self.true_A)


class ODEFunc(nn.Module):
    def __init__(self):
        super(ODEFunc, self).__init__()
        self.net = nn.Sequential(
            nn.Linear(2, 16),
            nn.Tanh(),
            nn.Linear(16, 2),
        )
        self.nfe = 0
        for m in self.net.modules():
            if isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, mean=0, std=0.1)
                nn.init.constant_(m.bias, val=0)

    def forward(self, t, y):
        self.nfe += 1
        return self.net(y ** 3)


class RunningAverageMeter(object):
    def __init__(self, momentum=0.99):
        self.momentum = momentum
        self.reset()

    def reset(self):
        self.val = None
        self.avg = 0

    def update(self, val):
        if self.val is None:
            self.avg = val
        else:
            self.avg = self.avg * self.momentum + val * (1 - self.momentum)
        self.val = val


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    np.random.seed(903)
    device = torch.device('cpu')
    data_size, batch_time, batch_size = 20, 5, 6
    true_y0 = torch.tensor([[2., 0.]]).to(device)
    t = torch.linspace(0., 2.5, data_size).to(device)
    true_A = torch.tensor([[-0.1, 2.0], [-2.0, -0.1]]).to(device)
    with torch.no_grad():
        true_y = odeint(Lambda(true_A), true_y0, t, method='rk4')

    def get_batch():
        s = torch.from_numpy(np.random.choice(np.arange(data_size - batch_time, dtype=np.int64), batch_size, replace=False))
        batch_y0 = true_y[s]
        batch_t = t[:batch_time]
        batch_y = torch.stack([true_y[s + i] for i in range(batch_time)], dim=0)
        return batch_y0.to(device), batch_t.to(device), batch_y.to(device)

    func = ODEFunc().to(device)
    if weights is not None:
        func.load_state_dict({k: torch.tensor(v) for k, v in weights.items()})
    w = {k: v.detach().cpu().numpy().copy() for k, v in func.state_dict().items()}
    optimizer = optim.RMSprop(func.parameters(), lr=1e-2)
    loss_meter = RunningAverageMeter(0.97)

    def train_step(batch_y0, batch_t, batch_y):
        optimizer.zero_grad()
        pred_y = odeint(func, batch_y0, batch_t)
        loss = torch.mean(torch.abs(pred_y - batch_y))
        loss.backward()
        optimizer.step()
        return loss

    step = torch.compile(train_step) if compiled else train_step
    losses = [float(true_y.abs().sum())]
    for itr in range(1, 9):
        batch_y0, batch_t, batch_y = get_batch()
        loss = step(batch_y0, batch_t, batch_y)
        loss_meter.update(loss.item())
        losses.append(loss.item())
        if itr % 4 == 0:
            with torch.no_grad():
                pred_y = odeint(func, true_y0, t)
                loss = torch.mean(torch.abs(pred_y - true_y))
                losses.append(loss.item())
    losses.append(loss_meter.avg)
    losses.append(func.nfe)
    return {"losses": losses, "weights": w, "fn": step}
