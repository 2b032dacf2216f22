# In the manner of locuslab/TCN's tcn.py and adding_problem (MIT licence): Chomp1d
# (``x[:, :, :-self.chomp_size].contiguous()``), a TemporalBlock of two dilated causal
# ``nn.Conv1d(padding=(k - 1) * dilation)`` wrapped in ``torch.nn.utils.weight_norm`` (the
# deprecated hook, ``weight_g``/``weight_v``), ``init_weights`` drawing
# ``self.conv1.weight.data.normal_(0, 0.01)``, a 1x1 downsample on the residual, a
# TemporalConvNet of ``2 ** i`` dilations, the adding problem's last-step regression with
# ``F.mse_loss``, ``clip_grad_norm_``, ``optimizer = getattr(optim, 'Adam')``; and the same
# block with ``torch.nn.utils.parametrizations.weight_norm`` (``parametrizations.weight
# .original0``/``original1``), ``parametrize.is_parametrized`` and
# ``remove_parametrizations`` after training.
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.nn.utils import weight_norm
from torch.nn.utils import parametrize
from torch.nn.utils.parametrizations import weight_norm as param_weight_norm


class Chomp1d(nn.Module):
    def __init__(self, chomp_size):
        super(Chomp1d, self).__init__()
        self.chomp_size = chomp_size

    def forward(self, x):
        return x[:, :, :-self.chomp_size].contiguous()


class TemporalBlock(nn.Module):
    def __init__(self, n_inputs, n_outputs, kernel_size, stride, dilation, padding, dropout=0.2, wn=weight_norm):
        super(TemporalBlock, self).__init__()
        self.conv1 = wn(nn.Conv1d(n_inputs, n_outputs, kernel_size,
                                  stride=stride, padding=padding, dilation=dilation))
        self.chomp1 = Chomp1d(padding)
        self.relu1 = nn.ReLU()
        self.dropout1 = nn.Dropout(dropout)
        self.conv2 = wn(nn.Conv1d(n_outputs, n_outputs, kernel_size,
                                  stride=stride, padding=padding, dilation=dilation))
        self.chomp2 = Chomp1d(padding)
        self.relu2 = nn.ReLU()
        self.dropout2 = nn.Dropout(dropout)
        self.net = nn.Sequential(self.conv1, self.chomp1, self.relu1, self.dropout1,
                                 self.conv2, self.chomp2, self.relu2, self.dropout2)
        self.downsample = nn.Conv1d(n_inputs, n_outputs, 1) if n_inputs != n_outputs else None
        self.relu = nn.ReLU()
        self.init_weights()

    def init_weights(self):
        self.conv1.weight.data.normal_(0, 0.01)
        self.conv2.weight.data.normal_(0, 0.01)
        if self.downsample is not None:
            self.downsample.weight.data.normal_(0, 0.01)

    def forward(self, x):
        out = self.net(x)
        res = x if self.downsample is None else self.downsample(x)
        return self.relu(out + res)


class TemporalConvNet(nn.Module):
    def __init__(self, num_inputs, num_channels, kernel_size=2, dropout=0.2, wn=weight_norm):
        super(TemporalConvNet, self).__init__()
        layers = []
        num_levels = len(num_channels)
        for i in range(num_levels):
            dilation_size = 2 ** i
            in_channels = num_inputs if i == 0 else num_channels[i - 1]
            out_channels = num_channels[i]
            layers += [TemporalBlock(in_channels, out_channels, kernel_size, stride=1, dilation=dilation_size,
                                     padding=(kernel_size - 1) * dilation_size, dropout=dropout, wn=wn)]
        self.network = nn.Sequential(*layers)

    def forward(self, x):
        return self.network(x)


class TCN(nn.Module):
    def __init__(self, input_size, output_size, num_channels, kernel_size, dropout, wn=weight_norm):
        super(TCN, self).__init__()
        self.tcn = TemporalConvNet(input_size, num_channels, kernel_size=kernel_size, dropout=dropout, wn=wn)
        self.linear = nn.Linear(num_channels[-1], output_size)
        self.init_weights()

    def init_weights(self):
        self.linear.weight.data.normal_(0, 0.01)

    def forward(self, x):
        y1 = self.tcn(x)
        return self.linear(y1[:, :, -1])


def data_generator(rng, N, seq_length):
    X_num = torch.tensor(rng.random((N, 1, seq_length)).astype(np.float32))
    X_mask = torch.zeros([N, 1, seq_length])
    Y = torch.zeros([N, 1])
    for i in range(N):
        positions = rng.choice(seq_length, size=2, replace=False)
        X_mask[i, 0, positions[0]] = 1
        X_mask[i, 0, positions[1]] = 1
        Y[i, 0] = X_num[i, 0, positions[0]] + X_num[i, 0, positions[1]]
    X = torch.cat((X_num, X_mask), dim=1)
    return X, Y


def run(weights=None, compiled=False):
    torch.manual_seed(1111)
    rng = np.random.default_rng(96)
    models = {"old": TCN(2, 1, [6, 6], kernel_size=3, dropout=0.0),
              "new": TCN(2, 1, [6, 6], kernel_size=3, dropout=0.0, wn=param_weight_norm)}
    if weights is not None:
        for name, model in models.items():
            model.load_state_dict({k[len(name) + 1:]: torch.tensor(v) for k, v in weights.items()
                                   if k.startswith(name + ".")})
    w = {f"{name}.{k}": v.detach().numpy().copy() for name, model in models.items()
         for k, v in model.state_dict().items()}
    X_train, Y_train = data_generator(rng, 12, 10)
    batch_size, clip = 4, 0.5
    losses = [int("tcn.network.0.conv1.weight_g" in models["old"].state_dict()),
              int("new.tcn.network.0.conv1.parametrizations.weight.original0" in w),
              int(parametrize.is_parametrized(models["new"].tcn.network[0].conv1)),
              int(parametrize.is_parametrized(models["new"].tcn.network[0].conv1, "weight"))]
    fns = []
    for model in models.values():
        optimizer = getattr(optim, 'Adam')(model.parameters(), lr=4e-3)

        def train_step(x, y, model=model, optimizer=optimizer):
            optimizer.zero_grad()
            output = model(x)
            loss = F.mse_loss(output, y)
            loss.backward()
            if clip > 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
            optimizer.step()
            return loss

        step = torch.compile(train_step) if compiled else train_step
        fns.append(step)
        model.train()
        for epoch in range(2):
            for i in range(0, X_train.size(0), batch_size):
                x, y = X_train[i:(i + batch_size)], Y_train[i:(i + batch_size)]
                losses.append(step(x, y).item())
        model.eval()
        with torch.no_grad():
            losses += model(X_train[:3]).flatten().tolist()
    conv = models["new"].tcn.network[0].conv1
    before = conv.weight.detach().clone()
    parametrize.remove_parametrizations(conv, "weight")
    losses.append(int(parametrize.is_parametrized(conv)))
    losses.append((conv.weight - before).abs().max().item())
    losses.append(models["old"].tcn.network[1].conv2.weight_g.flatten()[:3].tolist()[0])
    return {"losses": losses, "weights": w, "fn": fns}
