# In the manner of the Gumbel-softmax categorical VAE ports (YongfeiYan/Gumbel_Softmax_VAE,
# after Eric Jang's notebook; MIT licence): ``sample_gumbel`` as
# ``-torch.log(-torch.log(U + eps) + eps)``, ``gumbel_softmax_sample`` dividing by the
# temperature, the straight-through ``hard`` path (``y_hard.scatter_(1, ind.view(-1, 1), 1)``
# and ``(y_hard - y).detach() + y``), ``latent_dim * categorical_dim`` logits viewed as
# ``(-1, latent_dim, categorical_dim)``, the KL to a uniform prior by
# ``qy * torch.log(qy * categorical_dim + 1e-20)``, ``F.binary_cross_entropy(...,
# reduction='sum')``, the temperature annealed by
# ``np.maximum(temp * np.exp(-ANNEAL_RATE * batch_idx), temp_min)`` and passed to the model
# as a Python float, and sampling from one-hot codes under ``torch.no_grad()``. The uniform
# noise comes from NumPy (the two libraries' random streams differ).
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import optim

latent_dim = 3
categorical_dim = 4


def sample_gumbel(U, eps=1e-20):
    return -torch.log(-torch.log(U + eps) + eps)


def gumbel_softmax_sample(logits, temperature, U):
    y = logits + sample_gumbel(U)
    return F.softmax(y / temperature, dim=-1)


def gumbel_softmax(logits, temperature, U, hard=False):
    y = gumbel_softmax_sample(logits, temperature, U)
    if not hard:
        return y.view(-1, latent_dim * categorical_dim)
    shape = y.size()
    _, ind = y.max(dim=-1)
    y_hard = torch.zeros_like(y).view(-1, shape[-1])
    y_hard.scatter_(1, ind.view(-1, 1), 1)
    y_hard = y_hard.view(*shape)
    y_hard = (y_hard - y).detach() + y
    return y_hard.view(-1, latent_dim * categorical_dim)


class VAE_gumbel(nn.Module):
    def __init__(self, temp):
        super(VAE_gumbel, self).__init__()
        self.fc1 = nn.Linear(36, 24)
        self.fc2 = nn.Linear(24, 16)
        self.fc3 = nn.Linear(16, latent_dim * categorical_dim)
        self.fc4 = nn.Linear(latent_dim * categorical_dim, 16)
        self.fc5 = nn.Linear(16, 24)
        self.fc6 = nn.Linear(24, 36)
        self.relu = nn.ReLU()
        self.sigmoid = nn.Sigmoid()

    def encode(self, x):
        h1 = self.relu(self.fc1(x))
        h2 = self.relu(self.fc2(h1))
        return self.relu(self.fc3(h2))

    def decode(self, z):
        h4 = self.relu(self.fc4(z))
        h5 = self.relu(self.fc5(h4))
        return self.sigmoid(self.fc6(h5))

    def forward(self, x, temp, U, hard):
        q = self.encode(x.view(-1, 36))
        q_y = q.view(q.size(0), latent_dim, categorical_dim)
        z = gumbel_softmax(q_y, temp, U, hard)
        return self.decode(z), F.softmax(q_y, dim=-1).reshape(*q.size())


def loss_function(recon_x, x, qy):
    BCE = F.binary_cross_entropy(recon_x, x.view(-1, 36), reduction='sum') / x.shape[0]
    log_ratio = torch.log(qy * categorical_dim + 1e-20)
    KLD = torch.sum(qy * log_ratio, dim=-1).mean()
    return BCE + KLD


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    rng = np.random.default_rng(1001)
    temp, temp_min, ANNEAL_RATE, hard = 1.0, 0.5, 0.03, False
    device = torch.device("cpu")
    model = VAE_gumbel(temp).to(device)
    if weights is not None:
        model.load_state_dict({k: torch.tensor(v) for k, v in weights.items()})
    w = {k: v.detach().cpu().numpy().copy() for k, v in model.state_dict().items()}
    optimizer = optim.Adam(model.parameters(), lr=1e-2)
    protos = (rng.random((4, 36)) > 0.5).astype(np.float32)
    batches = []
    for _ in range(4):
        idx = rng.integers(0, 4, size=8)
        data = np.clip(protos[idx] + (rng.random((8, 36)) < 0.1), 0, 1).astype(np.float32)
        batches.append((torch.from_numpy(data).view(8, 1, 6, 6), idx))

    def train_step(data, temp, U):
        optimizer.zero_grad()
        recon_batch, qy = model(data, temp, U, hard)
        loss = loss_function(recon_batch, data, qy)
        loss.backward()
        optimizer.step()
        return loss

    step = torch.compile(train_step) if compiled else train_step
    losses = []
    model.train()
    for epoch in range(2):
        train_loss = 0
        for batch_idx, (data, _) in enumerate(batches):
            data = data.to(device)
            U = torch.from_numpy(rng.random((8, latent_dim, categorical_dim)).astype(np.float32))
            loss = step(data, temp, U)
            train_loss += loss.item() * len(data)
            losses.append(loss.item())
            if batch_idx % 2 == 1:
                temp = np.maximum(temp * np.exp(-ANNEAL_RATE * batch_idx), temp_min)
        losses.append(train_loss / 32)
    model.eval()
    with torch.no_grad():
        ind = torch.arange(latent_dim * 2) % categorical_dim
        z = torch.zeros(latent_dim * 2, categorical_dim)
        z.scatter_(1, ind.view(-1, 1), 1)
        z = z.view(-1, latent_dim * categorical_dim)
        sample = model.decode(z).cpu()
        losses += sample.sum(1).tolist()
        U = torch.from_numpy(rng.random((8, latent_dim, categorical_dim)).astype(np.float32))
        recon, qy = model(batches[0][0], float(temp), U, True)
        losses.append(loss_function(recon, batches[0][0], qy).item())
    return {"losses": losses, "weights": w, "fn": step}
