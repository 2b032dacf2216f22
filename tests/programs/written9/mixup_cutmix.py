# In the manner of facebookresearch/mixup-cifar10's train.py (BSD licence), clovaai/CutMix-
# PyTorch's train.py (MIT licence) and timm's soft-target losses (Apache licence): a
# PreAct ResNet block (``F.relu(self.bn1(x))`` before the conv, a ``shortcut`` 1x1 conv
# when ``hasattr(self, 'shortcut')``), ``mixup_data`` with ``lam = np.random.beta(alpha,
# alpha)`` and a permutation index, ``mixed_x = lam * x + (1 - lam) * x[index, :]``,
# ``mixup_criterion``, CutMix's ``rand_bbox`` by ``np.sqrt(1. - lam)``/``np.int32``/
# ``np.clip`` and ``input[:, :, bbx1:bbx2, bby1:bby2] = input[rand_index, :, bbx1:bbx2,
# bby1:bby2]`` with ``lam`` readjusted by area, a one-hot soft target through
# ``F.one_hot(...).float()`` mixed and smoothed, ``torch.sum(-target * F.log_softmax(x,
# dim=-1), dim=-1).mean()``, the step taking ``lam`` as a Python float, progress figures
# by ``predicted.eq(targets_a.data).cpu().sum().float()``, SGD with momentum and weight
# decay, and ``torch.backends.cudnn.benchmark``. The permutation comes from NumPy where
# the originals call ``torch.randperm`` (torch's and dualgraph's random streams differ).
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import numpy as np
import torch
import torch.backends.cudnn as cudnn
import torch.nn as nn
import torch.nn.functional as F


class PreActBlock(nn.Module):
    expansion = 1

    def __init__(self, in_planes, planes, stride=1):
        super(PreActBlock, self).__init__()
        self.bn1 = nn.BatchNorm2d(in_planes)
        self.conv1 = nn.Conv2d(in_planes, planes, kernel_size=3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, kernel_size=3, stride=1, padding=1, bias=False)
        if stride != 1 or in_planes != self.expansion * planes:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_planes, self.expansion * planes, kernel_size=1, stride=stride, bias=False)
            )

    def forward(self, x):
        out = F.relu(self.bn1(x))
        shortcut = self.shortcut(out) if hasattr(self, 'shortcut') else x
        out = self.conv1(out)
        out = self.conv2(F.relu(self.bn2(out)))
        out += shortcut
        return out


class PreActResNet(nn.Module):
    def __init__(self, block, num_blocks, num_classes=4):
        super(PreActResNet, self).__init__()
        self.in_planes = 8
        self.conv1 = nn.Conv2d(3, 8, kernel_size=3, stride=1, padding=1, bias=False)
        self.layer1 = self._make_layer(block, 8, num_blocks[0], stride=1)
        self.layer2 = self._make_layer(block, 16, num_blocks[1], stride=2)
        self.bn = nn.BatchNorm2d(16 * block.expansion)
        self.linear = nn.Linear(16 * block.expansion, num_classes)

    def _make_layer(self, block, planes, num_blocks, stride):
        strides = [stride] + [1] * (num_blocks - 1)
        layers = []
        for stride in strides:
            layers.append(block(self.in_planes, planes, stride))
            self.in_planes = planes * block.expansion
        return nn.Sequential(*layers)

    def forward(self, x):
        out = self.conv1(x)
        out = self.layer1(out)
        out = self.layer2(out)
        out = F.relu(self.bn(out))
        out = F.avg_pool2d(out, 4)
        out = out.view(out.size(0), -1)
        out = self.linear(out)
        return out


def mixup_data(x, y, alpha=1.0, use_cuda=False):
    if alpha > 0:
        lam = np.random.beta(alpha, alpha)
    else:
        lam = 1
    batch_size = x.size()[0]
    index = torch.from_numpy(np.random.permutation(batch_size))
    if use_cuda:
        index = index.cuda()
    mixed_x = lam * x + (1 - lam) * x[index, :]
    y_a, y_b = y, y[index]
    return mixed_x, y_a, y_b, lam


def mixup_criterion(criterion, pred, y_a, y_b, lam):
    return lam * criterion(pred, y_a) + (1 - lam) * criterion(pred, y_b)


def rand_bbox(size, lam):
    W = size[2]
    H = size[3]
    cut_rat = np.sqrt(1. - lam)
    cut_w = np.int32(W * cut_rat)
    cut_h = np.int32(H * cut_rat)
    cx = np.random.randint(W)
    cy = np.random.randint(H)
    bbx1 = np.clip(cx - cut_w // 2, 0, W)
    bby1 = np.clip(cy - cut_h // 2, 0, H)
    bbx2 = np.clip(cx + cut_w // 2, 0, W)
    bby2 = np.clip(cy + cut_h // 2, 0, H)
    return bbx1, bby1, bbx2, bby2


def soft_target_cross_entropy(x, target):
    loss = torch.sum(-target * F.log_softmax(x, dim=-1), dim=-1)
    return loss.mean()


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    np.random.seed(906)
    use_cuda = torch.cuda.is_available()
    cudnn.benchmark = True
    net = PreActResNet(PreActBlock, [1, 1])
    if weights is not None:
        net.load_state_dict({k: torch.tensor(v) for k, v in weights.items()})
    w = {k: v.detach().numpy().copy() for k, v in net.state_dict().items()}
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(net.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
    data = [(torch.from_numpy(np.random.normal(size=(6, 3, 8, 8)).astype(np.float32)),
             torch.from_numpy(np.random.randint(0, 4, 6))) for _ in range(3)]

    def mixup_step(inputs, targets_a, targets_b, lam):
        outputs = net(inputs)
        loss = mixup_criterion(criterion, outputs, targets_a, targets_b, lam)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss, outputs

    def soft_step(inputs, target):
        output = net(inputs)
        loss = soft_target_cross_entropy(output, target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss

    steps = [torch.compile(mixup_step), torch.compile(soft_step)] if compiled else [mixup_step, soft_step]
    losses = []
    net.train()
    for epoch in range(2):
        train_loss, correct, total = 0, 0, 0
        for batch_idx, (inputs, targets) in enumerate(data):
            inputs, targets_a, targets_b, lam = mixup_data(inputs, targets, 1.0, use_cuda)
            loss, outputs = steps[0](inputs, targets_a, targets_b, lam)
            train_loss += loss.item()
            _, predicted = torch.max(outputs.data, 1)
            total += targets_a.size(0)
            correct += (lam * predicted.eq(targets_a.data).cpu().sum().float()
                        + (1 - lam) * predicted.eq(targets_b.data).cpu().sum().float())
            losses += [loss.item(), train_loss / (batch_idx + 1), float(100. * correct / total)]
        for input, target in data:
            input = input.clone()
            lam = np.random.beta(1.0, 1.0)
            rand_index = torch.from_numpy(np.random.permutation(input.size()[0]))
            target_a = target
            target_b = target[rand_index]
            bbx1, bby1, bbx2, bby2 = rand_bbox(input.size(), lam)
            input[:, :, bbx1:bbx2, bby1:bby2] = input[rand_index, :, bbx1:bbx2, bby1:bby2]
            lam = 1 - ((bbx2 - bbx1) * (bby2 - bby1) / (input.size()[-1] * input.size()[-2]))
            soft = lam * F.one_hot(target_a, num_classes=4).float() + (1 - lam) * F.one_hot(target_b, 4).float()
            soft = soft * (1 - 0.1) + 0.1 / 4
            losses.append(steps[1](input, soft).item())
    return {"losses": losses, "weights": w, "fn": steps}
