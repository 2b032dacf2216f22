# In the manner of yunjey/pytorch-tutorial's generative adversarial network: a
# discriminator and a generator as nn.Sequential of Linear/LeakyReLU/ReLU/Sigmoid/Tanh,
# BCELoss against torch.ones/torch.zeros labels, reset_grad() zeroing both optimizers,
# a discriminator step then a generator step per batch, D(x).mean().item() scores and
# denorm(x) = ((x + 1) / 2).clamp(0, 1). The latent codes come from NumPy (a test device:
# the two libraries' random streams differ).
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import numpy as np
import torch
import torch.nn as nn

device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')

latent_size = 8
hidden_size = 32
image_size = 36
num_epochs = 2
batch_size = 16


def denorm(x):
    out = (x + 1) / 2
    return out.clamp(0, 1)


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    rng = np.random.default_rng(4)
    data = (rng.random((64, 1, 6, 6)).astype(np.float32) - 0.5) * 2
    data_loader = torch.utils.data.DataLoader(dataset=torch.utils.data.TensorDataset(torch.tensor(data)),
                                              batch_size=batch_size, shuffle=False)
    D = nn.Sequential(
        nn.Linear(image_size, hidden_size),
        nn.LeakyReLU(0.2),
        nn.Linear(hidden_size, hidden_size),
        nn.LeakyReLU(0.2),
        nn.Linear(hidden_size, 1),
        nn.Sigmoid())
    G = nn.Sequential(
        nn.Linear(latent_size, hidden_size),
        nn.ReLU(),
        nn.Linear(hidden_size, hidden_size),
        nn.ReLU(),
        nn.Linear(hidden_size, image_size),
        nn.Tanh())
    D = D.to(device)
    G = G.to(device)
    if weights is not None:
        D.load_state_dict({k[2:]: torch.tensor(v) for k, v in weights.items() if k.startswith('D.')})
        G.load_state_dict({k[2:]: torch.tensor(v) for k, v in weights.items() if k.startswith('G.')})
    w = {'D.' + k: v.detach().numpy().copy() for k, v in D.state_dict().items()}
    w.update({'G.' + k: v.detach().numpy().copy() for k, v in G.state_dict().items()})

    criterion = nn.BCELoss()
    d_optimizer = torch.optim.Adam(D.parameters(), lr=0.0002)
    g_optimizer = torch.optim.Adam(G.parameters(), lr=0.0002)

    def reset_grad():
        d_optimizer.zero_grad()
        g_optimizer.zero_grad()

    def d_train(images, z):
        real_labels = torch.ones(batch_size, 1).to(device)
        fake_labels = torch.zeros(batch_size, 1).to(device)
        outputs = D(images)
        d_loss_real = criterion(outputs, real_labels)
        real_score = outputs
        fake_images = G(z)
        outputs = D(fake_images)
        d_loss_fake = criterion(outputs, fake_labels)
        fake_score = outputs
        d_loss = d_loss_real + d_loss_fake
        reset_grad()
        d_loss.backward()
        d_optimizer.step()
        return d_loss, real_score, fake_score

    def g_train(z):
        real_labels = torch.ones(batch_size, 1).to(device)
        fake_images = G(z)
        outputs = D(fake_images)
        g_loss = criterion(outputs, real_labels)
        reset_grad()
        g_loss.backward()
        g_optimizer.step()
        return g_loss, fake_images

    d_step = torch.compile(d_train) if compiled else d_train
    g_step = torch.compile(g_train) if compiled else g_train
    losses = []
    total_step = len(data_loader)
    for epoch in range(num_epochs):
        for i, (images,) in enumerate(data_loader):
            images = images.reshape(batch_size, -1).to(device)
            z = torch.from_numpy(rng.standard_normal((batch_size, latent_size)).astype(np.float32)).to(device)
            d_loss, real_score, fake_score = d_step(images, z)
            z = torch.from_numpy(rng.standard_normal((batch_size, latent_size)).astype(np.float32)).to(device)
            g_loss, fake_images = g_step(z)
            losses += [d_loss.item(), g_loss.item(), real_score.mean().item(), fake_score.mean().item()]
        fake_images = fake_images.reshape(fake_images.size(0), 1, 6, 6)
        losses.append(denorm(fake_images).sum().item())
    return {"losses": losses, "weights": w, "fn": [d_step, g_step]}
