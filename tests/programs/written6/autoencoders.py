# In the manner of autoencoder tutorials: a denoising autoencoder (``noisy = x + noise_factor *
# noise`` then ``torch.clamp(noisy, 0., 1.)``, an encoder/decoder pair of ``nn.Sequential``s
# ending in ``nn.Sigmoid``, ``nn.MSELoss``), a sparse autoencoder with a KL-divergence penalty
# on the mean hidden activation (``rho * torch.log(rho / rho_hat) + (1 - rho) * torch.log((1 -
# rho) / (1 - rho_hat))`` over ``torch.mean(torch.sigmoid(h), 0)``) and an L1 activity
# penalty summed over ``model.children()``, and a convolutional autoencoder with
# ``nn.ConvTranspose2d(stride=2, output_padding=1)``; the epoch loss accumulated as
# ``loss.item() * img.size(0)`` and divided by ``len(dataset)``.
# The noise is drawn with NumPy (a test device: the random streams of the two libraries differ).
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset


class Autoencoder(nn.Module):
    def __init__(self, input_dim=64, hidden=16):
        super(Autoencoder, self).__init__()
        self.encoder = nn.Sequential(nn.Linear(input_dim, 32), nn.ReLU(True), nn.Linear(32, hidden), nn.ReLU(True))
        self.decoder = nn.Sequential(nn.Linear(hidden, 32), nn.ReLU(True), nn.Linear(32, input_dim), nn.Sigmoid())

    def forward(self, x):
        x = self.encoder(x)
        x = self.decoder(x)
        return x


class SparseAutoencoder(nn.Module):
    def __init__(self, input_dim=64, hidden=24):
        super(SparseAutoencoder, self).__init__()
        self.enc1 = nn.Linear(input_dim, hidden)
        self.dec1 = nn.Linear(hidden, input_dim)

    def forward(self, x):
        h = self.enc1(x)
        x = torch.sigmoid(self.dec1(torch.sigmoid(h)))
        return x, h


class ConvAutoencoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(
            nn.Conv2d(1, 4, 3, stride=2, padding=1), nn.ReLU(),
            nn.Conv2d(4, 8, 3, stride=2, padding=1), nn.ReLU())
        self.decoder = nn.Sequential(
            nn.ConvTranspose2d(8, 4, 3, stride=2, padding=1, output_padding=1), nn.ReLU(),
            nn.ConvTranspose2d(4, 1, 3, stride=2, padding=1, output_padding=1), nn.Sigmoid())

    def forward(self, x):
        return self.decoder(self.encoder(x))


def kl_divergence(rho, rho_hat):
    rho_hat = torch.mean(torch.sigmoid(rho_hat), 0)
    rho = torch.tensor([rho] * len(rho_hat))
    return torch.sum(rho * torch.log(rho / rho_hat) + (1 - rho) * torch.log((1 - rho) / (1 - rho_hat)))


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    rng = np.random.default_rng(67)
    models = {"dae": Autoencoder(), "sparse": SparseAutoencoder(), "conv": ConvAutoencoder()}
    if weights is not None:
        for name, m in models.items():
            m.load_state_dict({k[len(name) + 1:]: torch.tensor(v) for k, v in weights.items()
                               if k.startswith(name + ".")})
    w = {f"{name}.{k}": v.detach().numpy().copy() for name, m in models.items()
         for k, v in m.state_dict().items()}
    images = rng.random((48, 1, 8, 8)).astype(np.float32)
    noise = torch.tensor(rng.normal(size=(3, 16, 64)).astype(np.float32))
    dataset = TensorDataset(torch.tensor(images))
    loader = DataLoader(dataset, batch_size=16, shuffle=False)
    losses, fns = [], []
    noise_factor = 0.3

    model = models["dae"]
    criterion = nn.MSELoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2, weight_decay=1e-5)

    def dae_step(img, noise):
        img = img.view(img.size(0), -1)
        noisy = img + noise_factor * noise
        noisy = torch.clamp(noisy, 0., 1.)
        output = model(noisy)
        loss = criterion(output, img)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss

    step = torch.compile(dae_step) if compiled else dae_step
    fns.append(step)
    for epoch in range(2):
        running_loss = 0.0
        for i, (img,) in enumerate(loader):
            loss = step(img, noise[i])
            running_loss += loss.item() * img.size(0)
        losses.append(running_loss / len(dataset))

    sparse = models["sparse"]
    opt_s = torch.optim.SGD(sparse.parameters(), lr=0.5, momentum=0.9)
    RHO, BETA, L1 = 0.05, 0.1, 1e-4

    def sparse_loss(model, images):
        loss = 0
        values = images
        for i, child in enumerate(list(model.children())):
            values = F.relu(child(values))
            loss += torch.mean(torch.abs(values))
        return loss

    def sparse_step(img):
        img = img.view(img.size(0), -1)
        opt_s.zero_grad()
        outputs, h = sparse(img)
        mse_loss = criterion(outputs, img)
        loss = mse_loss + BETA * kl_divergence(RHO, h) + L1 * sparse_loss(sparse, img)
        loss.backward()
        opt_s.step()
        return loss, mse_loss

    step2 = torch.compile(sparse_step) if compiled else sparse_step
    fns.append(step2)
    for epoch in range(2):
        for (img,) in loader:
            loss, mse = step2(img)
            losses += [loss.item(), mse.item()]

    conv = models["conv"]
    opt_c = torch.optim.Adam(conv.parameters(), lr=5e-3)

    def conv_step(img):
        recon = conv(img)
        loss = F.binary_cross_entropy(recon, img)
        opt_c.zero_grad()
        loss.backward()
        opt_c.step()
        return loss

    step3 = torch.compile(conv_step) if compiled else conv_step
    fns.append(step3)
    for epoch in range(2):
        for (img,) in loader:
            losses.append(step3(img).item())
    with torch.no_grad():
        losses.append(conv.encoder(torch.tensor(images[:2])).abs().sum().item())
    return {"losses": losses, "weights": w, "fn": fns}
