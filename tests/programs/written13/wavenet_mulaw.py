# In the manner of the PyTorch WaveNet implementations (r9y9's wavenet_vocoder,
# vincentherrmann's pytorch-wavenet): mu-law companding (``torch.sign(x) *
# torch.log1p(mu * torch.abs(x)) / math.log1p(mu)``) and quantisation to classes by
# ``((y + 1) / 2 * mu + 0.5).long()``, inputs one-hot by ``F.one_hot(...).permute(0, 2,
# 1).float()``, a causal ``Conv1d`` padded on the left by ``F.pad(x, (pad, 0))``, residual
# layers of dilated causal convolutions with ``dilation = 2 ** (i % layers_per_stack)``,
# the gated activation ``torch.tanh(a) * torch.sigmoid(b)`` after ``x.split(x.size(1) // 2,
# dim=1)``, skip connections summed and scaled by ``math.sqrt(1.0 / len(self.conv_layers))``,
# residuals by ``(x + residual) * math.sqrt(0.5)``, ``F.cross_entropy`` on ``(B, C, T)``
# logits, ``clip_grad_norm_`` returning the norm, Adam with ``amsgrad=True``, and greedy
# sample-by-sample generation feeding back ``F.one_hot(argmax)``, decoded by the inverse
# mu-law ``torch.sign(y) * (1.0 / mu) * ((1.0 + mu) ** torch.abs(y) - 1.0)``.
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def mulaw(x, mu=255):
    return torch.sign(x) * torch.log1p(mu * torch.abs(x)) / math.log1p(mu)


def mulaw_quantize(x, mu=255):
    y = mulaw(x, mu)
    return ((y + 1) / 2 * mu + 0.5).long()


def inv_mulaw_quantize(y, mu=255):
    y = 2 * y.float() / mu - 1
    return torch.sign(y) * (1.0 / mu) * ((1.0 + mu) ** torch.abs(y) - 1.0)


class CausalConv1d(nn.Conv1d):
    def __init__(self, in_channels, out_channels, kernel_size, dilation=1, **kwargs):
        super().__init__(in_channels, out_channels, kernel_size, padding=0, dilation=dilation, **kwargs)
        self.pad = (kernel_size - 1) * dilation

    def forward(self, x):
        return super().forward(F.pad(x, (self.pad, 0)))


class ResidualConv1dGLU(nn.Module):
    def __init__(self, residual_channels, gate_channels, kernel_size, skip_out_channels, dilation=1):
        super().__init__()
        self.conv = CausalConv1d(residual_channels, gate_channels, kernel_size, dilation=dilation)
        gate_out_channels = gate_channels // 2
        self.conv1x1_out = nn.Conv1d(gate_out_channels, residual_channels, 1)
        self.conv1x1_skip = nn.Conv1d(gate_out_channels, skip_out_channels, 1)

    def forward(self, x):
        residual = x
        x = self.conv(x)
        splitdim = 1
        a, b = x.split(x.size(splitdim) // 2, dim=splitdim)
        x = torch.tanh(a) * torch.sigmoid(b)
        s = self.conv1x1_skip(x)
        x = self.conv1x1_out(x)
        x = (x + residual) * math.sqrt(0.5)
        return x, s


class WaveNet(nn.Module):
    def __init__(self, out_channels=16, layers=6, stacks=2, residual_channels=8,
                 gate_channels=16, skip_out_channels=8, kernel_size=2):
        super().__init__()
        self.out_channels = out_channels
        layers_per_stack = layers // stacks
        self.first_conv = CausalConv1d(out_channels, residual_channels, 1)
        self.conv_layers = nn.ModuleList()
        for layer in range(layers):
            dilation = 2 ** (layer % layers_per_stack)
            self.conv_layers.append(ResidualConv1dGLU(
                residual_channels, gate_channels, kernel_size, skip_out_channels, dilation=dilation))
        self.last_conv_layers = nn.ModuleList([
            nn.ReLU(inplace=True),
            nn.Conv1d(skip_out_channels, skip_out_channels, 1),
            nn.ReLU(inplace=True),
            nn.Conv1d(skip_out_channels, out_channels, 1),
        ])

    def receptive_field(self):
        return sum(layer.conv.pad for layer in self.conv_layers) + 1

    def forward(self, x):
        x = self.first_conv(x)
        skips = 0
        for f in self.conv_layers:
            x, h = f(x)
            skips += h
        skips *= math.sqrt(1.0 / len(self.conv_layers))
        x = skips
        for f in self.last_conv_layers:
            x = f(x)
        return x

    @torch.no_grad()
    def incremental_generate(self, initial, T):
        outputs = []
        current = F.one_hot(initial, self.out_channels).permute(0, 2, 1).float()
        for t in range(T):
            logits = self(current)[:, :, -1]
            sample = logits.argmax(dim=1)
            outputs.append(sample)
            nxt = F.one_hot(sample, self.out_channels).float().unsqueeze(-1)
            current = torch.cat([current[:, :, 1:], nxt], dim=-1)
        return torch.stack(outputs, dim=1)


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    rng = np.random.default_rng(1302)
    mu = 15
    model = WaveNet(out_channels=mu + 1)
    if weights is not None:
        model.load_state_dict({k: torch.tensor(v) for k, v in weights.items()})
    w = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3, betas=(0.9, 0.999), amsgrad=True)
    t = np.arange(3 * 40) / 8.0
    audio = (0.6 * np.sin(t) * np.cos(0.3 * t) + 0.05 * rng.standard_normal(t.shape)).astype(np.float32)
    waves = [torch.from_numpy(audio[i * 40:(i + 1) * 40].reshape(2, 20).copy()) for i in range(3)]

    def train_step(wav):
        q = mulaw_quantize(wav, mu)
        x = F.one_hot(q[:, :-1], mu + 1).permute(0, 2, 1).float()
        target = q[:, 1:]
        model.train()
        y_hat = model(x)
        loss = F.cross_entropy(y_hat, target)
        optimizer.zero_grad()
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        return loss, grad_norm

    step = torch.compile(train_step) if compiled else train_step
    losses = []
    for epoch in range(3):
        for wav in waves:
            loss, grad_norm = step(wav)
            losses += [loss.item(), grad_norm.item()]
    model.eval()
    initial = mulaw_quantize(waves[0][:, :model.receptive_field()], mu)
    samples = model.incremental_generate(initial, 6)
    decoded = inv_mulaw_quantize(samples, mu)
    losses += [float(v) for v in samples.flatten()] + [float(decoded.abs().sum())]
    return {"losses": losses, "weights": w, "fn": step}
