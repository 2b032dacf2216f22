# In the manner of jzbontar/pixelcnn-pytorch (the well-known 60-line PixelCNN) and the
# gated PixelCNN ports that followed it (MIT licence): ``MaskedConv2d`` subclassing
# ``nn.Conv2d`` with a ``mask`` buffer from ``self.weight.data.clone()``, ``_, _, kH, kW =
# self.weight.size()``, ``self.mask[:, :, kH // 2, kW // 2 + (mask_type == 'B'):] = 0`` and
# ``self.weight.data *= self.mask`` before ``super(MaskedConv2d, self).forward(x)``; an
# ``nn.Sequential`` of masked convs, ``BatchNorm2d`` and ``ReLU(True)`` ending in a 1x1
# conv to the pixel levels; targets by ``(input.data[:, 0] * (levels - 1)).long()``;
# ``F.cross_entropy`` of 4-D logits; ``Adam``; a test pass under ``torch.no_grad()``
# counting bits per dimension; and raster-order sampling into ``sample.fill_(0)`` with
# ``F.softmax(out[:, :, i, j], dim=1)`` (greedy here: torch's and dualgraph's random
# streams differ, so ``torch.multinomial`` would draw other pixels).
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class MaskedConv2d(nn.Conv2d):
    def __init__(self, mask_type, *args, **kwargs):
        super(MaskedConv2d, self).__init__(*args, **kwargs)
        assert mask_type in {'A', 'B'}
        self.register_buffer('mask', self.weight.data.clone())
        _, _, kH, kW = self.weight.size()
        self.mask.fill_(1)
        self.mask[:, :, kH // 2, kW // 2 + (mask_type == 'B'):] = 0
        self.mask[:, :, kH // 2 + 1:] = 0

    def forward(self, x):
        self.weight.data *= self.mask
        return super(MaskedConv2d, self).forward(x)


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    rng = np.random.default_rng(908)
    levels, fm = 4, 8
    net = nn.Sequential(
        MaskedConv2d('A', 1, fm, 5, 1, 2, bias=False), nn.BatchNorm2d(fm), nn.ReLU(True),
        MaskedConv2d('B', fm, fm, 3, 1, 1, bias=False), nn.BatchNorm2d(fm), nn.ReLU(True),
        MaskedConv2d('B', fm, fm, 3, 1, 1, bias=False), nn.BatchNorm2d(fm), nn.ReLU(True),
        nn.Conv2d(fm, levels, 1))
    if weights is not None:
        net.load_state_dict({k: torch.tensor(v) for k, v in weights.items()})
    w = {k: v.detach().numpy().copy() for k, v in net.state_dict().items()}
    optimizer = torch.optim.Adam(net.parameters(), lr=3e-3)
    tr = [torch.from_numpy((rng.integers(0, levels, (4, 1, 6, 6)) / (levels - 1)).astype(np.float32))
          for _ in range(3)]
    te = torch.from_numpy((rng.integers(0, levels, (4, 1, 6, 6)) / (levels - 1)).astype(np.float32))

    def train_step(input):
        target = (input.data[:, 0] * (levels - 1)).long()
        loss = F.cross_entropy(net(input), target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss

    step = torch.compile(train_step) if compiled else train_step
    losses = []
    for epoch in range(3):
        err_tr = []
        net.train(True)
        for input in tr:
            loss = step(input)
            err_tr.append(loss.item())
        losses += err_tr
        net.train(False)
        with torch.no_grad():
            target = (te[:, 0] * (levels - 1)).long()
            loss = F.cross_entropy(net(te), target)
            losses.append(loss.item() / math.log(2))
    losses.append(float(net[3].weight.abs().sum()))
    sample = torch.Tensor(2, 1, 6, 6)
    sample.fill_(0)
    net.train(False)
    with torch.no_grad():
        for i in range(6):
            for j in range(6):
                out = net(sample)
                probs = F.softmax(out[:, :, i, j], dim=1)
                sample[:, :, i, j] = torch.argmax(probs, dim=1, keepdim=True).float() / (levels - 1)
    losses += sample.flatten().tolist()
    return {"losses": losses, "weights": w, "fn": step}
