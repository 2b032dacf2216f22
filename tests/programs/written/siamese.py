# In the manner of pytorch/examples siamese_network/main.py, with a small ResNet.
# Written for dualgraph's tests with the public program's idioms, not copied from it; it
# keeps their style (super(Class, self), unused loop variables), so ruff leaves it alone.
# ruff: noqa
import types
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim
from torch.optim.lr_scheduler import StepLR

resnets = types.ModuleType('resnets')
exec(open(Path(__file__).parent / 'tinyresnet.py').read(), resnets.__dict__)
resnets.torch = torch


class SiameseNetwork(nn.Module):
    def __init__(self):
        super(SiameseNetwork, self).__init__()
        self.resnet = resnets.ResNet()
        self.resnet.conv1 = nn.Conv2d(1, 8, kernel_size=(7, 7), stride=(2, 2), padding=(3, 3), bias=False)
        self.fc_in_features = self.resnet.fc.in_features
        self.resnet = torch.nn.Sequential(*(list(self.resnet.children())[:-1]))
        self.fc = nn.Sequential(
            nn.Linear(self.fc_in_features * 2, 256),
            nn.ReLU(inplace=True),
            nn.Linear(256, 1),
        )
        self.sigmoid = nn.Sigmoid()
        self.resnet.apply(self.init_weights)
        self.fc.apply(self.init_weights)

    def init_weights(self, m):
        if isinstance(m, nn.Linear):
            torch.nn.init.xavier_uniform_(m.weight)
            m.bias.data.fill_(0.01)

    def forward_once(self, x):
        output = self.resnet(x)
        output = output.view(output.size()[0], -1)
        return output

    def forward(self, input1, input2):
        output1 = self.forward_once(input1)
        output2 = self.forward_once(input2)
        output = torch.cat((output1, output2), 1)
        output = self.fc(output)
        output = self.sigmoid(output)
        return output


class APP_MATCHER(torch.utils.data.Dataset):
    def __init__(self, n, seed):
        super(APP_MATCHER, self).__init__()
        rng = np.random.default_rng(seed)
        self.a = rng.standard_normal((n, 1, 28, 28)).astype(np.float32)
        self.b = rng.standard_normal((n, 1, 28, 28)).astype(np.float32)
        self.t = rng.integers(0, 2, n)

    def __len__(self):
        return len(self.t)

    def __getitem__(self, index):
        image_1 = torch.from_numpy(self.a[index])
        image_2 = torch.from_numpy(self.b[index])
        target = torch.tensor(int(self.t[index]), dtype=torch.float)
        return image_1, image_2, target


def train(model, device, train_loader, optimizer, epoch, losses, step):
    model.train()
    for batch_idx, (images_1, images_2, targets) in enumerate(train_loader):
        images_1, images_2, targets = images_1.to(device), images_2.to(device), targets.to(device)
        losses.append(step(images_1, images_2, targets).item())


def test(model, device, test_loader, losses):
    model.eval()
    test_loss = 0
    correct = 0
    criterion = nn.BCELoss()
    with torch.no_grad():
        for (images_1, images_2, targets) in test_loader:
            images_1, images_2, targets = images_1.to(device), images_2.to(device), targets.to(device)
            outputs = model(images_1, images_2).squeeze()
            test_loss += criterion(outputs, targets).sum().item()
            pred = torch.where(outputs > 0.5, 1, 0)
            correct += pred.eq(targets.view_as(pred)).sum().item()
    test_loss /= len(test_loader.dataset)
    losses += [test_loss, correct]


def run(weights=None, compiled=False):
    torch.manual_seed(1)
    device = torch.device("cpu")
    model = SiameseNetwork().to(device)
    if weights is not None:
        model.load_state_dict({k: torch.tensor(v) for k, v in weights.items()})
    w = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    train_loader = torch.utils.data.DataLoader(APP_MATCHER(16, 0), batch_size=4, shuffle=False)
    test_loader = torch.utils.data.DataLoader(APP_MATCHER(8, 1), batch_size=4)
    optimizer = optim.Adadelta(model.parameters(), lr=1.0)
    criterion = nn.BCELoss()

    def step(images_1, images_2, targets):
        optimizer.zero_grad()
        outputs = model(images_1, images_2).squeeze()
        loss = criterion(outputs, targets)
        loss.backward()
        optimizer.step()
        return loss
    f = torch.compile(step) if compiled else step
    scheduler = StepLR(optimizer, step_size=1, gamma=0.7)
    losses = []
    for epoch in range(1, 3):
        train(model, device, train_loader, optimizer, epoch, losses, f)
        test(model, device, test_loader, losses)
        scheduler.step()
    return {"losses": losses, "weights": w, "fn": f}
