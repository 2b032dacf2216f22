# In the manner of GAN training loops with spectral normalisation and mixed precision
# switched off on CPU: a discriminator of nn.utils.spectral_norm(nn.Linear/Conv2d) layers
# with LeakyReLU, a generator with weight_norm from torch.nn.utils.parametrizations,
# the logistic loss (F.softplus(-d_real).mean() + F.softplus(d_fake).mean()), Adam with
# betas=(0.0, 0.9), torch.amp.GradScaler and torch.autocast enabled only on CUDA
# (scaler.scale(loss).backward(), scaler.step, scaler.update), fake.detach() for the
# critic, and a data pipeline with random_split and a WeightedRandomSampler whose counts
# (not draws) are compared. Latent codes come from NumPy (a test device).
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils import spectral_norm
from torch.nn.utils.parametrizations import weight_norm
from torch.utils.data import DataLoader, TensorDataset, WeightedRandomSampler, random_split

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
use_amp = device.type == "cuda"
nz = 6


class Discriminator(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = spectral_norm(nn.Conv2d(1, 4, 3, 2, 1))
        self.fc1 = spectral_norm(nn.Linear(4 * 4 * 4, 16))
        self.fc2 = spectral_norm(nn.Linear(16, 1))

    def forward(self, x):
        x = F.leaky_relu(self.conv(x), 0.1)
        x = x.flatten(1)
        x = F.leaky_relu(self.fc1(x), 0.1)
        return self.fc2(x)


class Generator(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(
            weight_norm(nn.Linear(nz, 32)),
            nn.ReLU(True),
            weight_norm(nn.Linear(32, 64)),
            nn.Tanh(),
        )

    def forward(self, z):
        return self.net(z).view(-1, 1, 8, 8)


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    rng = np.random.default_rng(13)
    data = np.tanh(rng.standard_normal((40, 1, 8, 8))).astype(np.float32)
    classes = (np.arange(40) % 4 == 0).astype(np.int64)
    dataset = TensorDataset(torch.from_numpy(data), torch.from_numpy(classes))
    train_set, val_set = random_split(dataset, [32, 8], generator=torch.Generator().manual_seed(42))
    counts = np.bincount(classes)
    sample_weights = 1.0 / counts[classes]
    sampler = WeightedRandomSampler(sample_weights, num_samples=len(sample_weights), replacement=True)
    balanced = DataLoader(dataset, batch_size=8, sampler=sampler)
    pipeline = [len(train_set), len(val_set), len(sorted(set(train_set.indices) | set(val_set.indices))),
                len(balanced), sum(len(y) for _, y in balanced), len(list(iter(sampler)))]
    loader = DataLoader(dataset, batch_size=8, shuffle=False, drop_last=True)

    netD, netG = Discriminator().to(device), Generator().to(device)
    w = {}
    for j, model in enumerate((netD, netG)):
        if weights is not None:
            model.load_state_dict({k[2:]: torch.tensor(v) for k, v in weights.items() if k.startswith(f'{j}.')})
        w.update({f'{j}.' + k: v.detach().numpy().copy() for k, v in model.state_dict().items()})
    optD = torch.optim.Adam(netD.parameters(), lr=2e-4, betas=(0.0, 0.9))
    optG = torch.optim.Adam(netG.parameters(), lr=2e-4, betas=(0.0, 0.9))
    scaler = torch.amp.GradScaler(enabled=use_amp)

    def d_step(real, z):
        optD.zero_grad(set_to_none=True)
        with torch.autocast(device_type=device.type, enabled=use_amp):
            fake = netG(z)
            d_real = netD(real)
            d_fake = netD(fake.detach())
            lossD = F.softplus(-d_real).mean() + F.softplus(d_fake).mean()
        scaler.scale(lossD).backward()
        scaler.step(optD)
        scaler.update()
        return lossD, d_real.mean()

    def g_step(z):
        optG.zero_grad(set_to_none=True)
        with torch.autocast(device_type=device.type, enabled=use_amp):
            lossG = -netD(netG(z)).mean()
        scaler.scale(lossG).backward()
        scaler.step(optG)
        scaler.update()
        return lossG

    stepD = torch.compile(d_step) if compiled else d_step
    stepG = torch.compile(g_step) if compiled else g_step
    losses = []
    for epoch in range(2):
        for real, _ in loader:
            real = real.to(device)
            z = torch.from_numpy(rng.standard_normal((real.size(0), nz)).astype(np.float32))
            lossD, d_real = stepD(real, z)
            z = torch.from_numpy(rng.standard_normal((real.size(0), nz)).astype(np.float32))
            lossG = stepG(z)
            losses += [lossD.item(), d_real.item(), lossG.item()]
    with torch.no_grad():
        losses.append(torch.linalg.matrix_norm(netD.fc2.weight, ord=2).item())
        losses.append(netG.net[0].parametrizations.weight.original0.sum().item())
    losses += pipeline + [scaler.get_scale() if use_amp else 1.0]
    return {"losses": losses, "weights": w, "fn": [stepD, stepG]}
