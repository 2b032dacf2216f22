# In the manner of the PyTorch tutorial "Learning PyTorch with Examples".
# Written for dualgraph's tests with the public program's idioms, not copied from it; it
# keeps their style (super(Class, self), unused loop variables), so ruff leaves it alone.
# ruff: noqa
import math
import random

import torch

dtype = torch.float
device = torch.device("cpu")
x = torch.linspace(-math.pi, math.pi, 2000, device=device, dtype=dtype)
y = torch.sin(x)
learning_rate = 1e-6


def tensors(init):
    a, b, c, d = (torch.tensor(v, device=device, dtype=dtype) for v in init)
    out = []
    for t in range(10):
        y_pred = a + b * x + c * x ** 2 + d * x ** 3
        loss = (y_pred - y).pow(2).sum().item()
        out.append(loss)
        grad_y_pred = 2.0 * (y_pred - y)
        grad_a = grad_y_pred.sum()
        grad_b = (grad_y_pred * x).sum()
        grad_c = (grad_y_pred * x ** 2).sum()
        grad_d = (grad_y_pred * x ** 3).sum()
        a -= learning_rate * grad_a
        b -= learning_rate * grad_b
        c -= learning_rate * grad_c
        d -= learning_rate * grad_d
    return out


def autograd(init):
    a, b, c, d = (torch.tensor(v, dtype=dtype, requires_grad=True) for v in init)
    out = []
    for t in range(10):
        y_pred = a + b * x + c * x ** 2 + d * x ** 3
        loss = (y_pred - y).pow(2).sum()
        out.append(loss.item())
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
    return out


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
    out = {"losses": [], "fn": [], "weights": {}}
    init = [0.1, -0.3, 0.2, 0.05] if weights is None else weights["init"]
    out["weights"]["init"] = init
    out["losses"] += tensors(init) + autograd(init)

    p = torch.tensor([1, 2, 3])
    xx = x.unsqueeze(-1).pow(p)
    model = torch.nn.Sequential(torch.nn.Linear(3, 1), torch.nn.Flatten(0, 1))
    if weights is not None:
        model.load_state_dict({k[4:]: torch.tensor(v) for k, v in weights.items() if k.startswith("seq.")})
    out["weights"].update({"seq." + k: v.detach().numpy().copy() for k, v in model.state_dict().items()})
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
    f = torch.compile(nn_step) if compiled else nn_step
    out["fn"].append(f)
    for t in range(10):
        out["losses"].append(f(xx, y).item())
    linear_layer = model[0]
    out["losses"] += [linear_layer.bias.item(), linear_layer.weight[:, 0].item()]

    optimizer = torch.optim.RMSprop(model.parameters(), lr=1e-3)

    def optim_step(xx, y):
        y_pred = model(xx)
        loss = loss_fn(y_pred, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss
    f = torch.compile(optim_step) if compiled else optim_step
    out["fn"].append(f)
    for t in range(10):
        out["losses"].append(f(xx, y).item())

    for cls, opt, lr in ((Polynomial3, torch.optim.SGD, 1e-6), (DynamicNet, torch.optim.SGD, 1e-8)):
        m = cls()
        tag = cls.__name__ + "."
        if weights is not None:
            m.load_state_dict({k[len(tag):]: torch.tensor(v) for k, v in weights.items() if k.startswith(tag)})
        out["weights"].update({tag + k: v.detach().numpy().copy() for k, v in m.state_dict().items()})
        criterion = torch.nn.MSELoss(reduction='sum')
        o = opt(m.parameters(), lr=lr, momentum=0.9) if cls is DynamicNet else opt(m.parameters(), lr=lr)

        def step(x, y, m=m, o=o, criterion=criterion):
            y_pred = m(x)
            loss = criterion(y_pred, y)
            o.zero_grad()
            loss.backward()
            o.step()
            return loss
        f = torch.compile(step) if compiled else step
        out["fn"].append(f)
        random.seed(0)
        for t in range(10):
            out["losses"].append(f(x, y).item())
        if cls is Polynomial3:
            out["printed"] = f'Result: {m.string()}'
    return out
