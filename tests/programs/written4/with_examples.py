# In the manner of the PyTorch tutorial "Learning PyTorch with Examples": fitting a
# third-order polynomial to sin(x) with manual gradients on tensors, then with autograd
# (`with torch.no_grad(): a -= learning_rate * a.grad; a.grad = None`), then with
# nn.Sequential(nn.Linear(3, 1), nn.Flatten(0, 1)) on x.unsqueeze(-1).pow(p) and a manual
# parameter update, then with optim.RMSprop, then a custom nn.Module with scalar
# Parameters, and finally the DynamicNet whose forward picks a random number of
# terms with random.randint and reuses one weight (SGD with momentum).
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import math
import random

import torch

dtype = torch.float
device = torch.device("cpu")


class Polynomial3(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Parameter(torch.randn(()))
        self.b = torch.nn.Parameter(torch.randn(()))
        self.c = torch.nn.Parameter(torch.randn(()))
        self.d = torch.nn.Parameter(torch.randn(()))

    def forward(self, x):
        return self.a + self.b * x + self.c * x ** 2 + self.d * x ** 3

    def string(self):
        return f'y = {self.a.item()} + {self.b.item()} x + {self.c.item()} x^2 + {self.d.item()} x^3'


class DynamicNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Parameter(torch.randn(()))
        self.b = torch.nn.Parameter(torch.randn(()))
        self.c = torch.nn.Parameter(torch.randn(()))
        self.d = torch.nn.Parameter(torch.randn(()))
        self.e = torch.nn.Parameter(torch.randn(()))

    def forward(self, x):
        y = self.a + self.b * x + self.c * x ** 2 + self.d * x ** 3
        for exp in range(4, random.randint(4, 6)):
            y = y + self.e * x ** exp
        return y


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    random.seed(0)
    x = torch.linspace(-math.pi, math.pi, 200, device=device, dtype=dtype)
    y = torch.sin(x)
    if weights is None:
        init = {k: torch.randn((), device=device, dtype=dtype) for k in 'abcd'}
    else:
        init = {k: torch.tensor(weights['init.' + k]) for k in 'abcd'}
    w = {'init.' + k: v.numpy().copy() for k, v in init.items()}
    losses = []

    # Tensors and manual gradients
    a, b, c, d = (init[k].clone() for k in 'abcd')
    learning_rate = 1e-5
    for t in range(20):
        y_pred = a + b * x + c * x ** 2 + d * x ** 3
        loss = (y_pred - y).pow(2).sum().item()
        if t % 5 == 4:
            losses.append(loss)
        grad_y_pred = 2.0 * (y_pred - y)
        grad_a = grad_y_pred.sum()
        grad_b = (grad_y_pred * x).sum()
        grad_c = (grad_y_pred * x ** 2).sum()
        grad_d = (grad_y_pred * x ** 3).sum()
        a -= learning_rate * grad_a
        b -= learning_rate * grad_b
        c -= learning_rate * grad_c
        d -= learning_rate * grad_d
    losses += [a.item(), b.item(), c.item(), d.item()]

    # Autograd
    params = [init[k].clone().requires_grad_(True) for k in 'abcd']

    def autograd_step(x, y):
        a, b, c, d = params
        y_pred = a + b * x + c * x ** 2 + d * x ** 3
        loss = (y_pred - y).pow(2).sum()
        loss.backward()
        with torch.no_grad():
            a -= learning_rate * a.grad
            b -= learning_rate * b.grad
            c -= learning_rate * c.grad
            d -= learning_rate * d.grad
            a.grad = None
            b.grad = None
            c.grad = None
            d.grad = None
        return loss

    step1 = torch.compile(autograd_step) if compiled else autograd_step
    for t in range(20):
        loss = step1(x, y)
        losses.append(loss.item())

    # nn
    p = torch.tensor([1, 2, 3])
    xx = x.unsqueeze(-1).pow(p)
    model = torch.nn.Sequential(torch.nn.Linear(3, 1), torch.nn.Flatten(0, 1))
    with torch.no_grad():
        model[0].weight.copy_(torch.stack([init['b'], init['c'], init['d']]).unsqueeze(0))
        model[0].bias.fill_(init['a'].item())
    loss_fn = torch.nn.MSELoss(reduction='sum')

    def nn_step(xx, y):
        y_pred = model(xx)
        loss = loss_fn(y_pred, y)
        model.zero_grad()
        loss.backward()
        with torch.no_grad():
            for param in model.parameters():
                param -= learning_rate * param.grad
        return loss

    step2 = torch.compile(nn_step) if compiled else nn_step
    for t in range(20):
        loss = step2(xx, y)
        losses.append(loss.item())
    linear_layer = model[0]
    losses += [linear_layer.bias.item(), linear_layer.weight[:, 0].item(), linear_layer.weight[:, 1].item()]

    # optim
    optimizer = torch.optim.RMSprop(model.parameters(), lr=1e-3)

    def optim_step(xx, y):
        y_pred = model(xx)
        loss = loss_fn(y_pred, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss

    step3 = torch.compile(optim_step) if compiled else optim_step
    for t in range(20):
        loss = step3(xx, y)
        losses.append(loss.item())

    # custom nn Modules
    model = Polynomial3()
    with torch.no_grad():
        for k in 'abcd':
            getattr(model, k).copy_(init[k])
    criterion = torch.nn.MSELoss(reduction='sum')
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-6)

    def module_step(x, y):
        y_pred = model(x)
        loss = criterion(y_pred, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss

    step4 = torch.compile(module_step) if compiled else module_step
    for t in range(20):
        loss = step4(x, y)
        losses.append(loss.item())
    assert model.string().startswith('y = ')

    # control flow and weight sharing
    model = DynamicNet()
    with torch.no_grad():
        for k in 'abcd':
            getattr(model, k).copy_(init[k])
        model.e.fill_(0.0)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-8, momentum=0.9)
    for t in range(20):
        y_pred = model(x)
        loss = criterion(y_pred, y)
        losses.append(loss.item())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return {"losses": losses, "weights": w, "fn": [step1, step2, step3, step4]}
