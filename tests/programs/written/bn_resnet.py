# In the manner of small residual networks trained on image batches: basic blocks with
# BatchNorm2d and a 1x1 projection shortcut, kaiming_normal_(mode="fan_out") and constant
# initialisation of the norms, label smoothing, SGD with Nesterov momentum and weight decay,
# zero_grad(set_to_none=True), and a validation pass in the middle of each epoch
# (model.eval() under torch.no_grad(), then model.train() again) reporting top-1 accuracy.
# Written for dualgraph's tests with the public programs' idioms, not copied from them.
# ruff: noqa
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class BasicBlock(nn.Module):
    def __init__(self, in_planes, planes, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(in_planes, planes, kernel_size=3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, kernel_size=3, stride=1, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.shortcut = nn.Sequential()
        if stride != 1 or in_planes != planes:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_planes, planes, kernel_size=1, stride=stride, bias=False),
                nn.BatchNorm2d(planes))

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        out += self.shortcut(x)
        return F.relu(out)


class SmallResNet(nn.Module):
    def __init__(self, num_classes=3):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 4, kernel_size=3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(4)
        self.layer1 = BasicBlock(4, 6, stride=2)
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(6, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, (nn.BatchNorm2d, nn.GroupNorm)):
                nn.init.constant_(m.weight, 1)
                nn.init.constant_(m.bias, 0)

    def forward(self, x):
        x = F.relu(self.bn1(self.conv1(x)))
        x = self.layer1(x)
        x = self.avgpool(x)
        x = torch.flatten(x, 1)
        return self.fc(x)


def accuracy(output, target):
    with torch.no_grad():
        pred = output.argmax(dim=1)
        return pred.eq(target).sum().item() * 100.0 / target.size(0)


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    model = SmallResNet()
    if weights is not None:
        model.load_state_dict({k: torch.tensor(v) for k, v in weights.items()})
    w = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 3, 40)
    images = rng.standard_normal((40, 1, 6, 6)).astype(np.float32) * 0.5
    images[labels == 0, :, :3] += 1.0
    images[labels == 1, :, :, :3] -= 1.0
    X, Y = torch.from_numpy(images), torch.from_numpy(labels)
    train_x, train_y, val_x, val_y = X[:32], Y[:32], X[32:], Y[32:]
    criterion = nn.CrossEntropyLoss(label_smoothing=0.1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True,
                                weight_decay=5e-4)

    def train_step(images, target):
        output = model(images)
        loss = criterion(output, target)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        return loss, output

    step = torch.compile(train_step) if compiled else train_step
    losses = []
    for epoch in range(2):
        for i in range(0, 32, 8):
            model.train()
            loss, output = step(train_x[i:i + 8], train_y[i:i + 8])
            losses += [loss.item(), accuracy(output, train_y[i:i + 8])]
            if i == 8:  # validate mid-epoch
                model.eval()
                with torch.no_grad():
                    out = model(val_x)
                    losses += [criterion(out, val_y).item(), accuracy(out, val_y)]
    losses.append(model.bn1.running_mean.sum().item())
    losses.append(model.layer1.bn2.running_var.sum().item())
    losses.append(int(model.layer1.bn1.num_batches_tracked))
    return {"losses": losses, "weights": w, "fn": step}
