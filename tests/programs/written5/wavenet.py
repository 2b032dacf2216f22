# In the manner of Karpathy's makemore part 5 (building a WaveNet): hand-written
# torch.nn-like layers (Linear with kaiming-style scaling, BatchNorm1d with running
# buffers and 3-d input over dims (0, 1), Tanh, Embedding, FlattenConsecutive, Sequential)
# whose parameters are gathered by a list comprehension, `layers[-1].weight *= 0.1` under
# torch.no_grad(), a training loop with manual SGD and a step-decayed learning rate, and
# `layer.training = False` for evaluation.
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import numpy as np
import torch
import torch.nn.functional as F


class Linear:
    def __init__(self, fan_in, fan_out, bias=True):
        self.weight = torch.randn((fan_in, fan_out)) / fan_in ** 0.5
        self.bias = torch.zeros(fan_out) if bias else None

    def __call__(self, x):
        self.out = x @ self.weight
        if self.bias is not None:
            self.out += self.bias
        return self.out

    def parameters(self):
        return [self.weight] + ([] if self.bias is None else [self.bias])


class BatchNorm1d:
    def __init__(self, dim, eps=1e-5, momentum=0.1):
        self.eps = eps
        self.momentum = momentum
        self.training = True
        self.gamma = torch.ones(dim)
        self.beta = torch.zeros(dim)
        self.running_mean = torch.zeros(dim)
        self.running_var = torch.ones(dim)

    def __call__(self, x):
        if self.training:
            if x.ndim == 2:
                dim = 0
            elif x.ndim == 3:
                dim = (0, 1)
            xmean = x.mean(dim, keepdim=True)
            xvar = x.var(dim, keepdim=True)
        else:
            xmean = self.running_mean
            xvar = self.running_var
        xhat = (x - xmean) / torch.sqrt(xvar + self.eps)
        self.out = self.gamma * xhat + self.beta
        if self.training:
            with torch.no_grad():
                self.running_mean = (1 - self.momentum) * self.running_mean + self.momentum * xmean
                self.running_var = (1 - self.momentum) * self.running_var + self.momentum * xvar
        return self.out

    def parameters(self):
        return [self.gamma, self.beta]


class Tanh:
    def __call__(self, x):
        self.out = torch.tanh(x)
        return self.out

    def parameters(self):
        return []


class Embedding:
    def __init__(self, num_embeddings, embedding_dim):
        self.weight = torch.randn((num_embeddings, embedding_dim))

    def __call__(self, IX):
        self.out = self.weight[IX]
        return self.out

    def parameters(self):
        return [self.weight]


class FlattenConsecutive:
    def __init__(self, n):
        self.n = n

    def __call__(self, x):
        B, T, C = x.shape
        x = x.view(B, T // self.n, C * self.n)
        if x.shape[1] == 1:
            x = x.squeeze(1)
        self.out = x
        return self.out

    def parameters(self):
        return []


class Sequential:
    def __init__(self, layers):
        self.layers = layers

    def __call__(self, x):
        for layer in self.layers:
            x = layer(x)
        self.out = x
        return self.out

    def parameters(self):
        return [p for layer in self.layers for p in layer.parameters()]


def run(weights=None, compiled=False):
    torch.manual_seed(42)
    rng = np.random.default_rng(8)
    vocab_size, block_size, n_embd, n_hidden = 10, 8, 4, 16
    X = rng.integers(0, vocab_size, (320, block_size))
    Y = (X[:, ::2].sum(1) + 3 * X[:, -1]) % vocab_size
    Xtr, Ytr = torch.tensor(X[:256]), torch.tensor(Y[:256])
    Xte, Yte = torch.tensor(X[256:]), torch.tensor(Y[256:])
    model = Sequential([
        Embedding(vocab_size, n_embd),
        FlattenConsecutive(2), Linear(n_embd * 2, n_hidden, bias=False), BatchNorm1d(n_hidden), Tanh(),
        FlattenConsecutive(2), Linear(n_hidden * 2, n_hidden, bias=False), BatchNorm1d(n_hidden), Tanh(),
        FlattenConsecutive(2), Linear(n_hidden * 2, n_hidden, bias=False), BatchNorm1d(n_hidden), Tanh(),
        Linear(n_hidden, vocab_size),
    ])
    with torch.no_grad():
        model.layers[-1].weight *= 0.1
    parameters = model.parameters()
    if weights is not None:
        for i, p in enumerate(parameters):
            p.copy_(torch.tensor(weights[str(i)]))
    w = {str(i): p.numpy().copy() for i, p in enumerate(parameters)}
    for p in parameters:
        p.requires_grad = True

    def train_step(Xb, Yb, lr):
        logits = model(Xb)
        loss = F.cross_entropy(logits, Yb)
        for p in parameters:
            p.grad = None
        loss.backward()
        for p in parameters:
            p.data += -lr * p.grad
        return loss

    step = torch.compile(train_step) if compiled else train_step
    lossi = []
    for i in range(16):
        ix = torch.from_numpy(rng.integers(0, Xtr.shape[0], 32))
        lr = 0.1 if i < 12 else 0.01
        loss = step(Xtr[ix], Ytr[ix], lr)
        lossi.append(loss.item())
    lossi.append(torch.tensor(lossi).view(-1, 4).mean(1).tolist()[-1])
    for layer in model.layers:
        layer.training = False

    @torch.no_grad()
    def split_loss(x, y):
        logits = model(x)
        return F.cross_entropy(logits, y).item()

    lossi += [split_loss(Xtr, Ytr), split_loss(Xte, Yte)]
    for layer in model.layers:
        lossi.append(tuple(layer.out.shape)[-1])
    lossi += model.layers[3].running_mean.flatten()[:3].tolist()
    return {"losses": lossi, "weights": w, "fn": step}
