# In the manner of Dive into Deep Learning's "from scratch" chapters: synthetic_data for
# linear regression, a data_iter generator shuffling indices with random.shuffle,
# parameters made with torch.normal(..., requires_grad=True) and torch.zeros, linreg and
# squared_loss, sgd(params, lr, batch_size) under torch.no_grad() with param.grad.zero_(),
# then softmax regression from scratch (softmax via exp/sum(1, keepdim=True),
# cross_entropy by y_hat[range(len(y_hat)), y], an Accumulator, accuracy with
# argmax(axis=1) and .type(y.dtype)).
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import random

import numpy as np
import torch


def synthetic_data(w, b, num_examples, rng):
    X = torch.tensor(rng.standard_normal((num_examples, len(w))).astype(np.float32))
    y = torch.matmul(X, w) + b
    y += torch.tensor(rng.normal(0, 0.01, y.shape).astype(np.float32))
    return X, y.reshape((-1, 1))


def data_iter(batch_size, features, labels):
    num_examples = len(features)
    indices = list(range(num_examples))
    random.shuffle(indices)
    for i in range(0, num_examples, batch_size):
        batch_indices = torch.tensor(indices[i: min(i + batch_size, num_examples)])
        yield features[batch_indices], labels[batch_indices]


def linreg(X, w, b):
    return torch.matmul(X, w) + b


def squared_loss(y_hat, y):
    return (y_hat - y.reshape(y_hat.shape)) ** 2 / 2


def sgd(params, lr, batch_size):
    with torch.no_grad():
        for param in params:
            param -= lr * param.grad / batch_size
            param.grad.zero_()


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


class Accumulator:
    def __init__(self, n):
        self.data = [0.0] * n

    def add(self, *args):
        self.data = [a + float(b) for a, b in zip(self.data, args)]

    def reset(self):
        self.data = [0.0] * len(self.data)

    def __getitem__(self, idx):
        return self.data[idx]


def run(weights=None, compiled=False):
    random.seed(0)
    torch.manual_seed(0)
    rng = np.random.default_rng(7)
    true_w = torch.tensor([2, -3.4])
    true_b = 4.2
    features, labels = synthetic_data(true_w, true_b, 100, rng)

    w = torch.normal(0, 0.01, size=(2, 1), requires_grad=True)
    b = torch.zeros(1, requires_grad=True)
    num_inputs, num_outputs = 16, 4
    W = torch.normal(0, 0.01, size=(num_inputs, num_outputs), requires_grad=True)
    b2 = torch.zeros(num_outputs, requires_grad=True)
    if weights is not None:
        with torch.no_grad():
            w.copy_(torch.tensor(weights['w']))
            W.copy_(torch.tensor(weights['W']))
    out_w = {'w': w.detach().numpy().copy(), 'W': W.detach().numpy().copy()}

    lr = 0.03
    num_epochs = 3
    net = linreg
    loss = squared_loss
    batch_size = 10

    def train_batch(X, y):
        l = loss(net(X, w, b), y)
        l.sum().backward()
        sgd([w, b], lr, batch_size)
        return l

    step1 = torch.compile(train_batch) if compiled else train_batch
    losses = []
    for epoch in range(num_epochs):
        for X, y in data_iter(batch_size, features, labels):
            l = step1(X, y)
        with torch.no_grad():
            train_l = loss(net(features, w, b), labels)
            losses.append(float(train_l.mean()))
    losses += [(true_w - w.reshape(true_w.shape)).abs().sum().item(), (true_b - b).item()]

    # softmax regression
    X_all = torch.tensor(rng.standard_normal((96, 4, 4)).astype(np.float32))
    y_all = X_all.reshape(96, -1)[:, :4].argmax(1)
    train_iter = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(X_all[:64], y_all[:64]), batch_size=16)
    test_iter = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(X_all[64:], y_all[64:]), batch_size=16)

    def net2(X):
        return softmax(torch.matmul(X.reshape((-1, W.shape[0])), W) + b2)

    def updater(batch_size):
        return sgd([W, b2], 0.1, batch_size)

    def train_step(X, y):
        y_hat = net2(X)
        l = cross_entropy(y_hat, y)
        l.sum().backward()
        updater(X.shape[0])
        return l, y_hat

    step2 = torch.compile(train_step) if compiled else train_step

    def evaluate_accuracy(net, data_iter):
        metric = Accumulator(2)
        with torch.no_grad():
            for X, y in data_iter:
                metric.add(accuracy(net(X), y), y.numel())
        return metric[0] / metric[1]

    for epoch in range(num_epochs):
        metric = Accumulator(3)
        for X, y in train_iter:
            l, y_hat = step2(X, y)
            metric.add(float(l.sum()), accuracy(y_hat, y), y.numel())
        losses += [metric[0] / metric[2], metric[1] / metric[2], evaluate_accuracy(net2, test_iter)]
    return {"losses": losses, "weights": out_w, "fn": [step1, step2]}
