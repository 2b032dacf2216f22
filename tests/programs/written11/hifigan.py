# In the manner of jik876/hifi-gan (MIT licence): a generator of ``weight_norm``
# ``Conv1d``/``ConvTranspose1d`` layers with ``init_weights`` applied through
# ``self.ups.apply(init_weights)`` (``m.weight.data.normal_(mean, std)``), ResBlock1's
# dilated convolutions summed as ``xs += self.resblocks[...](x)`` and ``xs / num_kernels``,
# ``F.leaky_relu(x, LRELU_SLOPE)``; a multi-period discriminator that reflect-pads a
# waveform to a multiple of the period and ``x.view(b, c, t // period, period)``s it for
# ``Conv2d((k, 1))``s; a multi-scale discriminator with ``spectral_norm`` on its first
# scale, grouped ``Conv1d``s and ``AvgPool1d(4, 2, padding=2)``; the mel loss from a
# module-level ``mel_spectrogram`` caching its filterbank and ``torch.hann_window`` in
# dicts keyed by device, reflect ``F.pad`` of ``y.unsqueeze(1)``, ``torch.stft(...,
# return_complex=True)`` and a magnitude by ``torch.view_as_real``; the LSGAN
# ``discriminator_loss``/``generator_loss`` with per-scale ``.item()`` lists and the
# ``feature_loss`` over feature maps; AdamW(betas=[0.8, 0.99]) over ``itertools.chain`` of
# both discriminators, ``ExponentialLR`` per epoch, and inference after
# ``remove_weight_norm``. The mel filterbank is built with NumPy (librosa's role).
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import itertools

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn import AvgPool1d, Conv1d, Conv2d, ConvTranspose1d
from torch.nn.utils import remove_weight_norm, spectral_norm, weight_norm

LRELU_SLOPE = 0.1


def init_weights(m, mean=0.0, std=0.01):
    classname = m.__class__.__name__
    if classname.find("Conv") != -1:
        m.weight.data.normal_(mean, std)


def get_padding(kernel_size, dilation=1):
    return int((kernel_size * dilation - dilation) / 2)


class ResBlock1(torch.nn.Module):
    def __init__(self, channels, kernel_size=3, dilation=(1, 3)):
        super(ResBlock1, self).__init__()
        self.convs1 = nn.ModuleList([
            weight_norm(Conv1d(channels, channels, kernel_size, 1, dilation=d,
                               padding=get_padding(kernel_size, d))) for d in dilation])
        self.convs1.apply(init_weights)
        self.convs2 = nn.ModuleList([
            weight_norm(Conv1d(channels, channels, kernel_size, 1, dilation=1,
                               padding=get_padding(kernel_size, 1))) for _ in dilation])
        self.convs2.apply(init_weights)

    def forward(self, x):
        for c1, c2 in zip(self.convs1, self.convs2):
            xt = F.leaky_relu(x, LRELU_SLOPE)
            xt = c1(xt)
            xt = F.leaky_relu(xt, LRELU_SLOPE)
            xt = c2(xt)
            x = xt + x
        return x

    def remove_weight_norm(self):
        for l in self.convs1:
            remove_weight_norm(l)
        for l in self.convs2:
            remove_weight_norm(l)


class Generator(torch.nn.Module):
    def __init__(self, h):
        super(Generator, self).__init__()
        self.h = h
        self.num_kernels = len(h["resblock_kernel_sizes"])
        self.num_upsamples = len(h["upsample_rates"])
        self.conv_pre = weight_norm(Conv1d(h["num_mels"], h["upsample_initial_channel"], 7, 1, padding=3))
        self.ups = nn.ModuleList()
        for i, (u, k) in enumerate(zip(h["upsample_rates"], h["upsample_kernel_sizes"])):
            self.ups.append(weight_norm(
                ConvTranspose1d(h["upsample_initial_channel"] // (2 ** i), h["upsample_initial_channel"] // (2 ** (i + 1)),
                                k, u, padding=(k - u) // 2)))
        self.resblocks = nn.ModuleList()
        for i in range(len(self.ups)):
            ch = h["upsample_initial_channel"] // (2 ** (i + 1))
            for j, (k, d) in enumerate(zip(h["resblock_kernel_sizes"], h["resblock_dilation_sizes"])):
                self.resblocks.append(ResBlock1(ch, k, d))
        self.conv_post = weight_norm(Conv1d(ch, 1, 7, 1, padding=3))
        self.ups.apply(init_weights)
        self.conv_post.apply(init_weights)

    def forward(self, x):
        x = self.conv_pre(x)
        for i in range(self.num_upsamples):
            x = F.leaky_relu(x, LRELU_SLOPE)
            x = self.ups[i](x)
            xs = None
            for j in range(self.num_kernels):
                if xs is None:
                    xs = self.resblocks[i * self.num_kernels + j](x)
                else:
                    xs += self.resblocks[i * self.num_kernels + j](x)
            x = xs / self.num_kernels
        x = F.leaky_relu(x)
        x = self.conv_post(x)
        x = torch.tanh(x)
        return x

    def remove_weight_norm(self):
        for l in self.ups:
            remove_weight_norm(l)
        for l in self.resblocks:
            l.remove_weight_norm()
        remove_weight_norm(self.conv_pre)
        remove_weight_norm(self.conv_post)


class DiscriminatorP(torch.nn.Module):
    def __init__(self, period, kernel_size=5, stride=3, use_spectral_norm=False):
        super(DiscriminatorP, self).__init__()
        self.period = period
        norm_f = weight_norm if use_spectral_norm == False else spectral_norm
        self.convs = nn.ModuleList([
            norm_f(Conv2d(1, 4, (kernel_size, 1), (stride, 1), padding=(get_padding(5, 1), 0))),
            norm_f(Conv2d(4, 8, (kernel_size, 1), (stride, 1), padding=(get_padding(5, 1), 0))),
            norm_f(Conv2d(8, 8, (kernel_size, 1), 1, padding=(2, 0))),
        ])
        self.conv_post = norm_f(Conv2d(8, 1, (3, 1), 1, padding=(1, 0)))

    def forward(self, x):
        fmap = []
        b, c, t = x.shape
        if t % self.period != 0:
            n_pad = self.period - (t % self.period)
            x = F.pad(x, (0, n_pad), "reflect")
            t = t + n_pad
        x = x.view(b, c, t // self.period, self.period)
        for l in self.convs:
            x = l(x)
            x = F.leaky_relu(x, LRELU_SLOPE)
            fmap.append(x)
        x = self.conv_post(x)
        fmap.append(x)
        x = torch.flatten(x, 1, -1)
        return x, fmap


class MultiPeriodDiscriminator(torch.nn.Module):
    def __init__(self):
        super(MultiPeriodDiscriminator, self).__init__()
        self.discriminators = nn.ModuleList([DiscriminatorP(2), DiscriminatorP(3)])

    def forward(self, y, y_hat):
        y_d_rs, y_d_gs, fmap_rs, fmap_gs = [], [], [], []
        for i, d in enumerate(self.discriminators):
            y_d_r, fmap_r = d(y)
            y_d_g, fmap_g = d(y_hat)
            y_d_rs.append(y_d_r)
            fmap_rs.append(fmap_r)
            y_d_gs.append(y_d_g)
            fmap_gs.append(fmap_g)
        return y_d_rs, y_d_gs, fmap_rs, fmap_gs


class DiscriminatorS(torch.nn.Module):
    def __init__(self, use_spectral_norm=False):
        super(DiscriminatorS, self).__init__()
        norm_f = weight_norm if use_spectral_norm == False else spectral_norm
        self.convs = nn.ModuleList([
            norm_f(Conv1d(1, 8, 15, 1, padding=7)),
            norm_f(Conv1d(8, 8, 41, 4, groups=4, padding=20)),
            norm_f(Conv1d(8, 16, 5, 1, padding=2)),
        ])
        self.conv_post = norm_f(Conv1d(16, 1, 3, 1, padding=1))

    def forward(self, x):
        fmap = []
        for l in self.convs:
            x = l(x)
            x = F.leaky_relu(x, LRELU_SLOPE)
            fmap.append(x)
        x = self.conv_post(x)
        fmap.append(x)
        x = torch.flatten(x, 1, -1)
        return x, fmap


class MultiScaleDiscriminator(torch.nn.Module):
    def __init__(self):
        super(MultiScaleDiscriminator, self).__init__()
        self.discriminators = nn.ModuleList([DiscriminatorS(use_spectral_norm=True), DiscriminatorS()])
        self.meanpools = nn.ModuleList([AvgPool1d(4, 2, padding=2)])

    def forward(self, y, y_hat):
        y_d_rs, y_d_gs, fmap_rs, fmap_gs = [], [], [], []
        for i, d in enumerate(self.discriminators):
            if i != 0:
                y = self.meanpools[i - 1](y)
                y_hat = self.meanpools[i - 1](y_hat)
            y_d_r, fmap_r = d(y)
            y_d_g, fmap_g = d(y_hat)
            y_d_rs.append(y_d_r)
            fmap_rs.append(fmap_r)
            y_d_gs.append(y_d_g)
            fmap_gs.append(fmap_g)
        return y_d_rs, y_d_gs, fmap_rs, fmap_gs


def feature_loss(fmap_r, fmap_g):
    loss = 0
    for dr, dg in zip(fmap_r, fmap_g):
        for rl, gl in zip(dr, dg):
            loss += torch.mean(torch.abs(rl - gl))
    return loss * 2


def discriminator_loss(disc_real_outputs, disc_generated_outputs):
    loss = 0
    r_losses = []
    g_losses = []
    for dr, dg in zip(disc_real_outputs, disc_generated_outputs):
        r_loss = torch.mean((1 - dr) ** 2)
        g_loss = torch.mean(dg ** 2)
        loss += (r_loss + g_loss)
        r_losses.append(r_loss.item())
        g_losses.append(g_loss.item())
    return loss, r_losses, g_losses


def generator_loss(disc_outputs):
    loss = 0
    gen_losses = []
    for dg in disc_outputs:
        l = torch.mean((1 - dg) ** 2)
        gen_losses.append(l)
        loss += l
    return loss, gen_losses


def dynamic_range_compression_torch(x, C=1, clip_val=1e-5):
    return torch.log(torch.clamp(x, min=clip_val) * C)


def mel_filterbank(sr, n_fft, n_mels, fmin, fmax):
    freqs = np.linspace(0, sr / 2, n_fft // 2 + 1)
    edges = np.linspace(fmin, fmax, n_mels + 2)
    fb = np.zeros((n_mels, n_fft // 2 + 1))
    for m in range(n_mels):
        lo, c, hi = edges[m], edges[m + 1], edges[m + 2]
        fb[m] = np.maximum(0, np.minimum((freqs - lo) / (c - lo), (hi - freqs) / (hi - c)))
    return fb


mel_basis = {}
hann_window = {}


def mel_spectrogram(y, n_fft, num_mels, sampling_rate, hop_size, win_size, fmin, fmax, center=False):
    global mel_basis, hann_window
    if str(fmax) + '_' + str(y.device) not in mel_basis:
        mel = mel_filterbank(sampling_rate, n_fft, num_mels, fmin, fmax)
        mel_basis[str(fmax) + '_' + str(y.device)] = torch.from_numpy(mel).float().to(y.device)
        hann_window[str(y.device)] = torch.hann_window(win_size).to(y.device)
    y = torch.nn.functional.pad(y.unsqueeze(1), (int((n_fft - hop_size) / 2), int((n_fft - hop_size) / 2)),
                                mode='reflect')
    y = y.squeeze(1)
    spec = torch.stft(y, n_fft, hop_length=hop_size, win_length=win_size, window=hann_window[str(y.device)],
                      center=center, pad_mode='reflect', normalized=False, onesided=True, return_complex=True)
    spec = torch.view_as_real(spec)
    spec = torch.sqrt(spec.pow(2).sum(-1) + (1e-9))
    spec = torch.matmul(mel_basis[str(fmax) + '_' + str(y.device)], spec)
    spec = dynamic_range_compression_torch(spec)
    return spec


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    rng = np.random.default_rng(1102)
    device = torch.device('cpu')
    h = {"num_mels": 8, "upsample_rates": [2, 2], "upsample_kernel_sizes": [4, 4],
         "upsample_initial_channel": 16, "resblock_kernel_sizes": [3, 5],
         "resblock_dilation_sizes": [[1, 3], [1, 3]], "n_fft": 16, "hop_size": 4, "win_size": 16,
         "sampling_rate": 800, "fmin": 0, "fmax": 400, "learning_rate": 2e-3,
         "adam_b1": 0.8, "adam_b2": 0.99, "lr_decay": 0.9}
    generator = Generator(h).to(device)
    mpd = MultiPeriodDiscriminator().to(device)
    msd = MultiScaleDiscriminator().to(device)
    models = {"g": generator, "mpd": mpd, "msd": msd}
    w = {}
    for name, m in models.items():
        if weights is not None:
            m.load_state_dict({k[len(name) + 1:]: torch.tensor(v) for k, v in weights.items()
                               if k.startswith(name + ".")})
        w.update({f"{name}.{k}": v.detach().numpy().copy() for k, v in m.state_dict().items()})
    optim_g = torch.optim.AdamW(generator.parameters(), h["learning_rate"], betas=[h["adam_b1"], h["adam_b2"]])
    optim_d = torch.optim.AdamW(itertools.chain(msd.parameters(), mpd.parameters()),
                                h["learning_rate"], betas=[h["adam_b1"], h["adam_b2"]])
    scheduler_g = torch.optim.lr_scheduler.ExponentialLR(optim_g, gamma=h["lr_decay"])
    scheduler_d = torch.optim.lr_scheduler.ExponentialLR(optim_d, gamma=h["lr_decay"])
    t = 32
    wavs = [np.tanh(rng.standard_normal((2, t)).cumsum(-1) * 0.3).astype(np.float32) for _ in range(2)]
    batches = []
    for y in wavs:
        y = torch.from_numpy(y)
        x = mel_spectrogram(y, h["n_fft"], h["num_mels"], h["sampling_rate"], h["hop_size"], h["win_size"],
                            h["fmin"], h["fmax"])
        batches.append((x, y, x))

    def train_step(x, y, y_mel):
        y = y.unsqueeze(1)
        y_g_hat = generator(x)
        y_g_hat_mel = mel_spectrogram(y_g_hat.squeeze(1), h["n_fft"], h["num_mels"], h["sampling_rate"],
                                      h["hop_size"], h["win_size"], h["fmin"], h["fmax"])
        optim_d.zero_grad()
        y_df_hat_r, y_df_hat_g, _, _ = mpd(y, y_g_hat.detach())
        loss_disc_f, losses_disc_f_r, losses_disc_f_g = discriminator_loss(y_df_hat_r, y_df_hat_g)
        y_ds_hat_r, y_ds_hat_g, _, _ = msd(y, y_g_hat.detach())
        loss_disc_s, losses_disc_s_r, losses_disc_s_g = discriminator_loss(y_ds_hat_r, y_ds_hat_g)
        loss_disc_all = loss_disc_s + loss_disc_f
        loss_disc_all.backward()
        optim_d.step()

        optim_g.zero_grad()
        loss_mel = F.l1_loss(y_mel, y_g_hat_mel) * 45
        y_df_hat_r, y_df_hat_g, fmap_f_r, fmap_f_g = mpd(y, y_g_hat)
        y_ds_hat_r, y_ds_hat_g, fmap_s_r, fmap_s_g = msd(y, y_g_hat)
        loss_fm_f = feature_loss(fmap_f_r, fmap_f_g)
        loss_fm_s = feature_loss(fmap_s_r, fmap_s_g)
        loss_gen_f, losses_gen_f = generator_loss(y_df_hat_g)
        loss_gen_s, losses_gen_s = generator_loss(y_ds_hat_g)
        loss_gen_all = loss_gen_s + loss_gen_f + loss_fm_s + loss_fm_f + loss_mel
        loss_gen_all.backward()
        optim_g.step()
        return loss_disc_all, loss_gen_all, loss_mel

    step = torch.compile(train_step) if compiled else train_step
    losses = []
    generator.train()
    mpd.train()
    msd.train()
    for epoch in range(2):
        for x, y, y_mel in batches:
            loss_disc_all, loss_gen_all, loss_mel = step(x.to(device), y.to(device), y_mel.to(device))
            losses += [loss_disc_all.item(), loss_gen_all.item(), loss_mel.item() / 45]
        scheduler_g.step()
        scheduler_d.step()
    generator.eval()
    generator.remove_weight_norm()
    with torch.no_grad():
        y_g_hat = generator(batches[0][0])
        audio = y_g_hat.squeeze()
        losses += audio.flatten().tolist()[:16]
        losses.append(float(audio.abs().mean()))
    losses.append(float(msd.discriminators[0].convs[0].weight.norm()))
    return {"losses": losses, "weights": w, "fn": step}
