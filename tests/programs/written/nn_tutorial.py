# In the manner of the PyTorch tutorial "What is torch.nn really?" (written from memory).
# Written for dualgraph's tests with the public program's idioms, not copied from it; it
# keeps their style (super(Class, self), unused loop variables), so ruff leaves it alone.
# ruff: noqa
import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn, optim
from torch.utils.data import DataLoader, TensorDataset

rng = np.random.default_rng(0)
x_train = rng.random((64, 784)).astype(np.float32)
y_train = rng.integers(0, 10, 64)
x_valid = rng.random((32, 784)).astype(np.float32)
y_valid = rng.integers(0, 10, 32)
x_train, y_train, x_valid, y_valid = map(torch.tensor, (x_train, y_train, x_valid, y_valid))
n, c = x_train.shape
bs = 16
lr = 0.1


def log_softmax(x):
    return x - x.exp().sum(-1).log().unsqueeze(-1)


def nll(input, target):
    return -input[range(target.shape[0]), target].mean()


def accuracy(out, yb):
    preds = torch.argmax(out, dim=1)
    return (preds == yb).float().mean()


def manual():
    torch.manual_seed(0)
    # torch.randn's stream is torch's own: the same draws come from NumPy here
    weights = torch.from_numpy(rng.standard_normal((784, 10)).astype(np.float32)) / math.sqrt(784)
    weights.requires_grad_()
    bias = torch.zeros(10, requires_grad=True)

    def model(xb):
        return log_softmax(xb @ weights + bias)
    losses = []
    for i in range((n - 1) // bs + 1):
        start_i = i * bs
        end_i = start_i + bs
        xb = x_train[start_i:end_i]
        yb = y_train[start_i:end_i]
        pred = model(xb)
        loss = nll(pred, yb)
        loss.backward()
        with torch.no_grad():
            weights -= weights.grad * lr
            bias -= bias.grad * lr
            weights.grad.zero_()
            bias.grad.zero_()
        losses.append(loss.item())
    return losses, accuracy(model(x_valid), y_valid).item()


class Lambda(nn.Module):
    def __init__(self, func):
        super().__init__()
        self.func = func

    def forward(self, x):
        return self.func(x)


def preprocess(x, y):
    return x.view(-1, 1, 28, 28), y


class WrappedDataLoader:
    def __init__(self, dl, func):
        self.dl = dl
        self.func = func

    def __len__(self):
        return len(self.dl)

    def __iter__(self):
        for b in self.dl:
            yield (self.func(*b))


def get_model():
    model = nn.Sequential(
        nn.Conv2d(1, 4, kernel_size=3, stride=2, padding=1),
        nn.ReLU(),
        nn.Conv2d(4, 4, kernel_size=3, stride=2, padding=1),
        nn.ReLU(),
        nn.Conv2d(4, 10, kernel_size=3, stride=2, padding=1),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        Lambda(lambda x: x.view(x.size(0), -1)),
    )
    return model, optim.SGD(model.parameters(), lr=lr, momentum=0.9)


def loss_batch(model, loss_func, xb, yb, opt=None):
    loss = loss_func(model(xb), yb)
    if opt is not None:
        loss.backward()
        opt.step()
        opt.zero_grad()
    return loss.item(), len(xb)


def run(weights=None, compiled=False):
    out = {"losses": []}
    ml, acc = manual()
    out["losses"] += ml + [acc]
    torch.manual_seed(1)
    model, opt = get_model()
    if weights is not None:
        model.load_state_dict({k: torch.tensor(v) for k, v in weights.items()})
    out["weights"] = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    train_ds = TensorDataset(x_train, y_train)
    train_dl = WrappedDataLoader(DataLoader(train_ds, batch_size=bs, shuffle=False), preprocess)
    valid_dl = WrappedDataLoader(DataLoader(TensorDataset(x_valid, y_valid), batch_size=bs * 2),
                                 preprocess)
    loss_func = F.cross_entropy
    step = (lambda xb, yb: loss_batch(model, loss_func, xb, yb, opt)[0])
    if compiled:
        step = torch.compile(lambda xb, yb: _step(model, loss_func, xb, yb, opt))
        out["fn"] = step
    for epoch in range(3):
        model.train()
        for xb, yb in train_dl:
            r = step(xb, yb)
            out["losses"].append(r if isinstance(r, float) else r.item())
        model.eval()
        with torch.no_grad():
            losses, nums = zip(*[loss_batch(model, loss_func, xb, yb) for xb, yb in valid_dl])
        val_loss = np.sum(np.multiply(losses, nums)) / np.sum(nums)
        out["losses"].append(float(val_loss))
    return out


def _step(model, loss_func, xb, yb, opt):
    loss = loss_func(model(xb), yb)
    loss.backward()
    opt.step()
    opt.zero_grad()
    return loss
