# In the manner of yunjey/pytorch-tutorial's deep residual network: conv3x3, a
# ResidualBlock with an optional downsample nn.Sequential, make_layer building
# nn.Sequential(*layers), AvgPool2d, Adam, and a manual learning-rate decay every other
# epoch through update_lr: `for param_group in optimizer.param_groups:
# param_group['lr'] = lr`.
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import numpy as np
import torch
import torch.nn as nn

device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')

num_epochs = 4
learning_rate = 0.003


def conv3x3(in_channels, out_channels, stride=1):
    return nn.Conv2d(in_channels, out_channels, kernel_size=3,
                     stride=stride, padding=1, bias=False)


class ResidualBlock(nn.Module):
    def __init__(self, in_channels, out_channels, stride=1, downsample=None):
        super(ResidualBlock, self).__init__()
        self.conv1 = conv3x3(in_channels, out_channels, stride)
        self.bn1 = nn.BatchNorm2d(out_channels)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = conv3x3(out_channels, out_channels)
        self.bn2 = nn.BatchNorm2d(out_channels)
        self.downsample = downsample

    def forward(self, x):
        residual = x
        out = self.conv1(x)
        out = self.bn1(out)
        out = self.relu(out)
        out = self.conv2(out)
        out = self.bn2(out)
        if self.downsample:
            residual = self.downsample(x)
        out += residual
        out = self.relu(out)
        return out


class ResNet(nn.Module):
    def __init__(self, block, layers, num_classes=10):
        super(ResNet, self).__init__()
        self.in_channels = 4
        self.conv = conv3x3(3, 4)
        self.bn = nn.BatchNorm2d(4)
        self.relu = nn.ReLU(inplace=True)
        self.layer1 = self.make_layer(block, 4, layers[0])
        self.layer2 = self.make_layer(block, 8, layers[1], 2)
        self.avg_pool = nn.AvgPool2d(4)
        self.fc = nn.Linear(8, num_classes)

    def make_layer(self, block, out_channels, blocks, stride=1):
        downsample = None
        if (stride != 1) or (self.in_channels != out_channels):
            downsample = nn.Sequential(
                conv3x3(self.in_channels, out_channels, stride=stride),
                nn.BatchNorm2d(out_channels))
        layers = []
        layers.append(block(self.in_channels, out_channels, stride, downsample))
        self.in_channels = out_channels
        for i in range(1, blocks):
            layers.append(block(out_channels, out_channels))
        return nn.Sequential(*layers)

    def forward(self, x):
        out = self.conv(x)
        out = self.bn(out)
        out = self.relu(out)
        out = self.layer1(out)
        out = self.layer2(out)
        out = self.avg_pool(out)
        out = out.view(out.size(0), -1)
        out = self.fc(out)
        return out


def update_lr(optimizer, lr):
    for param_group in optimizer.param_groups:
        param_group['lr'] = lr


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    rng = np.random.default_rng(5)
    all_images = rng.standard_normal((40, 3, 8, 8)).astype(np.float32)
    all_labels = rng.integers(0, 10, 40)
    train_loader = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(torch.tensor(all_images[:32]), torch.tensor(all_labels[:32])),
        batch_size=8, shuffle=False)
    model = ResNet(ResidualBlock, [1, 1]).to(device)
    if weights is not None:
        model.load_state_dict({k: torch.tensor(v) for k, v in weights.items()})
    w = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=learning_rate)

    def train_step(images, labels):
        outputs = model(images)
        loss = criterion(outputs, labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss

    step = torch.compile(train_step) if compiled else train_step
    losses = []
    curr_lr = learning_rate
    for epoch in range(num_epochs):
        for i, (images, labels) in enumerate(train_loader):
            images = images.to(device)
            labels = labels.to(device)
            loss = step(images, labels)
            losses.append(loss.item())
        if (epoch + 1) % 2 == 0:
            curr_lr /= 3
            update_lr(optimizer, curr_lr)
    model.eval()
    with torch.no_grad():
        outputs = model(torch.tensor(all_images[32:]))
        losses.append(outputs.sum().item())
        losses.append((outputs.argmax(1) == torch.tensor(all_labels[32:])).sum().item())
    return {"losses": losses, "weights": w, "fn": step}
