# In the manner of small ViT and Megatron-style code: patches cut by ``nn.Unfold(kernel_size=p,
# stride=p)`` and ``.transpose(1, 2)`` (with ``F.unfold`` in the decoder's target), a
# ``@torch.jit.script`` fused ``bias_gelu`` (Megatron's tanh approximation written out)
# and a ``@torch.jit.script`` ``bias_dropout_add`` helper called inside the blocks with
# ``training`` passed in, a ``nn.Parameter`` class token and position embedding
# initialised by ``nn.init.trunc_normal_``, ``torch.einsum("bhqd,bhkd->bhqk", ...)``
# attention with ``.softmax(dim=-1)``, a reconstruction head folding patches back to an
# image with ``F.fold(x.transpose(1, 2), output_size, kernel_size=p, stride=p)`` beside
# the classification loss, ``torch.optim.RAdam`` and a ``PolynomialLR``, and
# ``model.requires_grad_(False)`` around an evaluation.
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


@torch.jit.script
def bias_gelu(bias, y):
    x = bias + y
    return x * 0.5 * (1.0 + torch.tanh(0.79788456 * x * (1 + 0.044715 * x * x)))


@torch.jit.script
def bias_dropout_add(x: torch.Tensor, bias: torch.Tensor, residual: torch.Tensor, prob: float, training: bool) -> torch.Tensor:
    out = torch.nn.functional.dropout(x + bias, p=prob, training=training)
    out = residual + out
    return out


class FusedMLP(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden, bias=False)
        self.fc1_bias = nn.Parameter(torch.zeros(hidden))
        self.fc2 = nn.Linear(hidden, dim, bias=False)
        self.fc2_bias = nn.Parameter(torch.zeros(dim))

    def forward(self, x):
        return self.fc2(bias_gelu(self.fc1_bias, self.fc1(x))), self.fc2_bias


class Attention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.scale = (dim // heads) ** -0.5
        self.qkv = nn.Linear(dim, dim * 3)
        self.proj = nn.Linear(dim, dim, bias=False)
        self.proj_bias = nn.Parameter(torch.zeros(dim))

    def forward(self, x):
        B, N, C = x.shape
        qkv = self.qkv(x).reshape(B, N, 3, self.heads, C // self.heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        attn = torch.einsum("bhqd,bhkd->bhqk", q, k) * self.scale
        attn = attn.softmax(dim=-1)
        out = torch.einsum("bhqk,bhkd->bhqd", attn, v).transpose(1, 2).reshape(B, N, C)
        return self.proj(out), self.proj_bias


class Block(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = Attention(dim, heads)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = FusedMLP(dim, dim * 2)
        self.drop = 0.0

    def forward(self, x):
        out, bias = self.attn(self.norm1(x))
        x = bias_dropout_add(out, bias, x, self.drop, self.training)
        out, bias = self.mlp(self.norm2(x))
        return bias_dropout_add(out, bias, x, self.drop, self.training)


class ViT(nn.Module):
    def __init__(self, image_size=8, patch_size=4, channels=1, dim=16, depth=2, heads=2, num_classes=3):
        super().__init__()
        self.patch_size = patch_size
        self.image_size = image_size
        num_patches = (image_size // patch_size) ** 2
        patch_dim = channels * patch_size ** 2
        self.to_patches = nn.Unfold(kernel_size=patch_size, stride=patch_size)
        self.patch_embed = nn.Linear(patch_dim, dim)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos_embed = nn.Parameter(torch.zeros(1, num_patches + 1, dim))
        nn.init.trunc_normal_(self.pos_embed, std=.02)
        nn.init.trunc_normal_(self.cls_token, std=.02)
        self.blocks = nn.Sequential(*[Block(dim, heads) for _ in range(depth)])
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, num_classes)
        self.decoder = nn.Linear(dim, patch_dim)

    def forward(self, img):
        patches = self.to_patches(img).transpose(1, 2)
        x = self.patch_embed(patches)
        cls_tokens = self.cls_token.expand(x.shape[0], -1, -1)
        x = torch.cat((cls_tokens, x), dim=1) + self.pos_embed
        x = self.norm(self.blocks(x))
        recon = F.fold(self.decoder(x[:, 1:]).transpose(1, 2), (self.image_size, self.image_size),
                       kernel_size=self.patch_size, stride=self.patch_size)
        return self.head(x[:, 0]), recon


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    rng = np.random.default_rng(1209)
    model = ViT()
    if weights is not None:
        model.load_state_dict({k: torch.tensor(v) for k, v in weights.items()})
    w = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    optimizer = torch.optim.RAdam(model.parameters(), lr=3e-3)
    scheduler = torch.optim.lr_scheduler.PolynomialLR(optimizer, total_iters=6, power=2.0)
    batches = [(torch.from_numpy(rng.standard_normal((4, 1, 8, 8)).astype(np.float32)),
                torch.from_numpy(rng.integers(0, 3, 4))) for _ in range(3)]

    def train_step(img, label):
        logits, recon = model(img)
        target = F.unfold(img, kernel_size=4, stride=4)
        recon_patches = F.unfold(recon, kernel_size=4, stride=4)
        loss = F.cross_entropy(logits, label) + F.mse_loss(recon_patches, target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss

    step = torch.compile(train_step) if compiled else train_step
    losses = []
    for epoch in range(2):
        model.train()
        for img, label in batches:
            losses.append(step(img, label).item())
            scheduler.step()
            losses.append(optimizer.param_groups[0]["lr"])
    model.eval()
    model.requires_grad_(False)
    logits, recon = model(batches[0][0])
    losses += [float(logits.abs().sum()), float(recon.abs().sum()), float(bias_gelu(torch.ones(3), torch.ones(3)).sum())]
    model.requires_grad_(True)
    return {"losses": losses, "weights": w, "fn": step}
