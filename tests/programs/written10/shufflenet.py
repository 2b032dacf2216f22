# In the manner of torchvision's ``shufflenetv2.py`` (BSD licence) and the ImageNet-style
# training scripts that train it: ``channel_shuffle`` by ``view``/``torch.transpose``/
# ``contiguous``/``view``; ``InvertedResidual`` with ``x.chunk(2, dim=1)`` on stride 1 and
# two branches on stride 2, ``depthwise_conv`` with ``groups=i``; stages named
# ``stage2``..``stage4`` and set by ``setattr(self, name, nn.Sequential(*seq))``; global
# pooling by ``x.mean([2, 3])``; ``nn.init.kaiming_normal_(mode="fan_out")``; the data in a
# ``TensorDataset`` split into ``Subset``s by a NumPy permutation (the two libraries'
# random streams differ, so ``random_split`` would pick other samples), joined again by ``ConcatDataset`` and batched by a ``DataLoader``;
# ``CrossEntropyLoss(label_smoothing=0.1)``, SGD with Nesterov momentum and a weight decay
# kept off batch-norm weights, a linear-decay ``LambdaLR`` stepped per iteration; and
# top-1/top-5 accuracy by ``output.topk(maxk, 1, True, True)`` under ``torch.inference_mode()``.
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import ConcatDataset, DataLoader, Subset, TensorDataset


def channel_shuffle(x, groups):
    batchsize, num_channels, height, width = x.size()
    channels_per_group = num_channels // groups
    x = x.view(batchsize, groups, channels_per_group, height, width)
    x = torch.transpose(x, 1, 2).contiguous()
    x = x.view(batchsize, num_channels, height, width)
    return x


class InvertedResidual(nn.Module):
    def __init__(self, inp, oup, stride):
        super().__init__()
        if not (1 <= stride <= 3):
            raise ValueError("illegal stride value")
        self.stride = stride
        branch_features = oup // 2
        if (self.stride == 1) and (inp != branch_features << 1):
            raise ValueError(
                f"Invalid combination of stride {stride}, inp {inp} and oup {oup} values.")
        if self.stride > 1:
            self.branch1 = nn.Sequential(
                self.depthwise_conv(inp, inp, kernel_size=3, stride=self.stride, padding=1),
                nn.BatchNorm2d(inp),
                nn.Conv2d(inp, branch_features, kernel_size=1, stride=1, padding=0, bias=False),
                nn.BatchNorm2d(branch_features),
                nn.ReLU(inplace=True),
            )
        else:
            self.branch1 = nn.Sequential()
        self.branch2 = nn.Sequential(
            nn.Conv2d(inp if (self.stride > 1) else branch_features, branch_features,
                      kernel_size=1, stride=1, padding=0, bias=False),
            nn.BatchNorm2d(branch_features),
            nn.ReLU(inplace=True),
            self.depthwise_conv(branch_features, branch_features, kernel_size=3,
                                stride=self.stride, padding=1),
            nn.BatchNorm2d(branch_features),
            nn.Conv2d(branch_features, branch_features, kernel_size=1, stride=1, padding=0, bias=False),
            nn.BatchNorm2d(branch_features),
            nn.ReLU(inplace=True),
        )

    @staticmethod
    def depthwise_conv(i, o, kernel_size, stride=1, padding=0, bias=False):
        return nn.Conv2d(i, o, kernel_size, stride, padding, bias=bias, groups=i)

    def forward(self, x):
        if self.stride == 1:
            x1, x2 = x.chunk(2, dim=1)
            out = torch.cat((x1, self.branch2(x2)), dim=1)
        else:
            out = torch.cat((self.branch1(x), self.branch2(x)), dim=1)
        out = channel_shuffle(out, 2)
        return out


class ShuffleNetV2(nn.Module):
    def __init__(self, stages_repeats, stages_out_channels, num_classes=10,
                 inverted_residual=InvertedResidual):
        super().__init__()
        if len(stages_repeats) != 3:
            raise ValueError("expected stages_repeats as list of 3 positive ints")
        self._stage_out_channels = stages_out_channels
        input_channels = 3
        output_channels = self._stage_out_channels[0]
        self.conv1 = nn.Sequential(
            nn.Conv2d(input_channels, output_channels, 3, 2, 1, bias=False),
            nn.BatchNorm2d(output_channels),
            nn.ReLU(inplace=True),
        )
        input_channels = output_channels
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        self.stage2: nn.Sequential
        self.stage3: nn.Sequential
        self.stage4: nn.Sequential
        stage_names = [f"stage{i}" for i in [2, 3, 4]]
        for name, repeats, output_channels in zip(stage_names, stages_repeats, self._stage_out_channels[1:]):
            seq = [inverted_residual(input_channels, output_channels, 2)]
            for i in range(repeats - 1):
                seq.append(inverted_residual(output_channels, output_channels, 1))
            setattr(self, name, nn.Sequential(*seq))
            input_channels = output_channels
        output_channels = self._stage_out_channels[-1]
        self.conv5 = nn.Sequential(
            nn.Conv2d(input_channels, output_channels, 1, 1, 0, bias=False),
            nn.BatchNorm2d(output_channels),
            nn.ReLU(inplace=True),
        )
        self.fc = nn.Linear(output_channels, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)

    def _forward_impl(self, x):
        x = self.conv1(x)
        x = self.maxpool(x)
        x = self.stage2(x)
        x = self.stage3(x)
        x = self.stage4(x)
        x = self.conv5(x)
        x = x.mean([2, 3])
        x = self.fc(x)
        return x

    def forward(self, x):
        return self._forward_impl(x)


def accuracy(output, target, topk=(1,)):
    with torch.inference_mode():
        maxk = max(topk)
        batch_size = target.size(0)
        if target.ndim == 2:
            target = target.max(dim=1)[1]
        _, pred = output.topk(maxk, 1, True, True)
        pred = pred.t()
        correct = pred.eq(target[None])
        res = []
        for k in topk:
            correct_k = correct[:k].flatten().sum(dtype=torch.float32)
            res.append(correct_k * (100.0 / batch_size))
        return res


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    rng = np.random.default_rng(1006)
    model = ShuffleNetV2([2, 1, 1], [8, 8, 16, 16, 32])
    if weights is not None:
        model.load_state_dict({k: torch.tensor(v) for k, v in weights.items()})
    w = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    x = torch.from_numpy(rng.normal(size=(24, 3, 16, 16)).astype(np.float32))
    y = torch.from_numpy(rng.integers(0, 10, size=24))
    full = TensorDataset(x, y)
    perm = rng.permutation(24).tolist()
    train_a, train_b, val = Subset(full, perm[:8]), Subset(full, perm[8:16]), Subset(full, perm[16:])
    train_set = ConcatDataset([train_a, train_b])
    loader = DataLoader(train_set, batch_size=8, shuffle=False, num_workers=0)
    val_loader = DataLoader(val, batch_size=8)
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        (no_decay if p.ndim <= 1 else decay).append(p)
    optimizer = torch.optim.SGD([{"params": decay, "weight_decay": 4e-5},
                                 {"params": no_decay, "weight_decay": 0.0}],
                                lr=0.05, momentum=0.9, nesterov=True)
    total = 6
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: (1.0 - step / total) if step <= total else 0, last_epoch=-1)
    criterion = nn.CrossEntropyLoss(label_smoothing=0.1)

    def train_step(image, target):
        output = model(image)
        loss = criterion(output, target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss, output

    step = torch.compile(train_step) if compiled else train_step
    losses = [float(sum(len(d) for d in (train_a, train_b, val))), float(train_a.indices[0])]
    for epoch in range(3):
        model.train()
        for image, target in loader:
            loss, output = step(image, target)
            scheduler.step()
            acc1, acc5 = accuracy(output, target, topk=(1, 5))
            losses += [loss.item(), acc5.item()]
        model.eval()
        with torch.inference_mode():
            for image, target in val_loader:
                output = model(image)
                losses.append(criterion(output, target).item())
        losses.append(scheduler.get_last_lr()[0])
    return {"losses": losses, "weights": w, "fn": step}
