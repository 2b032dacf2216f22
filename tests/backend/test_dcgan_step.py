"""A DCGAN training step compiles as one call and matches eager mode.

The generator and discriminator step of the PyTorch DCGAN example (transposed
convolutions, batch norm, LeakyReLU, BCELoss, two Adam optimizers, three backward passes)
is one large graph: as one generated function it exhausted Numba's recursion limit. Split
into parts it compiles, and the parts of repeated structure are shared.
"""

from __future__ import annotations

import numpy as np
import pytest

import dualgraph as dg
from dualgraph import nn


def _models(nz: int = 8, ngf: int = 8, ndf: int = 8, nc: int = 3):
    dg.manual_seed(0)
    g = nn.Sequential(
        nn.ConvTranspose2d(nz, ngf * 2, 4, 1, 0, bias=False), nn.BatchNorm2d(ngf * 2),
        nn.ReLU(True),
        nn.ConvTranspose2d(ngf * 2, ngf, 4, 2, 1, bias=False), nn.BatchNorm2d(ngf),
        nn.ReLU(True),
        nn.ConvTranspose2d(ngf, nc, 4, 2, 1, bias=False), nn.Tanh(),
    )
    d = nn.Sequential(
        nn.Conv2d(nc, ndf, 4, 2, 1, bias=False), nn.LeakyReLU(0.2, inplace=True),
        nn.Conv2d(ndf, ndf * 2, 4, 2, 1, bias=False), nn.BatchNorm2d(ndf * 2),
        nn.LeakyReLU(0.2, inplace=True),
        nn.Conv2d(ndf * 2, 1, 4, 1, 0, bias=False), nn.Sigmoid(),
    )
    return g, d


def _step():
    net_g, net_d = _models()
    criterion = nn.BCELoss()
    opt_d = dg.optim.Adam(net_d.parameters(), lr=2e-4, betas=(0.5, 0.999))
    opt_g = dg.optim.Adam(net_g.parameters(), lr=2e-4, betas=(0.5, 0.999))

    def step(real, noise):
        b = real.shape[0]
        ones = dg.full((b,), 1.0)
        zeros = dg.full((b,), 0.0)
        # (1) the discriminator: real images, then the generator's, detached
        net_d.zero_grad()
        err_real = criterion(net_d(real).view(-1), ones)
        err_real.backward()
        fake = net_g(noise)
        err_fake = criterion(net_d(fake.detach()).view(-1), zeros)
        err_fake.backward()
        opt_d.step()
        # (2) the generator, through the updated discriminator
        net_g.zero_grad()
        err_g = criterion(net_d(fake).view(-1), ones)
        err_g.backward()
        opt_g.step()
        return err_real + err_fake, err_g

    return (net_g, net_d), step


@pytest.mark.slow  # a cold compile of the whole step takes minutes on one loaded core
def test_dcgan_step_compiles_split_and_matches_eager():
    rng = np.random.default_rng(0)
    real = dg.tensor(rng.uniform(-1, 1, (4, 3, 16, 16)).astype(np.float32))
    noise = dg.tensor(rng.standard_normal((4, 8, 1, 1)).astype(np.float32))
    nets_e, step_e = _step()
    nets_c, step_c = _step()
    compiled = dg.compile(step_c, tiered=False)
    for _ in range(3):
        de, ge = step_e(real, noise)
        dc, gc = compiled(real, noise)
        dg.testing.assert_close(dc.numpy(), de.numpy(), rtol=2e-4, atol=1e-5, equal_nan=True,
                                check_dtype=False)
        dg.testing.assert_close(gc.numpy(), ge.numpy(), rtol=2e-4, atol=1e-5, equal_nan=True,
                                check_dtype=False)
    assert compiled.stats.traces == 1
    (entry,) = compiled.entries()
    assert len(entry.kernel.parts) > 1
    for ne, nc in zip(nets_e, nets_c):
        for (name, pe), (_, pc) in zip(ne.named_parameters(), nc.named_parameters()):
            dg.testing.assert_close(pc.numpy(), pe.numpy(), rtol=1e-3, atol=1e-5, equal_nan=True,
                                    check_dtype=False, msg=name)
        for (name, be), (_, bc) in zip(ne.named_buffers(), nc.named_buffers()):
            dg.testing.assert_close(bc.numpy(), be.numpy(), rtol=1e-4, atol=1e-6, equal_nan=True,
                                    check_dtype=False, msg=name)
