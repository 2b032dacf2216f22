# In the manner of rosinality's stylegan2-pytorch (``model.py``, ``train.py``):
# equalised-learning-rate layers (``EqualLinear`` holding ``torch.randn(out, in).div_(lr_mul)``
# and applying ``self.weight * self.scale`` with ``bias * self.lr_mul``, ``EqualConv2d``),
# ``fused_leaky_relu`` written as ``F.leaky_relu(input + bias.view(...), 0.2) * 2 ** 0.5``,
# a mapping network with ``PixelNorm`` (``torch.rsqrt(torch.mean(x ** 2, dim=1,
# keepdim=True) + 1e-8)``), ``ModulatedConv2d`` (style by ``.view(batch, 1, in, 1, 1)``,
# demodulation ``torch.rsqrt(weight.pow(2).sum([2, 3, 4]) + 1e-8)``, the batch folded into
# groups ``F.conv2d(input.view(1, batch * in_channel, h, w), weight, groups=batch)``),
# ``NoiseInjection`` (``image + self.weight * noise``), the non-saturating losses by
# ``F.softplus``, R1 regularisation by ``autograd.grad(outputs=real_pred.sum(),
# inputs=real_img, create_graph=True)`` every ``d_reg_every`` steps (lazy regularisation,
# ``r1_loss * d_reg_every + 0 * real_pred[0]``), ``requires_grad(model, flag)`` toggling the
# networks, Adam betas scaled by ``c ** reg_every`` and ``accumulate`` keeping an EMA
# generator through ``dict(model.named_parameters())`` and ``mul_(decay).add_(..., alpha=1 -
# decay)``.
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import math

import numpy as np
import torch
from torch import autograd, nn
from torch.nn import functional as F


def fused_leaky_relu(input, bias, negative_slope=0.2, scale=2 ** 0.5):
    rest_dim = [1] * (input.ndim - bias.ndim - 1)
    return F.leaky_relu(input + bias.view(1, bias.shape[0], *rest_dim), negative_slope=negative_slope) * scale


class FusedLeakyReLU(nn.Module):
    def __init__(self, channel):
        super().__init__()
        self.bias = nn.Parameter(torch.zeros(channel))

    def forward(self, input):
        return fused_leaky_relu(input, self.bias)


class PixelNorm(nn.Module):
    def forward(self, input):
        return input * torch.rsqrt(torch.mean(input ** 2, dim=1, keepdim=True) + 1e-8)


class EqualLinear(nn.Module):
    def __init__(self, in_dim, out_dim, bias=True, bias_init=0, lr_mul=1, activation=None):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(out_dim, in_dim).div_(lr_mul))
        self.bias = nn.Parameter(torch.zeros(out_dim).fill_(bias_init)) if bias else None
        self.activation = activation
        self.scale = (1 / math.sqrt(in_dim)) * lr_mul
        self.lr_mul = lr_mul

    def forward(self, input):
        if self.activation:
            out = F.linear(input, self.weight * self.scale)
            out = fused_leaky_relu(out, self.bias * self.lr_mul)
        else:
            out = F.linear(input, self.weight * self.scale, bias=self.bias * self.lr_mul)
        return out


class EqualConv2d(nn.Module):
    def __init__(self, in_channel, out_channel, kernel_size, stride=1, padding=0, bias=True):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(out_channel, in_channel, kernel_size, kernel_size))
        self.scale = 1 / math.sqrt(in_channel * kernel_size ** 2)
        self.stride, self.padding = stride, padding
        self.bias = nn.Parameter(torch.zeros(out_channel)) if bias else None

    def forward(self, input):
        return F.conv2d(input, self.weight * self.scale, bias=self.bias, stride=self.stride, padding=self.padding)


class ModulatedConv2d(nn.Module):
    def __init__(self, in_channel, out_channel, kernel_size, style_dim, demodulate=True):
        super().__init__()
        self.eps = 1e-8
        self.kernel_size, self.in_channel, self.out_channel = kernel_size, in_channel, out_channel
        fan_in = in_channel * kernel_size ** 2
        self.scale = 1 / math.sqrt(fan_in)
        self.padding = kernel_size // 2
        self.weight = nn.Parameter(torch.randn(1, out_channel, in_channel, kernel_size, kernel_size))
        self.modulation = EqualLinear(style_dim, in_channel, bias_init=1)
        self.demodulate = demodulate

    def forward(self, input, style):
        batch, in_channel, height, width = input.shape
        style = self.modulation(style).view(batch, 1, in_channel, 1, 1)
        weight = self.scale * self.weight * style
        if self.demodulate:
            demod = torch.rsqrt(weight.pow(2).sum([2, 3, 4]) + 1e-8)
            weight = weight * demod.view(batch, self.out_channel, 1, 1, 1)
        weight = weight.view(batch * self.out_channel, in_channel, self.kernel_size, self.kernel_size)
        input = input.view(1, batch * in_channel, height, width)
        out = F.conv2d(input, weight, padding=self.padding, groups=batch)
        _, _, height, width = out.shape
        return out.view(batch, self.out_channel, height, width)


class NoiseInjection(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(1))

    def forward(self, image, noise):
        return image + self.weight * noise


class StyledConv(nn.Module):
    def __init__(self, in_channel, out_channel, kernel_size, style_dim):
        super().__init__()
        self.conv = ModulatedConv2d(in_channel, out_channel, kernel_size, style_dim)
        self.noise = NoiseInjection()
        self.activate = FusedLeakyReLU(out_channel)

    def forward(self, input, style, noise):
        out = self.conv(input, style)
        out = self.noise(out, noise=noise)
        return self.activate(out)


class Generator(nn.Module):
    def __init__(self, size=8, style_dim=8, n_mlp=2, channels=6, lr_mlp=0.01):
        super().__init__()
        self.style_dim = style_dim
        layers = [PixelNorm()]
        for i in range(n_mlp):
            layers.append(EqualLinear(style_dim, style_dim, lr_mul=lr_mlp, activation='fused_lrelu'))
        self.style = nn.Sequential(*layers)
        self.input = nn.Parameter(torch.randn(1, channels, 4, 4))
        self.conv1 = StyledConv(channels, channels, 3, style_dim)
        self.conv2 = StyledConv(channels, channels, 3, style_dim)
        self.to_rgb = ModulatedConv2d(channels, 3, 1, style_dim, demodulate=False)
        self.rgb_bias = nn.Parameter(torch.zeros(1, 3, 1, 1))

    def forward(self, z, noise):
        latent = self.style(z)
        out = self.input.repeat(z.shape[0], 1, 1, 1)
        out = self.conv1(out, latent, noise[0])
        out = F.interpolate(out, scale_factor=2, mode='nearest')
        out = self.conv2(out, latent, noise[1])
        return self.to_rgb(out, latent) + self.rgb_bias


class Discriminator(nn.Module):
    def __init__(self, channels=6):
        super().__init__()
        self.conv0 = EqualConv2d(3, channels, 1)
        self.act0 = FusedLeakyReLU(channels)
        self.conv1 = EqualConv2d(channels, channels, 3, stride=2, padding=1, bias=False)
        self.act1 = FusedLeakyReLU(channels)
        self.final_linear = nn.Sequential(
            EqualLinear(channels * 4 * 4, channels, activation='fused_lrelu'),
            EqualLinear(channels, 1))

    def forward(self, input):
        out = self.act0(self.conv0(input))
        out = self.act1(self.conv1(out))
        out = out.view(out.shape[0], -1)
        return self.final_linear(out)


def requires_grad(model, flag=True):
    for p in model.parameters():
        p.requires_grad = flag


def accumulate(model1, model2, decay=0.999):
    par1 = dict(model1.named_parameters())
    par2 = dict(model2.named_parameters())
    for k in par1.keys():
        par1[k].data.mul_(decay).add_(par2[k].data, alpha=1 - decay)


def d_logistic_loss(real_pred, fake_pred):
    real_loss = F.softplus(-real_pred)
    fake_loss = F.softplus(fake_pred)
    return real_loss.mean() + fake_loss.mean()


def d_r1_loss(real_pred, real_img):
    grad_real, = autograd.grad(outputs=real_pred.sum(), inputs=real_img, create_graph=True)
    grad_penalty = grad_real.pow(2).reshape(grad_real.shape[0], -1).sum(1).mean()
    return grad_penalty


def g_nonsaturating_loss(fake_pred):
    return F.softplus(-fake_pred).mean()


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    rng = np.random.default_rng(1304)
    generator, discriminator, g_ema = Generator(), Discriminator(), Generator()
    g_ema.eval()
    accumulate(g_ema, generator, 0)
    if weights is not None:
        for prefix, m in (('g.', generator), ('d.', discriminator), ('e.', g_ema)):
            m.load_state_dict({k[2:]: torch.tensor(v) for k, v in weights.items() if k.startswith(prefix)})
    w = {}
    for prefix, m in (('g.', generator), ('d.', discriminator), ('e.', g_ema)):
        w.update({prefix + k: v.detach().numpy().copy() for k, v in m.state_dict().items()})
    g_reg_every, d_reg_every, r1 = 4, 2, 10.0
    d_reg_ratio = d_reg_every / (d_reg_every + 1)
    g_reg_ratio = g_reg_every / (g_reg_every + 1)
    g_optim = torch.optim.Adam(generator.parameters(), lr=0.002 * g_reg_ratio,
                               betas=(0 ** g_reg_ratio, 0.99 ** g_reg_ratio))
    d_optim = torch.optim.Adam(discriminator.parameters(), lr=0.002 * d_reg_ratio,
                               betas=(0 ** d_reg_ratio, 0.99 ** d_reg_ratio))
    batch = 2
    reals = [torch.from_numpy(np.tanh(rng.standard_normal((batch, 3, 8, 8))).astype(np.float32)) for _ in range(3)]

    def inputs():
        z = torch.from_numpy(rng.standard_normal((batch, 8)).astype(np.float32))
        noise = [torch.from_numpy(rng.standard_normal((batch, 1, s, s)).astype(np.float32)) for s in (4, 8)]
        return z, noise

    def d_step(real_img, z, noise):
        fake_img = generator(z, noise)
        fake_pred = discriminator(fake_img)
        real_pred = discriminator(real_img)
        d_loss = d_logistic_loss(real_pred, fake_pred)
        discriminator.zero_grad()
        d_loss.backward()
        d_optim.step()
        return d_loss, real_pred.mean(), fake_pred.mean()

    def r1_step(real_img):
        real_img.requires_grad = True
        real_pred = discriminator(real_img)
        r1_loss = d_r1_loss(real_pred, real_img)
        discriminator.zero_grad()
        (r1 / 2 * r1_loss * d_reg_every + 0 * real_pred[0]).backward()
        d_optim.step()
        return r1_loss

    def g_step(z, noise):
        fake_img = generator(z, noise)
        fake_pred = discriminator(fake_img)
        g_loss = g_nonsaturating_loss(fake_pred)
        generator.zero_grad()
        g_loss.backward()
        g_optim.step()
        return g_loss

    if compiled:
        d_step, r1_step, g_step = torch.compile(d_step), torch.compile(r1_step), torch.compile(g_step)
    accum = 0.5 ** (32 / (10 * 1000))
    losses = []
    for i in range(6):
        real_img = reals[i % 3]
        requires_grad(generator, False)
        requires_grad(discriminator, True)
        z, noise = inputs()
        d_loss, real_score, fake_score = d_step(real_img, z, noise)
        losses += [d_loss.item(), real_score.item(), fake_score.item()]
        if i % d_reg_every == 0:
            r1_loss = r1_step(real_img.clone())
            losses.append(r1_loss.item())
        requires_grad(generator, True)
        requires_grad(discriminator, False)
        z, noise = inputs()
        g_loss = g_step(z, noise)
        losses.append(g_loss.item())
        accumulate(g_ema, generator, accum)
    with torch.no_grad():
        z, noise = inputs()
        sample = g_ema(z, noise)
        losses.append(float(sample.abs().mean()))
    return {"losses": losses, "weights": w, "fn": [d_step, r1_step, g_step] if compiled else d_step}
