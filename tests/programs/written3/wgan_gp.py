# In the manner of public WGAN-GP implementations (Gulrajani et al.'s improved training of
# Wasserstein GANs, as the popular PyTorch ports write it): a critic without batch norm,
# the gradient penalty through torch.autograd.grad(create_graph=True, retain_graph=True,
# grad_outputs=ones), n_critic critic steps per generator step, Adam with betas=(0.5, 0.9).
# The interpolation weights and noise come from NumPy (a test device: the random streams
# of the two libraries differ).
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import numpy as np
import torch
import torch.nn as nn
import torch.autograd as autograd

latent_dim = 8
data_dim = 2
lambda_gp = 10
n_critic = 3


class Generator(nn.Module):
    def __init__(self):
        super(Generator, self).__init__()

        def block(in_feat, out_feat, normalize=True):
            layers = [nn.Linear(in_feat, out_feat)]
            if normalize:
                layers.append(nn.BatchNorm1d(out_feat, 0.8))
            layers.append(nn.LeakyReLU(0.2, inplace=True))
            return layers

        self.model = nn.Sequential(
            *block(latent_dim, 32, normalize=False),
            *block(32, 32),
            nn.Linear(32, data_dim),
            nn.Tanh()
        )

    def forward(self, z):
        return self.model(z)


class Discriminator(nn.Module):
    def __init__(self):
        super(Discriminator, self).__init__()
        self.model = nn.Sequential(
            nn.Linear(data_dim, 32),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Linear(32, 32),
            nn.LeakyReLU(0.2, inplace=True),
            nn.Linear(32, 1),
        )

    def forward(self, img):
        return self.model(img)


def compute_gradient_penalty(D, real_samples, fake_samples, alpha):
    """Calculates the gradient penalty loss for WGAN GP"""
    interpolates = (alpha * real_samples + ((1 - alpha) * fake_samples)).requires_grad_(True)
    d_interpolates = D(interpolates)
    fake = torch.ones(real_samples.shape[0], 1, requires_grad=False)
    gradients = autograd.grad(
        outputs=d_interpolates,
        inputs=interpolates,
        grad_outputs=fake,
        create_graph=True,
        retain_graph=True,
        only_inputs=True,
    )[0]
    gradients = gradients.view(gradients.size(0), -1)
    gradient_penalty = ((gradients.norm(2, dim=1) - 1) ** 2).mean()
    return gradient_penalty


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    generator = Generator()
    discriminator = Discriminator()
    if weights is not None:
        generator.load_state_dict({k[2:]: torch.tensor(v) for k, v in weights.items() if k.startswith("G.")})
        discriminator.load_state_dict({k[2:]: torch.tensor(v) for k, v in weights.items() if k.startswith("D.")})
    w = {"G." + k: v.detach().numpy().copy() for k, v in generator.state_dict().items()}
    w.update({"D." + k: v.detach().numpy().copy() for k, v in discriminator.state_dict().items()})

    optimizer_G = torch.optim.Adam(generator.parameters(), lr=2e-4, betas=(0.5, 0.9))
    optimizer_D = torch.optim.Adam(discriminator.parameters(), lr=2e-4, betas=(0.5, 0.9))

    def d_step(real_imgs, z, alpha):
        optimizer_D.zero_grad()
        fake_imgs = generator(z)
        real_validity = discriminator(real_imgs)
        fake_validity = discriminator(fake_imgs)
        gradient_penalty = compute_gradient_penalty(discriminator, real_imgs.data, fake_imgs.data, alpha)
        d_loss = -torch.mean(real_validity) + torch.mean(fake_validity) + lambda_gp * gradient_penalty
        d_loss.backward()
        optimizer_D.step()
        return d_loss, gradient_penalty

    def g_step(z):
        optimizer_G.zero_grad()
        fake_imgs = generator(z)
        fake_validity = discriminator(fake_imgs)
        g_loss = -torch.mean(fake_validity)
        g_loss.backward()
        optimizer_G.step()
        return g_loss

    d_fn = torch.compile(d_step) if compiled else d_step
    g_fn = torch.compile(g_step) if compiled else g_step
    rng = np.random.default_rng(0)
    losses = []
    batches_done = 0
    for i in range(12):
        theta = rng.uniform(0, 2 * np.pi, 16)
        real = np.stack([np.cos(theta), np.sin(theta)], 1).astype(np.float32) * 0.8
        real_imgs = torch.from_numpy(real)
        z = torch.from_numpy(rng.standard_normal((16, latent_dim)).astype(np.float32))
        alpha = torch.from_numpy(rng.uniform(0, 1, (16, 1)).astype(np.float32))
        d_loss, gp = d_fn(real_imgs, z, alpha)
        losses += [d_loss.item(), gp.item()]
        if i % n_critic == 0:
            g_loss = g_fn(z)
            losses.append(g_loss.item())
            batches_done += n_critic
    return {"losses": losses, "weights": w, "fn": [d_fn, g_fn]}
