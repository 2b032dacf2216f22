# In the manner of d2l.ai's linear-network chapters: softmax regression from scratch
# (``softmax`` by exp/sum with keepdim, cross-entropy by ``-torch.log(y_hat[range(len(y_hat)),
# y])``, an Accumulator of correct counts, ``sgd`` updating params in place under no_grad and
# zeroing ``param.grad``), weight decay by hand (``l2_penalty`` added to the loss, ``init_params``
# with ``torch.normal``), then the concise version: ``nn.Sequential(nn.Flatten(), nn.Linear)``
# with ``net.apply(init_weights)`` (``nn.init.normal_(m.weight, std=0.01)``),
# ``nn.CrossEntropyLoss(reduction='none')`` with ``l.mean().backward()`` and SGD with
# ``weight_decay`` on the weight only (a parameter group).
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import numpy as np
import torch
from torch import nn


class Accumulator:
    """For accumulating sums over n variables."""
    def __init__(self, n):
        self.data = [0.0] * n

    def add(self, *args):
        self.data = [a + float(b) for a, b in zip(self.data, args)]

    def __getitem__(self, idx):
        return self.data[idx]


def softmax(X):
    X_exp = torch.exp(X)
    partition = X_exp.sum(1, keepdim=True)
    return X_exp / partition


def cross_entropy(y_hat, y):
    return - torch.log(y_hat[range(len(y_hat)), y])


def accuracy(y_hat, y):
    if len(y_hat.shape) > 1 and y_hat.shape[1] > 1:
        y_hat = y_hat.argmax(axis=1)
    cmp = y_hat.type(y.dtype) == y
    return float(cmp.type(y.dtype).sum())


def sgd(params, lr, batch_size):
    with torch.no_grad():
        for param in params:
            param -= lr * param.grad / batch_size
            param.grad.zero_()


def l2_penalty(w):
    return torch.sum(w.pow(2)) / 2


def make_data(rng, n, num_inputs, num_outputs):
    X = rng.normal(size=(n, 1, 4, 4)).astype(np.float32)
    W = rng.normal(size=(num_inputs, num_outputs)).astype(np.float32)
    y = (X.reshape(n, -1) @ W).argmax(1)
    return torch.tensor(X), torch.tensor(y)


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    rng = np.random.default_rng(61)
    num_inputs, num_outputs, batch_size, lr = 16, 3, 32, 0.1
    X, y = make_data(rng, 128, num_inputs, num_outputs)
    W0 = torch.normal(0, 0.01, size=(num_inputs, num_outputs))
    net_c = nn.Sequential(nn.Flatten(), nn.Linear(num_inputs, num_outputs))

    def init_weights(m):
        if type(m) == nn.Linear:
            nn.init.normal_(m.weight, std=0.01)

    net_c.apply(init_weights)
    if weights is not None:
        W0 = torch.tensor(weights["W0"])
        net_c.load_state_dict({k[4:]: torch.tensor(v) for k, v in weights.items() if k.startswith("net.")})
    w = {"W0": W0.numpy().copy()}
    w.update({"net." + k: v.detach().numpy().copy() for k, v in net_c.state_dict().items()})

    W = W0.clone().requires_grad_(True)
    b = torch.zeros(num_outputs, requires_grad=True)

    def net(X):
        return softmax(torch.matmul(X.reshape((-1, W.shape[0])), W) + b)

    def train_step(X, y, lambd):
        y_hat = net(X)
        l = cross_entropy(y_hat, y) + lambd * l2_penalty(W)
        l.sum().backward()
        sgd([W, b], lr, X.shape[0])
        return l.sum(), y_hat

    step = torch.compile(train_step) if compiled else train_step
    losses = []
    for epoch in range(2):
        metric = Accumulator(3)
        for i in range(0, 128, batch_size):
            l, y_hat = step(X[i:i + batch_size], y[i:i + batch_size], 3)
            metric.add(float(l), accuracy(y_hat, y[i:i + batch_size]), y[i:i + batch_size].numel())
        losses += [metric[0] / metric[2], metric[1] / metric[2]]
    losses.append(float(torch.norm(W).item()))

    loss = nn.CrossEntropyLoss(reduction='none')
    trainer = torch.optim.SGD([{"params": net_c[1].weight, "weight_decay": 1e-3},
                               {"params": net_c[1].bias}], lr=lr)

    def concise_step(X, y):
        trainer.zero_grad()
        l = loss(net_c(X), y)
        l.mean().backward()
        trainer.step()
        return l.sum()

    step2 = torch.compile(concise_step) if compiled else concise_step
    for epoch in range(2):
        metric = Accumulator(2)
        for i in range(0, 128, batch_size):
            l = step2(X[i:i + batch_size], y[i:i + batch_size])
            metric.add(l.item(), batch_size)
        losses.append(metric[0] / metric[1])
    net_c.eval()
    with torch.no_grad():
        metric = Accumulator(2)
        metric.add(accuracy(net_c(X), y), y.numel())
        losses.append(metric[0] / metric[1])
    return {"losses": losses, "weights": w, "fn": [step, step2]}
