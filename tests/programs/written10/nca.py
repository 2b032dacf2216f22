# In the manner of the PyTorch ports of Growing Neural Cellular Automata (Mordvintsev et al.,
# distill.pub 2020; e.g. chenmingxiang110/Growing-Neural-Cellular-Automata, MIT licence): a
# ``CAModel`` whose ``perceive`` builds Sobel filters with ``np.outer`` rotated by an angle
# and applies them per channel by ``F.conv2d(x, w.view(1, 1, 3, 3).repeat(channel_n, 1, 1,
# 1), padding=1, groups=channel_n)``; ``alive`` masks by ``F.max_pool2d(x[:, 3:4], 3, 1, 1) >
# 0.1``; ``update`` on channels-last state (``x.transpose(1, 3)``), a zero-initialised
# ``fc1`` (``self.fc1.weight.zero_()`` under ``torch.no_grad()``), the stochastic fire mask
# ``torch.rand([...]) > fire_rate`` (``fire_rate=0.0`` here, so every cell fires in both
# libraries) and ``(pre_life_mask & post_life_mask).float()``; ``forward`` looping ``steps``
# updates; a sample pool in NumPy with the seed re-planted and the worst sample replaced;
# per-parameter gradient normalisation ``p.grad.data /= (p.grad.data.norm() + 1e-8)``
# between ``backward`` and ``step``; Adam with a ``MultiStepLR`` stepped in the train step.
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class CAModel(nn.Module):
    def __init__(self, channel_n, fire_rate, device, hidden_size=16):
        super(CAModel, self).__init__()
        self.device = device
        self.channel_n = channel_n
        self.fc0 = nn.Linear(channel_n * 3, hidden_size)
        self.fc1 = nn.Linear(hidden_size, channel_n, bias=False)
        with torch.no_grad():
            self.fc1.weight.zero_()
        self.fire_rate = fire_rate
        self.to(self.device)

    def alive(self, x):
        return F.max_pool2d(x[:, 3:4, :, :], kernel_size=3, stride=1, padding=1) > 0.1

    def perceive(self, x, angle):
        def _perceive_with(x, weight):
            conv_weights = torch.from_numpy(weight.astype(np.float32)).to(self.device)
            conv_weights = conv_weights.view(1, 1, 3, 3).repeat(self.channel_n, 1, 1, 1)
            return F.conv2d(x, conv_weights, padding=1, groups=self.channel_n)

        dx = np.outer([1, 2, 1], [-1, 0, 1]) / 8.0
        dy = dx.T
        c = np.cos(angle * np.pi / 180)
        s = np.sin(angle * np.pi / 180)
        w1 = c * dx - s * dy
        w2 = s * dx + c * dy
        y1 = _perceive_with(x, w1)
        y2 = _perceive_with(x, w2)
        y = torch.cat((x, y1, y2), 1)
        return y

    def linear(self, x, w, b=None):
        h = torch.matmul(x, w.transpose(0, 1))
        if b is not None:
            h += b
        return h

    def update(self, x, fire_rate, angle):
        x = x.transpose(1, 3)
        pre_life_mask = self.alive(x)
        dx = self.perceive(x, angle)
        dx = dx.transpose(1, 3)
        dx = self.fc0(dx)
        dx = F.relu(dx)
        dx = self.fc1(dx)
        if fire_rate is None:
            fire_rate = self.fire_rate
        stochastic = torch.rand([dx.size(0), dx.size(1), dx.size(2), 1]) > fire_rate
        stochastic = stochastic.float().to(self.device)
        dx = dx * stochastic
        x = x + dx.transpose(1, 3)
        post_life_mask = self.alive(x)
        life_mask = (pre_life_mask & post_life_mask).float()
        x = x * life_mask
        return x.transpose(1, 3)

    def forward(self, x, steps=1, fire_rate=None, angle=0.0):
        for step in range(steps):
            x = self.update(x, fire_rate, angle)
        return x


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    rng = np.random.default_rng(1008)
    device = torch.device("cpu")
    CHANNEL_N, TARGET_SIZE, POOL_SIZE, BATCH_SIZE = 8, 8, 6, 3
    target_img = np.zeros((TARGET_SIZE, TARGET_SIZE, 4), np.float32)
    target_img[2:6, 2:6, :3] = rng.random((4, 4, 3))
    target_img[2:6, 2:6, 3] = 1.0
    pad_target = torch.from_numpy(np.repeat(target_img[None, ...], BATCH_SIZE, 0))
    seed = np.zeros([TARGET_SIZE, TARGET_SIZE, CHANNEL_N], np.float32)
    seed[TARGET_SIZE // 2, TARGET_SIZE // 2, 3:] = 1.0
    pool = np.repeat(seed[None, ...], POOL_SIZE, 0)
    ca = CAModel(CHANNEL_N, 0.0, device)
    if weights is not None:
        ca.load_state_dict({k: torch.tensor(v) for k, v in weights.items()})
    w = {k: v.detach().numpy().copy() for k, v in ca.state_dict().items()}
    optimizer = torch.optim.Adam(ca.parameters(), lr=2e-3, betas=(0.5, 0.5))
    scheduler = torch.optim.lr_scheduler.MultiStepLR(optimizer, [3], 0.5)

    def loss_f(x, target):
        return torch.mean(torch.pow(x[..., :4] - target, 2), [-2, -3, -1])

    def train(x, target, steps):
        x = ca(x, steps=steps)
        loss = F.mse_loss(x[:, :, :, :4], target)
        optimizer.zero_grad()
        loss.backward()
        for p in ca.parameters():
            p.grad.data /= (p.grad.data.norm() + 1e-8)
        optimizer.step()
        scheduler.step()
        return x, loss

    step = torch.compile(train) if compiled else train
    losses = []
    for i in range(6):
        batch_idx = rng.choice(POOL_SIZE, BATCH_SIZE, replace=False)
        x0 = torch.from_numpy(pool[batch_idx]).to(device)
        loss_rank = loss_f(x0, pad_target).detach().cpu().numpy().argsort()[::-1]
        x0 = x0.numpy()[loss_rank.copy()]
        x0[:1] = seed
        x0 = torch.from_numpy(x0.copy()).to(device)
        x, loss = step(x0, pad_target, 4)
        pool[batch_idx] = x.detach().cpu().numpy()
        losses.append(loss.item())
    losses.append(optimizer.param_groups[0]['lr'])
    with torch.no_grad():
        x = torch.from_numpy(seed[None]).to(device)
        x = ca(x, steps=6, angle=45.0)
        losses.append(float(x[..., :4].abs().sum()))
    return {"losses": losses, "weights": w, "fn": step}
