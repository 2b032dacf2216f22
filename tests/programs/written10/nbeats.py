# In the manner of philipperemy/n-beats's PyTorch ``NBeatsNet`` (MIT licence): blocks
# kept in plain Python lists (``self.stacks``) whose parameters are registered through
# ``self.parameters = nn.ParameterList(self.parameters)`` (shadowing nothing: ``parameters()``
# is still the method), weights shared within a stack by appending the same block again;
# ``TrendBlock`` and ``SeasonalityBlock`` projecting thetas with ``thetas.mm(T.to(device))``
# onto bases built by ``torch.tensor(np.array([...])).float()`` from ``np.arange(0,
# horizon) / horizon``; a ``GenericBlock``; ``share_thetas`` aliasing ``theta_b_fc`` and
# ``theta_f_fc``; ``squeeze_last_dim``; ``torch.zeros(size=(batch, forecast_length,))``;
# ``backcast.to(self.device) - b`` residual updates; windows of a noisy series batched by
# a generator; ``F.mse_loss``; Adam; a checkpoint written by ``torch.save({...})`` with the
# model's and optimiser's state dicts and read back by ``torch.load`` into a fresh model and
# optimiser that train on.
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import io

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F


def squeeze_last_dim(tensor):
    if len(tensor.shape) == 3 and tensor.shape[-1] == 1:
        return tensor[..., 0]
    return tensor


def seasonality_model(thetas, t, device):
    p = thetas.size()[-1]
    assert p <= thetas.shape[1], 'thetas_dim is too big.'
    p1, p2 = (p // 2, p // 2) if p % 2 == 0 else (p // 2, p // 2 + 1)
    s1 = torch.tensor(np.array([np.cos(2 * np.pi * i * t) for i in range(p1)])).float()
    s2 = torch.tensor(np.array([np.sin(2 * np.pi * i * t) for i in range(p2)])).float()
    S = torch.cat([s1, s2])
    return thetas.mm(S.to(device))


def trend_model(thetas, t, device):
    p = thetas.size()[-1]
    assert p <= 4, 'thetas_dim is too big.'
    T = torch.tensor(np.array([t ** i for i in range(p)])).float()
    return thetas.mm(T.to(device))


def linear_space(backcast_length, forecast_length, is_forecast=True):
    horizon = forecast_length if is_forecast else backcast_length
    return np.arange(0, horizon) / horizon


class Block(nn.Module):
    def __init__(self, units, thetas_dim, device, backcast_length=10, forecast_length=5,
                 share_thetas=False, nb_harmonics=None):
        super(Block, self).__init__()
        self.units = units
        self.thetas_dim = thetas_dim
        self.backcast_length = backcast_length
        self.forecast_length = forecast_length
        self.share_thetas = share_thetas
        self.fc1 = nn.Linear(backcast_length, units)
        self.fc2 = nn.Linear(units, units)
        self.fc3 = nn.Linear(units, units)
        self.fc4 = nn.Linear(units, units)
        self.device = device
        self.backcast_linspace = linear_space(backcast_length, forecast_length, is_forecast=False)
        self.forecast_linspace = linear_space(backcast_length, forecast_length, is_forecast=True)
        if share_thetas:
            self.theta_f_fc = self.theta_b_fc = nn.Linear(units, thetas_dim, bias=False)
        else:
            self.theta_b_fc = nn.Linear(units, thetas_dim, bias=False)
            self.theta_f_fc = nn.Linear(units, thetas_dim, bias=False)

    def forward(self, x):
        x = squeeze_last_dim(x)
        x = F.relu(self.fc1(x.to(self.device)))
        x = F.relu(self.fc2(x))
        x = F.relu(self.fc3(x))
        x = F.relu(self.fc4(x))
        return x


class SeasonalityBlock(Block):
    def __init__(self, units, thetas_dim, device, backcast_length=10, forecast_length=5,
                 nb_harmonics=None):
        if nb_harmonics:
            super(SeasonalityBlock, self).__init__(units, nb_harmonics, device, backcast_length,
                                                   forecast_length, share_thetas=True)
        else:
            super(SeasonalityBlock, self).__init__(units, forecast_length, device, backcast_length,
                                                   forecast_length, share_thetas=True)

    def forward(self, x):
        x = super(SeasonalityBlock, self).forward(x)
        backcast = seasonality_model(self.theta_b_fc(x), self.backcast_linspace, self.device)
        forecast = seasonality_model(self.theta_f_fc(x), self.forecast_linspace, self.device)
        return backcast, forecast


class TrendBlock(Block):
    def __init__(self, units, thetas_dim, device, backcast_length=10, forecast_length=5,
                 nb_harmonics=None):
        super(TrendBlock, self).__init__(units, thetas_dim, device, backcast_length,
                                         forecast_length, share_thetas=True)

    def forward(self, x):
        x = super(TrendBlock, self).forward(x)
        backcast = trend_model(self.theta_b_fc(x), self.backcast_linspace, self.device)
        forecast = trend_model(self.theta_f_fc(x), self.forecast_linspace, self.device)
        return backcast, forecast


class GenericBlock(Block):
    def __init__(self, units, thetas_dim, device, backcast_length=10, forecast_length=5,
                 nb_harmonics=None):
        super(GenericBlock, self).__init__(units, thetas_dim, device, backcast_length, forecast_length)
        self.backcast_fc = nn.Linear(thetas_dim, backcast_length)
        self.forecast_fc = nn.Linear(thetas_dim, forecast_length)

    def forward(self, x):
        x = super(GenericBlock, self).forward(x)
        theta_b = self.theta_b_fc(x)
        theta_f = self.theta_f_fc(x)
        return self.backcast_fc(theta_b), self.forecast_fc(theta_f)


class NBeatsNet(nn.Module):
    SEASONALITY_BLOCK = 'seasonality'
    TREND_BLOCK = 'trend'
    GENERIC_BLOCK = 'generic'

    def __init__(self, device=torch.device('cpu'), stack_types=(TREND_BLOCK, SEASONALITY_BLOCK),
                 nb_blocks_per_stack=2, forecast_length=5, backcast_length=10, thetas_dim=(4, 8),
                 share_weights_in_stack=False, hidden_layer_units=16, nb_harmonics=None):
        super(NBeatsNet, self).__init__()
        self.forecast_length = forecast_length
        self.backcast_length = backcast_length
        self.hidden_layer_units = hidden_layer_units
        self.nb_blocks_per_stack = nb_blocks_per_stack
        self.share_weights_in_stack = share_weights_in_stack
        self.nb_harmonics = nb_harmonics
        self.stack_types = stack_types
        self.stacks = []
        self.thetas_dim = thetas_dim
        self.parameters = []
        self.device = device
        for stack_id in range(len(self.stack_types)):
            self.stacks.append(self.create_stack(stack_id))
        self.parameters = nn.ParameterList(self.parameters)
        self.to(self.device)

    def create_stack(self, stack_id):
        stack_type = self.stack_types[stack_id]
        blocks = []
        for block_id in range(self.nb_blocks_per_stack):
            block_init = NBeatsNet.select_block(stack_type)
            if self.share_weights_in_stack and block_id != 0:
                block = blocks[-1]
            else:
                block = block_init(self.hidden_layer_units, self.thetas_dim[stack_id], self.device,
                                   self.backcast_length, self.forecast_length, self.nb_harmonics)
                self.parameters.extend(block.parameters())
            blocks.append(block)
        return blocks

    @staticmethod
    def select_block(block_type):
        if block_type == NBeatsNet.SEASONALITY_BLOCK:
            return SeasonalityBlock
        elif block_type == NBeatsNet.TREND_BLOCK:
            return TrendBlock
        else:
            return GenericBlock

    def forward(self, backcast):
        backcast = squeeze_last_dim(backcast)
        forecast = torch.zeros(size=(backcast.size()[0], self.forecast_length,))
        for stack_id in range(len(self.stacks)):
            for block_id in range(len(self.stacks[stack_id])):
                b, f = self.stacks[stack_id][block_id](backcast)
                backcast = backcast.to(self.device) - b
                forecast = forecast.to(self.device) + f
        return backcast, forecast


def data_generator(x, y, size):
    assert len(x) == len(y)
    batches = []
    for ii in range(0, len(x), size):
        batches.append((x[ii:ii + size], y[ii:ii + size]))
    for bb in batches:
        yield bb


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    rng = np.random.default_rng(1010)
    device = torch.device('cpu')
    forecast_length, backcast_length, batch_size = 5, 10, 6
    t = np.arange(80)
    series = (np.sin(t / 4.0) + 0.01 * t + 0.1 * rng.normal(size=t.shape)).astype(np.float32)
    x, y = [], []
    for i in range(backcast_length, len(series) - forecast_length, 4):
        x.append(series[i - backcast_length:i])
        y.append(series[i:i + forecast_length])
    x, y = np.array(x[:12]), np.array(y[:12])

    def make():
        return NBeatsNet(stack_types=(NBeatsNet.TREND_BLOCK, NBeatsNet.SEASONALITY_BLOCK,
                                      NBeatsNet.GENERIC_BLOCK),
                         forecast_length=forecast_length, backcast_length=backcast_length,
                         thetas_dim=(3, 4, 6), share_weights_in_stack=True, device=device)

    net = make()
    if weights is not None:
        net.load_state_dict({k: torch.tensor(v) for k, v in weights.items()})
    w = {k: v.detach().numpy().copy() for k, v in net.state_dict().items()}
    optimiser = torch.optim.Adam(lr=1e-3, params=net.parameters())

    def make_step(net, optimiser):
        def train_step(x_train_batch, y_train_batch):
            optimiser.zero_grad()
            net.train()
            _, forecast = net(torch.tensor(x_train_batch, dtype=torch.float).to(device))
            loss = F.mse_loss(forecast, torch.tensor(y_train_batch, dtype=torch.float).to(device))
            loss.backward()
            optimiser.step()
            return loss
        return torch.compile(train_step) if compiled else train_step

    step = make_step(net, optimiser)
    losses = [float(len(list(net.parameters()))), float(len(net.state_dict()))]
    for epoch in range(2):
        for x_b, y_b in data_generator(x, y, batch_size):
            losses.append(step(torch.from_numpy(x_b), torch.from_numpy(y_b)).item())
    buffer = io.BytesIO()
    torch.save({'model_state_dict': net.state_dict(),
                'optimizer_state_dict': optimiser.state_dict(), 'grad_step': 4}, buffer)
    buffer.seek(0)
    checkpoint = torch.load(buffer)
    net2 = make()
    optimiser2 = torch.optim.Adam(lr=1e-3, params=net2.parameters())
    net2.load_state_dict(checkpoint['model_state_dict'])
    optimiser2.load_state_dict(checkpoint['optimizer_state_dict'])
    step2 = make_step(net2, optimiser2)
    for x_b, y_b in data_generator(x, y, batch_size):
        losses.append(step2(torch.from_numpy(x_b), torch.from_numpy(y_b)).item())
    net2.eval()
    with torch.no_grad():
        b, f = net2(torch.from_numpy(x))
        losses += [float(f.abs().sum()), float(b.abs().sum()), float(checkpoint['grad_step'])]
    return {"losses": losses, "weights": w, "fn": [step, step2]}
