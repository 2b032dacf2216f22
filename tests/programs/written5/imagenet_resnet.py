# In the manner of pytorch/examples imagenet/main.py with a ResNet-18-style network written
# out (BasicBlock with a downsample branch, kaiming_normal_ init, zero-init of the last BN
# gamma), AverageMeter and ProgressMeter-free bookkeeping, accuracy(output, target,
# topk=(1, 5)), SGD with momentum/nesterov-free weight decay, StepLR, cudnn.benchmark,
# train()/validate() with model.train()/model.eval(), torch.no_grad() and best_acc1 tracking.
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import numpy as np
import torch
import torch.backends.cudnn as cudnn
import torch.nn as nn
from torch.optim.lr_scheduler import StepLR


def conv3x3(in_planes, out_planes, stride=1):
    return nn.Conv2d(in_planes, out_planes, kernel_size=3, stride=stride, padding=1, bias=False)


def conv1x1(in_planes, out_planes, stride=1):
    return nn.Conv2d(in_planes, out_planes, kernel_size=1, stride=stride, bias=False)


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, inplanes, planes, stride=1, downsample=None):
        super().__init__()
        self.conv1 = conv3x3(inplanes, planes, stride)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = conv3x3(planes, planes)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = downsample
        self.stride = stride

    def forward(self, x):
        identity = x
        out = self.conv1(x)
        out = self.bn1(out)
        out = self.relu(out)
        out = self.conv2(out)
        out = self.bn2(out)
        if self.downsample is not None:
            identity = self.downsample(x)
        out += identity
        out = self.relu(out)
        return out


class ResNet(nn.Module):
    def __init__(self, block, layers, num_classes=10, width=8, zero_init_residual=True):
        super().__init__()
        self.inplanes = width
        self.conv1 = nn.Conv2d(3, width, kernel_size=3, stride=1, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        self.layer1 = self._make_layer(block, width, layers[0])
        self.layer2 = self._make_layer(block, width * 2, layers[1], stride=2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(width * 2 * block.expansion, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, (nn.BatchNorm2d, nn.GroupNorm)):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)
        if zero_init_residual:
            for m in self.modules():
                if isinstance(m, BasicBlock) and m.bn2.weight is not None:
                    nn.init.constant_(m.bn2.weight, 0)

    def _make_layer(self, block, planes, blocks, stride=1):
        downsample = None
        if stride != 1 or self.inplanes != planes * block.expansion:
            downsample = nn.Sequential(
                conv1x1(self.inplanes, planes * block.expansion, stride),
                nn.BatchNorm2d(planes * block.expansion),
            )
        layers = [block(self.inplanes, planes, stride, downsample)]
        self.inplanes = planes * block.expansion
        for _ in range(1, blocks):
            layers.append(block(self.inplanes, planes))
        return nn.Sequential(*layers)

    def forward(self, x):
        x = self.conv1(x)
        x = self.bn1(x)
        x = self.relu(x)
        x = self.maxpool(x)
        x = self.layer1(x)
        x = self.layer2(x)
        x = self.avgpool(x)
        x = torch.flatten(x, 1)
        x = self.fc(x)
        return x


class AverageMeter:
    """Computes and stores the average and current value"""

    def __init__(self, name, fmt=':f'):
        self.name = name
        self.fmt = fmt
        self.reset()

    def reset(self):
        self.val = 0
        self.avg = 0
        self.sum = 0
        self.count = 0

    def update(self, val, n=1):
        self.val = val
        self.sum += val * n
        self.count += n
        self.avg = self.sum / self.count

    def __str__(self):
        fmtstr = '{name} {val' + self.fmt + '} ({avg' + self.fmt + '})'
        return fmtstr.format(**self.__dict__)


def accuracy(output, target, topk=(1,)):
    """Computes the accuracy over the k top predictions for the specified values of k"""
    with torch.no_grad():
        maxk = max(topk)
        batch_size = target.size(0)
        _, pred = output.topk(maxk, 1, True, True)
        pred = pred.t()
        correct = pred.eq(target.view(1, -1).expand_as(pred))
        res = []
        for k in topk:
            correct_k = correct[:k].reshape(-1).float().sum(0, keepdim=True)
            res.append(correct_k.mul_(100.0 / batch_size))
        return res


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    cudnn.benchmark = True
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    rng = np.random.default_rng(3)
    images = rng.normal(size=(48, 3, 8, 8)).astype(np.float32)
    targets = rng.integers(0, 10, 48)
    images[np.arange(48), targets % 3, targets % 8, :] += 2.0
    model = ResNet(BasicBlock, [1, 1]).to(device)
    if weights is not None:
        model.load_state_dict({k: torch.tensor(v) for k, v in weights.items()})
    w = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    criterion = nn.CrossEntropyLoss().to(device)
    optimizer = torch.optim.SGD(model.parameters(), 0.05, momentum=0.9, weight_decay=1e-4)
    scheduler = StepLR(optimizer, step_size=2, gamma=0.1)

    def train_step(images, target):
        output = model(images)
        loss = criterion(output, target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return output, loss

    step = torch.compile(train_step) if compiled else train_step
    losses = []
    best_acc1 = 0
    for epoch in range(3):
        batch_losses = AverageMeter('Loss', ':.4e')
        top1 = AverageMeter('Acc@1', ':6.2f')
        top5 = AverageMeter('Acc@5', ':6.2f')
        model.train()
        for i in range(0, 32, 8):
            images_b = torch.from_numpy(images[i:i + 8]).to(device, non_blocking=True)
            target = torch.from_numpy(targets[i:i + 8]).to(device, non_blocking=True)
            output, loss = step(images_b, target)
            acc1, acc5 = accuracy(output, target, topk=(1, 5))
            batch_losses.update(loss.item(), images_b.size(0))
            top1.update(acc1[0], images_b.size(0))
            top5.update(acc5[0], images_b.size(0))
            losses.append(loss.item())
        losses += [batch_losses.avg, float(top1.avg), float(top5.avg)]
        str(top1)
        # validate
        model.eval()
        vtop1 = AverageMeter('Acc@1', ':6.2f')
        vloss = AverageMeter('Loss', ':.4e')
        with torch.no_grad():
            images_v = torch.from_numpy(images[32:])
            target_v = torch.from_numpy(targets[32:])
            output = model(images_v)
            loss = criterion(output, target_v)
            acc1, acc5 = accuracy(output, target_v, topk=(1, 5))
            vloss.update(loss.item(), images_v.size(0))
            vtop1.update(acc1[0], images_v.size(0))
        losses += [vloss.avg, vtop1.avg.item()]
        is_best = vtop1.avg > best_acc1
        best_acc1 = max(vtop1.avg, best_acc1)
        scheduler.step()
        losses.append(scheduler.get_last_lr()[0])
    losses.append(float(best_acc1))
    return {"losses": losses, "weights": w, "fn": step}
