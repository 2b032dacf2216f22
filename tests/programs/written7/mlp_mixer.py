# In the manner of the plain-PyTorch MLP-Mixer reimplementations (lucidrains' mlp-mixer
# without einops, and timm's MixerBlock; MIT and Apache-2.0 licences): a patch stem by
# ``nn.Conv2d(kernel_size=patch, stride=patch)`` then ``x.flatten(2).transpose(1, 2)``,
# token mixing by ``transpose(1, 2)`` around an MLP over the patch axis, channel mixing
# by an MLP over features, ``nn.LayerNorm`` before each, ``nn.GELU``, a DropPath-free
# residual, the head over ``x.mean(dim=1)``, ``nn.init.xavier_uniform_`` and
# ``nn.init.normal_(std=1e-6)`` biases via ``named_modules``, a ``functools.partial``
# norm layer, mixup of a batch with its reverse (``torch.flip(x, dims=[0])``) and a
# soft-target cross-entropy (``torch.sum(-target * F.log_softmax(x, dim=-1), dim=-1)``),
# timm's ``amp_autocast = partial(torch.autocast, ..., enabled=False)`` around the forward,
# and Adam with ``amsgrad=True`` under a LambdaLR warmup.
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
from functools import partial

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class Mlp(nn.Module):
    def __init__(self, in_features, hidden_features=None, out_features=None, act_layer=nn.GELU, drop=0.):
        super().__init__()
        out_features = out_features or in_features
        hidden_features = hidden_features or in_features
        self.fc1 = nn.Linear(in_features, hidden_features)
        self.act = act_layer()
        self.drop1 = nn.Dropout(drop)
        self.fc2 = nn.Linear(hidden_features, out_features)
        self.drop2 = nn.Dropout(drop)

    def forward(self, x):
        x = self.fc1(x)
        x = self.act(x)
        x = self.drop1(x)
        x = self.fc2(x)
        x = self.drop2(x)
        return x


class MixerBlock(nn.Module):
    def __init__(self, dim, seq_len, mlp_ratio=(0.5, 4.0), mlp_layer=Mlp,
                 norm_layer=partial(nn.LayerNorm, eps=1e-6), act_layer=nn.GELU, drop=0.):
        super().__init__()
        tokens_dim, channels_dim = [int(x * dim) for x in mlp_ratio]
        self.norm1 = norm_layer(dim)
        self.mlp_tokens = mlp_layer(seq_len, tokens_dim, act_layer=act_layer, drop=drop)
        self.norm2 = norm_layer(dim)
        self.mlp_channels = mlp_layer(dim, channels_dim, act_layer=act_layer, drop=drop)

    def forward(self, x):
        x = x + self.mlp_tokens(self.norm1(x).transpose(1, 2)).transpose(1, 2)
        x = x + self.mlp_channels(self.norm2(x))
        return x


class PatchEmbed(nn.Module):
    def __init__(self, img_size=16, patch_size=4, in_chans=3, embed_dim=16, flatten=True):
        super().__init__()
        self.img_size = (img_size, img_size)
        self.patch_size = (patch_size, patch_size)
        self.grid_size = (self.img_size[0] // self.patch_size[0], self.img_size[1] // self.patch_size[1])
        self.num_patches = self.grid_size[0] * self.grid_size[1]
        self.flatten = flatten
        self.proj = nn.Conv2d(in_chans, embed_dim, kernel_size=patch_size, stride=patch_size)
        self.norm = nn.Identity()

    def forward(self, x):
        B, C, H, W = x.shape
        assert H == self.img_size[0], f"Input image height ({H}) doesn't match model ({self.img_size[0]})."
        x = self.proj(x)
        if self.flatten:
            x = x.flatten(2).transpose(1, 2)
        x = self.norm(x)
        return x


class MlpMixer(nn.Module):
    def __init__(self, num_classes=3, img_size=16, in_chans=3, patch_size=4, num_blocks=2, embed_dim=16,
                 mlp_ratio=(0.5, 4.0), block_layer=MixerBlock, mlp_layer=Mlp,
                 norm_layer=partial(nn.LayerNorm, eps=1e-6), act_layer=nn.GELU, drop_rate=0.):
        super().__init__()
        self.num_classes = num_classes
        self.num_features = self.embed_dim = embed_dim
        self.stem = PatchEmbed(img_size=img_size, patch_size=patch_size, in_chans=in_chans, embed_dim=embed_dim)
        self.blocks = nn.Sequential(*[
            block_layer(embed_dim, self.stem.num_patches, mlp_ratio, mlp_layer=mlp_layer,
                        norm_layer=norm_layer, act_layer=act_layer, drop=drop_rate)
            for _ in range(num_blocks)])
        self.norm = norm_layer(embed_dim)
        self.head = nn.Linear(embed_dim, self.num_classes) if num_classes > 0 else nn.Identity()
        for n, m in self.named_modules():
            _init_weights(m, n)

    def forward_features(self, x):
        x = self.stem(x)
        x = self.blocks(x)
        x = self.norm(x)
        return x

    def forward(self, x):
        x = self.forward_features(x)
        x = x.mean(dim=1)
        return self.head(x)


def _init_weights(module: nn.Module, name: str):
    if isinstance(module, nn.Linear):
        if name.startswith('head'):
            nn.init.zeros_(module.weight)
            nn.init.zeros_(module.bias)
        else:
            nn.init.xavier_uniform_(module.weight)
            if module.bias is not None:
                if 'mlp' in name:
                    nn.init.normal_(module.bias, std=1e-6)
                else:
                    nn.init.zeros_(module.bias)
    elif isinstance(module, nn.Conv2d):
        nn.init.kaiming_normal_(module.weight, mode='fan_out', nonlinearity='relu')
        if module.bias is not None:
            nn.init.zeros_(module.bias)
    elif isinstance(module, (nn.LayerNorm, nn.BatchNorm2d, nn.GroupNorm)):
        nn.init.ones_(module.weight)
        nn.init.zeros_(module.bias)


def one_hot(x, num_classes, on_value=1., off_value=0.):
    x = x.long().view(-1, 1)
    return torch.full((x.size()[0], num_classes), off_value, device=x.device).scatter_(1, x, on_value)


def mixup_target(target, num_classes, lam=1., smoothing=0.0):
    off_value = smoothing / num_classes
    on_value = 1. - smoothing + off_value
    y1 = one_hot(target, num_classes, on_value=on_value, off_value=off_value)
    y2 = one_hot(target.flip(0), num_classes, on_value=on_value, off_value=off_value)
    return y1 * lam + y2 * (1. - lam)


class SoftTargetCrossEntropy(nn.Module):
    def forward(self, x: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        loss = torch.sum(-target * F.log_softmax(x, dim=-1), dim=-1)
        return loss.mean()


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    rng = np.random.default_rng(63)
    model = MlpMixer()
    if weights is not None:
        model.load_state_dict({k: torch.tensor(v) for k, v in weights.items()})
    w = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    criterion = SoftTargetCrossEntropy()
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3, amsgrad=True)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda epoch: min(1.0, (epoch + 1) / 3))
    amp_autocast = partial(torch.autocast, device_type="cpu", dtype=torch.bfloat16, enabled=False)
    lams = rng.beta(0.8, 0.8, size=9).tolist()
    data = [(torch.tensor(rng.normal(size=(4, 3, 16, 16)).astype(np.float32)),
             torch.tensor(rng.integers(0, 3, size=4))) for _ in range(3)]

    def train_step(x, target, lam):
        x = x * lam + torch.flip(x, dims=[0]) * (1. - lam)
        target = mixup_target(target, 3, lam, smoothing=0.1)
        with amp_autocast():
            output = model(x)
            loss = criterion(output, target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss

    step = torch.compile(train_step) if compiled else train_step
    losses = [model.stem.num_patches, len(model.blocks)]
    for epoch in range(3):
        for i, (x, target) in enumerate(data):
            lam = torch.tensor(lams[3 * epoch + i], dtype=torch.float32)
            losses.append(step(x, target, lam).item())
        scheduler.step()
    model.eval()
    with torch.no_grad():
        losses += model(data[0][0]).flatten().tolist()
    return {"losses": losses, "weights": w, "fn": step}
