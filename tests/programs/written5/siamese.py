# In the manner of pytorch/examples siamese_network: a shared CNN tower applied to both
# images of a pair (forward_once), the pair's features concatenated and passed through
# fc layers to one logit, nn.Sigmoid and nn.BCELoss on float targets, weights initialised
# by an init_weights function passed to self.apply (xavier_uniform_, bias.data.fill_(0.01)),
# Adadelta with StepLR(gamma=0.7), a test loop that thresholds with torch.where(output >
# 0.5, 1, 0) and counts pred.eq(target.view_as(pred)).sum(); then a contrastive-loss
# variant with F.pairwise_distance and torch.clamp(margin - d, min=0.0).
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.optim.lr_scheduler import StepLR


class SiameseNetwork(nn.Module):
    def __init__(self):
        super().__init__()
        self.cnn = nn.Sequential(
            nn.Conv2d(1, 4, kernel_size=3, padding=1), nn.ReLU(inplace=True), nn.MaxPool2d(2),
            nn.Conv2d(4, 8, kernel_size=3, padding=1), nn.ReLU(inplace=True), nn.AdaptiveAvgPool2d((2, 2)),
        )
        self.fc_in_features = 8 * 2 * 2
        self.fc = nn.Sequential(
            nn.Linear(self.fc_in_features * 2, 16), nn.ReLU(inplace=True), nn.Linear(16, 1))
        self.sigmoid = nn.Sigmoid()
        self.cnn.apply(self.init_weights)
        self.fc.apply(self.init_weights)

    def init_weights(self, m):
        if isinstance(m, (nn.Linear, nn.Conv2d)):
            torch.nn.init.xavier_uniform_(m.weight)
            m.bias.data.fill_(0.01)

    def forward_once(self, x):
        output = self.cnn(x)
        output = output.view(output.size()[0], -1)
        return output

    def forward(self, input1, input2):
        output1 = self.forward_once(input1)
        output2 = self.forward_once(input2)
        output = torch.cat((output1, output2), 1)
        output = self.fc(output)
        output = self.sigmoid(output)
        return output


class ContrastiveLoss(nn.Module):
    def __init__(self, margin=2.0):
        super().__init__()
        self.margin = margin

    def forward(self, output1, output2, label):
        euclidean_distance = F.pairwise_distance(output1, output2, keepdim=True)
        return torch.mean((1 - label) * torch.pow(euclidean_distance, 2)
                          + label * torch.pow(torch.clamp(self.margin - euclidean_distance, min=0.0), 2))


def make_pairs(rng, n):
    protos = rng.normal(size=(4, 1, 8, 8)).astype(np.float32)
    a = rng.integers(0, 4, n)
    same = rng.integers(0, 2, n)
    b = np.where(same == 1, a, (a + 1 + rng.integers(0, 3, n)) % 4)
    x1 = protos[a] + 0.3 * rng.normal(size=(n, 1, 8, 8)).astype(np.float32)
    x2 = protos[b] + 0.3 * rng.normal(size=(n, 1, 8, 8)).astype(np.float32)
    return torch.from_numpy(x1), torch.from_numpy(x2), torch.from_numpy(same.astype(np.float32))


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    rng = np.random.default_rng(14)
    model = SiameseNetwork()
    if weights is not None:
        model.load_state_dict({k: torch.tensor(v) for k, v in weights.items()})
    w = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    optimizer = optim.Adadelta(model.parameters(), lr=1.0)
    scheduler = StepLR(optimizer, step_size=1, gamma=0.7)
    criterion = nn.BCELoss()

    def train_step(images_1, images_2, targets):
        optimizer.zero_grad()
        outputs = model(images_1, images_2).squeeze()
        loss = criterion(outputs, targets)
        loss.backward()
        optimizer.step()
        return loss

    step = torch.compile(train_step) if compiled else train_step
    x1, x2, t = make_pairs(rng, 64)
    losses = []
    for epoch in range(2):
        model.train()
        for i in range(0, 48, 16):
            losses.append(step(x1[i:i + 16], x2[i:i + 16], t[i:i + 16]).item())
        model.eval()
        test_loss, correct = 0, 0
        with torch.no_grad():
            outputs = model(x1[48:], x2[48:]).squeeze()
            test_loss += criterion(outputs, t[48:]).sum().item()
            pred = torch.where(outputs > 0.5, 1, 0)
            correct += pred.eq(t[48:].view_as(pred)).sum().item()
        losses += [test_loss, correct]
        scheduler.step()
    contrastive = ContrastiveLoss()
    opt2 = optim.Adam(model.cnn.parameters(), lr=1e-3)

    def contrastive_step(a, b, label):
        opt2.zero_grad()
        loss = contrastive(model.forward_once(a), model.forward_once(b), (1 - label).unsqueeze(1))
        loss.backward()
        opt2.step()
        return loss

    step2 = torch.compile(contrastive_step) if compiled else contrastive_step
    for i in range(0, 48, 16):
        losses.append(step2(x1[i:i + 16], x2[i:i + 16], t[i:i + 16]).item())
    return {"losses": losses, "weights": w, "fn": [step, step2]}
