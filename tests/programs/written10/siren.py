# In the manner of vsitzmann/siren's explore_siren notebook (MIT licence): a ``SineLayer``
# computing ``torch.sin(self.omega_0 * self.linear(input))`` whose ``init_weights`` fills
# the weights under ``torch.no_grad()`` with ``self.linear.weight.uniform_(-b, b)``
# (``1 / in_features`` for the first layer, ``np.sqrt(6 / in_features) / omega_0`` after),
# ``get_mgrid`` from ``torch.linspace`` and ``torch.meshgrid(..., indexing='ij')``,
# ``coords.clone().detach().requires_grad_(True)`` so the model returns its input too, the
# ``gradient`` and ``laplace`` helpers by ``torch.autograd.grad(..., create_graph=True)``
# over ``torch.ones_like(y)``, an image fit by ``((model_output - ground_truth) ** 2).mean()``
# and a Poisson fit to the image's gradients, with ``total_steps``/``steps_til_summary``
# logging and a ``torch.no_grad()`` read-out.
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import numpy as np
import torch
from torch import nn


def get_mgrid(sidelen, dim=2):
    tensors = tuple(dim * [torch.linspace(-1, 1, steps=sidelen)])
    mgrid = torch.stack(torch.meshgrid(*tensors, indexing='ij'), dim=-1)
    mgrid = mgrid.reshape(-1, dim)
    return mgrid


class SineLayer(nn.Module):
    def __init__(self, in_features, out_features, bias=True, is_first=False, omega_0=30):
        super().__init__()
        self.omega_0 = omega_0
        self.is_first = is_first
        self.in_features = in_features
        self.linear = nn.Linear(in_features, out_features, bias=bias)
        self.init_weights()

    def init_weights(self):
        with torch.no_grad():
            if self.is_first:
                self.linear.weight.uniform_(-1 / self.in_features, 1 / self.in_features)
            else:
                self.linear.weight.uniform_(-np.sqrt(6 / self.in_features) / self.omega_0,
                                            np.sqrt(6 / self.in_features) / self.omega_0)

    def forward(self, input):
        return torch.sin(self.omega_0 * self.linear(input))


class Siren(nn.Module):
    def __init__(self, in_features, hidden_features, hidden_layers, out_features,
                 outermost_linear=False, first_omega_0=30, hidden_omega_0=30.):
        super().__init__()
        self.net = []
        self.net.append(SineLayer(in_features, hidden_features, is_first=True, omega_0=first_omega_0))
        for i in range(hidden_layers):
            self.net.append(SineLayer(hidden_features, hidden_features, is_first=False,
                                      omega_0=hidden_omega_0))
        if outermost_linear:
            final_linear = nn.Linear(hidden_features, out_features)
            with torch.no_grad():
                final_linear.weight.uniform_(-np.sqrt(6 / hidden_features) / hidden_omega_0,
                                             np.sqrt(6 / hidden_features) / hidden_omega_0)
            self.net.append(final_linear)
        else:
            self.net.append(SineLayer(hidden_features, out_features, is_first=False,
                                      omega_0=hidden_omega_0))
        self.net = nn.Sequential(*self.net)

    def forward(self, coords):
        coords = coords.clone().detach().requires_grad_(True)
        output = self.net(coords)
        return output, coords


def gradient(y, x, grad_outputs=None):
    if grad_outputs is None:
        grad_outputs = torch.ones_like(y)
    grad = torch.autograd.grad(y, [x], grad_outputs=grad_outputs, create_graph=True)[0]
    return grad


def divergence(y, x):
    div = 0.
    for i in range(y.shape[-1]):
        div += torch.autograd.grad(y[..., i], x, torch.ones_like(y[..., i]), create_graph=True)[0][..., i:i + 1]
    return div


def laplace(y, x):
    grad = gradient(y, x)
    return divergence(grad, x)


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    rng = np.random.default_rng(1002)
    sidelen = 6
    coords = get_mgrid(sidelen, 2).unsqueeze(0)
    xx = coords[0, :, 0].numpy()
    yy = coords[0, :, 1].numpy()
    img = (np.sin(2 * xx) * np.cos(3 * yy) + 0.1 * rng.normal(size=xx.shape)).astype(np.float32)
    ground_truth = torch.from_numpy(img).view(1, -1, 1)
    img_siren = Siren(in_features=2, out_features=1, hidden_features=16, hidden_layers=2,
                      outermost_linear=True)
    poisson_siren = Siren(in_features=2, out_features=1, hidden_features=16, hidden_layers=1,
                          outermost_linear=True)
    if weights is not None:
        img_siren.load_state_dict({k[4:]: torch.tensor(v) for k, v in weights.items() if k.startswith("img.")})
        poisson_siren.load_state_dict({k[4:]: torch.tensor(v) for k, v in weights.items() if k.startswith("poi.")})
    w = {"img." + k: v.detach().numpy().copy() for k, v in img_siren.state_dict().items()}
    w.update({"poi." + k: v.detach().numpy().copy() for k, v in poisson_siren.state_dict().items()})
    optim = torch.optim.Adam(lr=1e-3, params=img_siren.parameters())
    poptim = torch.optim.Adam(lr=1e-3, params=poisson_siren.parameters())

    def fit_step(model_input, ground_truth):
        model_output, coords = img_siren(model_input)
        loss = ((model_output - ground_truth) ** 2).mean()
        img_grad = gradient(model_output, coords)
        img_laplacian = laplace(model_output, coords)
        optim.zero_grad()
        loss.backward()
        optim.step()
        return loss, img_grad.norm(dim=-1).mean(), img_laplacian.abs().mean()

    gt_grad = torch.from_numpy(np.stack([2 * np.cos(2 * xx) * np.cos(3 * yy),
                                         -3 * np.sin(2 * xx) * np.sin(3 * yy)], -1).astype(np.float32)).unsqueeze(0)

    def poisson_step(model_input, gt_grad):
        model_output, coords = poisson_siren(model_input)
        grads = gradient(model_output, coords)
        loss = ((grads - gt_grad) ** 2).sum(-1).mean()
        poptim.zero_grad()
        loss.backward()
        poptim.step()
        return loss

    fit = torch.compile(fit_step) if compiled else fit_step
    poisson = torch.compile(poisson_step) if compiled else poisson_step
    total_steps, steps_til_summary = 6, 2
    losses = []
    for step in range(total_steps):
        loss, g, lap = fit(coords, ground_truth)
        losses.append(loss.item())
        if not step % steps_til_summary:
            losses += [g.item(), lap.item()]
        losses.append(poisson(coords, gt_grad).item())
    with torch.no_grad():
        out, _ = img_siren(coords)
        losses.append(float(out.abs().sum()))
    return {"losses": losses, "weights": w, "fn": [fit, poisson]}
