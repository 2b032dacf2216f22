# In the manner of the PyTorch ports of Raissi's physics-informed neural networks (the
# Burgers' equation PINN, MIT licence): an ``nn.Sequential`` built from an
# ``OrderedDict`` of ``('layer_%d' % i, nn.Linear)`` and ``torch.nn.Tanh`` entries, Xavier
# init with zero biases, collocation points as ``torch.tensor(..., requires_grad=True)``,
# derivatives by ``torch.autograd.grad(u, x, grad_outputs=torch.ones_like(u),
# retain_graph=True, create_graph=True)[0]`` taken twice for ``u_xx``, the residual
# ``u_t + u * u_x - nu * u_xx``, a boundary/initial mean-squared loss; Adam steps (the
# compiled step) and then L-BFGS (``history_size``, ``tolerance_grad``,
# ``line_search_fn="strong_wolfe"``) with a closure that counts its iterations.
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
from collections import OrderedDict

import numpy as np
import torch


class DNN(torch.nn.Module):
    def __init__(self, layers):
        super(DNN, self).__init__()
        self.depth = len(layers) - 1
        self.activation = torch.nn.Tanh
        layer_list = list()
        for i in range(self.depth - 1):
            layer_list.append(('layer_%d' % i, torch.nn.Linear(layers[i], layers[i + 1])))
            layer_list.append(('activation_%d' % i, self.activation()))
        layer_list.append(('layer_%d' % (self.depth - 1), torch.nn.Linear(layers[-2], layers[-1])))
        layerDict = OrderedDict(layer_list)
        self.layers = torch.nn.Sequential(layerDict)
        for m in self.layers:
            if isinstance(m, torch.nn.Linear):
                torch.nn.init.xavier_normal_(m.weight)
                torch.nn.init.zeros_(m.bias)

    def forward(self, x):
        out = self.layers(x)
        return out


class PhysicsInformedNN():
    def __init__(self, X_u, u, X_f, layers, lb, ub, nu):
        self.lb = torch.tensor(lb).float()
        self.ub = torch.tensor(ub).float()
        self.x_u = torch.tensor(X_u[:, 0:1], requires_grad=True).float()
        self.t_u = torch.tensor(X_u[:, 1:2], requires_grad=True).float()
        self.x_f = torch.tensor(X_f[:, 0:1], requires_grad=True).float()
        self.t_f = torch.tensor(X_f[:, 1:2], requires_grad=True).float()
        self.u = torch.tensor(u).float()
        self.layers = layers
        self.nu = nu
        self.dnn = DNN(layers)
        self.iter = 0

    def make_optimizers(self):
        self.optimizer_Adam = torch.optim.Adam(self.dnn.parameters(), lr=5e-3)
        self.optimizer = torch.optim.LBFGS(
            self.dnn.parameters(), lr=1.0, max_iter=6, max_eval=8, history_size=5,
            tolerance_grad=1e-5, tolerance_change=1.0 * np.finfo(float).eps,
            line_search_fn="strong_wolfe")

    def net_u(self, x, t):
        u = self.dnn(torch.cat([x, t], dim=1))
        return u

    def net_f(self, x, t):
        u = self.net_u(x, t)
        u_t = torch.autograd.grad(u, t, grad_outputs=torch.ones_like(u), retain_graph=True, create_graph=True)[0]
        u_x = torch.autograd.grad(u, x, grad_outputs=torch.ones_like(u), retain_graph=True, create_graph=True)[0]
        u_xx = torch.autograd.grad(u_x, x, grad_outputs=torch.ones_like(u_x), retain_graph=True, create_graph=True)[0]
        f = u_t + u * u_x - self.nu * u_xx
        return f

    def loss_func(self):
        u_pred = self.net_u(self.x_u, self.t_u)
        f_pred = self.net_f(self.x_f, self.t_f)
        loss_u = torch.mean((self.u - u_pred) ** 2)
        loss_f = torch.mean(f_pred ** 2)
        return loss_u + loss_f, loss_u, loss_f

    def closure(self):
        self.optimizer.zero_grad()
        loss, loss_u, loss_f = self.loss_func()
        loss.backward()
        self.iter += 1
        return loss

    def adam_step(self, x_f, t_f):
        self.dnn.train()
        self.optimizer_Adam.zero_grad()
        u_pred = self.net_u(self.x_u, self.t_u)
        f_pred = self.net_f(x_f, t_f)
        loss_u = torch.mean((self.u - u_pred) ** 2)
        loss_f = torch.mean(f_pred ** 2)
        loss = loss_u + loss_f
        loss.backward()
        self.optimizer_Adam.step()
        return loss

    def predict(self, X):
        x = torch.tensor(X[:, 0:1], requires_grad=True).float()
        t = torch.tensor(X[:, 1:2], requires_grad=True).float()
        self.dnn.eval()
        u = self.net_u(x, t)
        f = self.net_f(x, t)
        u = u.detach().cpu().numpy()
        f = f.detach().cpu().numpy()
        return u, f


def run(weights=None, compiled=False):
    torch.manual_seed(1234)
    rng = np.random.default_rng(118)
    nu = 0.01 / np.pi
    lb, ub = np.array([-1.0, 0.0]), np.array([1.0, 0.99])
    x0 = rng.uniform(-1, 1, size=(8, 1))
    X_u = np.vstack([np.hstack([x0, np.zeros_like(x0)]),
                     np.hstack([-np.ones((4, 1)), rng.uniform(0, 1, size=(4, 1))]),
                     np.hstack([np.ones((4, 1)), rng.uniform(0, 1, size=(4, 1))])])
    u = np.vstack([-np.sin(np.pi * x0), np.zeros((8, 1))])
    X_f = lb + (ub - lb) * rng.random((16, 2))
    model = PhysicsInformedNN(X_u, u, X_f, [2, 12, 12, 1], lb, ub, nu)
    if weights is not None:
        model.dnn.load_state_dict({k: torch.tensor(v) for k, v in weights.items()})
    w = {k: v.detach().numpy().copy() for k, v in model.dnn.state_dict().items()}
    model.make_optimizers()
    step = torch.compile(model.adam_step) if compiled else model.adam_step
    losses = []
    for it in range(8):
        losses.append(step(model.x_f, model.t_f).item())
    loss = model.optimizer.step(model.closure)
    losses += [loss.item(), model.iter]
    loss, loss_u, loss_f = model.loss_func()
    losses += [loss.item(), loss_u.item(), loss_f.item()]
    u_pred, f_pred = model.predict(X_f[:4])
    losses += u_pred.flatten().tolist() + f_pred.flatten().tolist()
    return {"losses": losses, "weights": w, "fn": step}
