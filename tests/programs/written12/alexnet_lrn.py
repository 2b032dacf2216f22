# In the manner of the original AlexNet in PyTorch (the LRN variant from Krizhevsky et
# al. 2012 as in dansuh17/alexnet-pytorch, MIT licence): ``nn.LocalResponseNorm(size=5,
# alpha=1e-4, beta=0.75, k=2)`` after the first two convolutions, overlapping max pooling
# ``nn.MaxPool2d(kernel_size=3, stride=2)``, ``nn.AdaptiveAvgPool2d((2, 2))`` and
# ``torch.flatten(x, 1)``, ``init_bias`` with ``nn.init.normal_(layer.weight, mean=0,
# std=0.01)`` and ``nn.init.constant_`` on biases picked by index into the Sequential,
# SGD with momentum and weight decay under a ``CyclicLR`` whose ``cycle_momentum`` moves
# the momentum too, ``torch.backends.cudnn.benchmark = True``, per-step accuracy by
# ``torch.max(output, 1)`` and a running ``total_steps`` log.
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.backends.cudnn.benchmark = True
NUM_CLASSES = 5


class AlexNet(nn.Module):
    def __init__(self, num_classes=NUM_CLASSES):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(in_channels=3, out_channels=8, kernel_size=5, stride=2, padding=2),
            nn.ReLU(),
            nn.LocalResponseNorm(size=5, alpha=0.0001, beta=0.75, k=2),
            nn.MaxPool2d(kernel_size=3, stride=2),
            nn.Conv2d(8, 12, 3, padding=1),
            nn.ReLU(),
            nn.LocalResponseNorm(size=5, alpha=0.0001, beta=0.75, k=2),
            nn.MaxPool2d(kernel_size=3, stride=2),
            nn.Conv2d(12, 16, 3, padding=1),
            nn.ReLU(),
            nn.Conv2d(16, 16, 3, padding=1),
            nn.ReLU(),
        )
        self.avgpool = nn.AdaptiveAvgPool2d((2, 2))
        self.classifier = nn.Sequential(
            nn.Dropout(p=0.0, inplace=True),
            nn.Linear(in_features=(16 * 2 * 2), out_features=32),
            nn.ReLU(),
            nn.Dropout(p=0.0, inplace=True),
            nn.Linear(in_features=32, out_features=32),
            nn.ReLU(),
            nn.Linear(in_features=32, out_features=num_classes),
        )
        self.init_bias()

    def init_bias(self):
        for layer in self.net:
            if isinstance(layer, nn.Conv2d):
                nn.init.normal_(layer.weight, mean=0, std=0.1)
                nn.init.constant_(layer.bias, 0)
        nn.init.constant_(self.net[4].bias, 1)
        nn.init.constant_(self.net[8].bias, 1)
        nn.init.constant_(self.net[10].bias, 1)

    def forward(self, x):
        x = self.net(x)
        x = self.avgpool(x)
        x = torch.flatten(x, 1)
        return self.classifier(x)


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    rng = np.random.default_rng(1206)
    alexnet = AlexNet(num_classes=NUM_CLASSES)
    if weights is not None:
        alexnet.load_state_dict({k: torch.tensor(v) for k, v in weights.items()})
    w = {k: v.detach().numpy().copy() for k, v in alexnet.state_dict().items()}
    optimizer = torch.optim.SGD(params=alexnet.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-4)
    lr_scheduler = torch.optim.lr_scheduler.CyclicLR(optimizer, base_lr=0.005, max_lr=0.05, step_size_up=2,
                                                     mode="triangular2", base_momentum=0.8, max_momentum=0.9)
    batches = [(torch.from_numpy(rng.standard_normal((4, 3, 24, 24)).astype(np.float32)),
                torch.from_numpy(rng.integers(0, NUM_CLASSES, 4))) for _ in range(3)]

    def train_step(imgs, classes):
        output = alexnet(imgs)
        loss = F.cross_entropy(output, classes)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        with torch.no_grad():
            _, preds = torch.max(output, 1)
            accuracy = torch.sum(preds == classes)
        return loss, accuracy

    step = torch.compile(train_step) if compiled else train_step
    losses = []
    total_steps = 1
    for epoch in range(2):
        alexnet.train()
        for imgs, classes in batches:
            loss, accuracy = step(imgs, classes)
            lr_scheduler.step()
            losses += [loss.item(), accuracy.item(), optimizer.param_groups[0]["lr"],
                       optimizer.param_groups[0]["momentum"]]
            total_steps += 1
    alexnet.eval()
    with torch.no_grad():
        out = alexnet(batches[0][0])
        losses += [float(out.abs().sum()), total_steps]
    return {"losses": losses, "weights": w, "fn": step}
