# In the manner of d2l.ai's convolutional chapters: LeNet with nn.Sigmoid and nn.AvgPool2d
# initialised by ``net.apply(init_cnn)`` (``nn.init.xavier_uniform_`` on Linear and Conv2d),
# the layer-by-layer shape printout (``X = layer(X); print(layer.__class__.__name__, X.shape)``),
# then blocks of the "modern" networks: ``vgg_block`` building a list of layers, ``nin_block``
# with 1x1 convolutions, a GoogLeNet ``Inception`` block concatenating four branches on
# ``dim=1``, a ResNet ``Residual`` with ``use_1x1conv`` and ``F.relu(Y + X)``, a DenseNet
# ``DenseBlock`` concatenating each ``conv_block``'s output with its input, a
# ``transition_block``, and ``nn.AdaptiveAvgPool2d((1, 1))`` with ``nn.Flatten``.
# Trained with SGD and CrossEntropyLoss; accuracy by ``(y_hat.argmax(1) == y).sum()``.
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import numpy as np
import torch
from torch import nn
from torch.nn import functional as F


def init_cnn(module):
    if type(module) == nn.Linear or type(module) == nn.Conv2d:
        nn.init.xavier_uniform_(module.weight)


def vgg_block(num_convs, in_channels, out_channels):
    layers = []
    for _ in range(num_convs):
        layers.append(nn.Conv2d(in_channels, out_channels, kernel_size=3, padding=1))
        layers.append(nn.ReLU())
        in_channels = out_channels
    layers.append(nn.MaxPool2d(kernel_size=2, stride=2))
    return nn.Sequential(*layers)


def nin_block(in_channels, out_channels, kernel_size, strides, padding):
    return nn.Sequential(
        nn.Conv2d(in_channels, out_channels, kernel_size, strides, padding), nn.ReLU(),
        nn.Conv2d(out_channels, out_channels, kernel_size=1), nn.ReLU(),
        nn.Conv2d(out_channels, out_channels, kernel_size=1), nn.ReLU())


class Inception(nn.Module):
    def __init__(self, in_channels, c1, c2, c3, c4, **kwargs):
        super(Inception, self).__init__(**kwargs)
        self.p1_1 = nn.Conv2d(in_channels, c1, kernel_size=1)
        self.p2_1 = nn.Conv2d(in_channels, c2[0], kernel_size=1)
        self.p2_2 = nn.Conv2d(c2[0], c2[1], kernel_size=3, padding=1)
        self.p3_1 = nn.Conv2d(in_channels, c3[0], kernel_size=1)
        self.p3_2 = nn.Conv2d(c3[0], c3[1], kernel_size=5, padding=2)
        self.p4_1 = nn.MaxPool2d(kernel_size=3, stride=1, padding=1)
        self.p4_2 = nn.Conv2d(in_channels, c4, kernel_size=1)

    def forward(self, x):
        p1 = F.relu(self.p1_1(x))
        p2 = F.relu(self.p2_2(F.relu(self.p2_1(x))))
        p3 = F.relu(self.p3_2(F.relu(self.p3_1(x))))
        p4 = F.relu(self.p4_2(self.p4_1(x)))
        return torch.cat((p1, p2, p3, p4), dim=1)


class Residual(nn.Module):
    def __init__(self, input_channels, num_channels, use_1x1conv=False, strides=1):
        super().__init__()
        self.conv1 = nn.Conv2d(input_channels, num_channels, kernel_size=3, padding=1, stride=strides)
        self.conv2 = nn.Conv2d(num_channels, num_channels, kernel_size=3, padding=1)
        if use_1x1conv:
            self.conv3 = nn.Conv2d(input_channels, num_channels, kernel_size=1, stride=strides)
        else:
            self.conv3 = None
        self.bn1 = nn.BatchNorm2d(num_channels)
        self.bn2 = nn.BatchNorm2d(num_channels)

    def forward(self, X):
        Y = F.relu(self.bn1(self.conv1(X)))
        Y = self.bn2(self.conv2(Y))
        if self.conv3:
            X = self.conv3(X)
        Y += X
        return F.relu(Y)


def conv_block(input_channels, num_channels):
    return nn.Sequential(
        nn.BatchNorm2d(input_channels), nn.ReLU(),
        nn.Conv2d(input_channels, num_channels, kernel_size=3, padding=1))


class DenseBlock(nn.Module):
    def __init__(self, num_convs, input_channels, num_channels):
        super(DenseBlock, self).__init__()
        layer = []
        for i in range(num_convs):
            layer.append(conv_block(num_channels * i + input_channels, num_channels))
        self.net = nn.Sequential(*layer)

    def forward(self, X):
        for blk in self.net:
            Y = blk(X)
            X = torch.cat((X, Y), dim=1)
        return X


def transition_block(input_channels, num_channels):
    return nn.Sequential(
        nn.BatchNorm2d(input_channels), nn.ReLU(),
        nn.Conv2d(input_channels, num_channels, kernel_size=1),
        nn.AvgPool2d(kernel_size=2, stride=2))


def lenet():
    return nn.Sequential(
        nn.Conv2d(1, 6, kernel_size=5, padding=2), nn.Sigmoid(),
        nn.AvgPool2d(kernel_size=2, stride=2),
        nn.Conv2d(6, 8, kernel_size=5), nn.Sigmoid(),
        nn.AvgPool2d(kernel_size=2, stride=2),
        nn.Flatten(),
        nn.Linear(8 * 1 * 1, 20), nn.Sigmoid(),
        nn.Linear(20, 12), nn.Sigmoid(),
        nn.Linear(12, 4))


def modern():
    b1 = nn.Sequential(vgg_block(1, 1, 8), nin_block(8, 8, kernel_size=3, strides=1, padding=1))
    b2 = nn.Sequential(Inception(8, 4, (4, 8), (2, 4), 4), Residual(20, 12, use_1x1conv=True, strides=2),
                       Residual(12, 12))
    b3 = nn.Sequential(DenseBlock(2, 12, 4), transition_block(20, 10))
    return nn.Sequential(b1, b2, b3, nn.AdaptiveAvgPool2d((1, 1)), nn.Flatten(), nn.Linear(10, 4))


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    rng = np.random.default_rng(62)
    nets = {"lenet": lenet(), "modern": modern()}
    nets["lenet"].apply(init_cnn)
    if weights is not None:
        for name, net in nets.items():
            net.load_state_dict({k[len(name) + 1:]: torch.tensor(v) for k, v in weights.items()
                                 if k.startswith(name + ".")})
    w = {f"{name}.{k}": v.detach().numpy().copy() for name, net in nets.items()
         for k, v in net.state_dict().items()}
    X = torch.tensor(rng.normal(size=(48, 1, 12, 12)).astype(np.float32))
    y = torch.tensor(rng.integers(0, 4, 48))
    losses, fns = [], []
    shapes = X[:1]
    for layer in nets["lenet"]:
        shapes = layer(shapes)
        losses.append(float(np.prod(shapes.shape)))
    for name, net in nets.items():
        loss = nn.CrossEntropyLoss()
        optimizer = torch.optim.SGD(net.parameters(), lr=0.9 if name == "lenet" else 0.05)

        def train_step(X, y):
            optimizer.zero_grad()
            y_hat = net(X)
            l = loss(y_hat, y)
            l.backward()
            optimizer.step()
            return l, y_hat

        step = torch.compile(train_step) if compiled else train_step
        fns.append(step)
        for epoch in range(2):
            net.train()
            for i in range(0, 48, 16):
                l, y_hat = step(X[i:i + 16], y[i:i + 16])
                losses.append(l.item())
                losses.append((y_hat.argmax(1) == y[i:i + 16]).sum().item())
        net.eval()
        with torch.no_grad():
            losses.append(loss(net(X), y).item())
    return {"losses": losses, "weights": w, "fn": fns}
