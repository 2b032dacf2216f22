# In the manner of public LoRA-from-scratch code (and of peft's LoraLayer): a LoRALinear
# wrapping a frozen nn.Linear (requires_grad_(False)), A initialised with
# kaiming_uniform_(a=math.sqrt(5)) and B with zeros_, the scaling alpha / r, a recursive
# replace of the model's Linear layers through named_children/setattr, AdamW over only the
# trainable parameters (filter(lambda p: p.requires_grad, ...)) in two parameter groups,
# a count of trainable parameters, and merging the adapter into the base weight under
# torch.no_grad for inference.
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class LoRALinear(nn.Module):
    def __init__(self, base: nn.Linear, r: int = 4, alpha: float = 8.0, dropout: float = 0.0):
        super().__init__()
        self.base = base
        self.r = r
        self.scaling = alpha / r
        self.lora_A = nn.Parameter(torch.empty(r, base.in_features))
        self.lora_B = nn.Parameter(torch.empty(base.out_features, r))
        self.lora_dropout = nn.Dropout(dropout) if dropout > 0 else nn.Identity()
        nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))
        nn.init.zeros_(self.lora_B)
        self.base.weight.requires_grad_(False)
        if self.base.bias is not None:
            self.base.bias.requires_grad_(False)
        self.merged = False

    def forward(self, x):
        result = self.base(x)
        if not self.merged:
            result = result + (self.lora_dropout(x) @ self.lora_A.T @ self.lora_B.T) * self.scaling
        return result

    @torch.no_grad()
    def merge(self):
        if not self.merged:
            self.base.weight.data += (self.lora_B @ self.lora_A) * self.scaling
            self.merged = True


def inject_lora(module, r=4, alpha=8.0, target=("q", "v")):
    for name, child in module.named_children():
        if isinstance(child, nn.Linear) and name in target:
            setattr(module, name, LoRALinear(child, r=r, alpha=alpha))
        else:
            inject_lora(child, r, alpha, target)
    return module


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.q = nn.Linear(d, d)
        self.k = nn.Linear(d, d)
        self.v = nn.Linear(d, d)
        self.o = nn.Linear(d, d)
        self.ln = nn.LayerNorm(d)

    def forward(self, x):
        h = self.ln(x)
        att = torch.softmax(self.q(h) @ self.k(h).transpose(-2, -1) / math.sqrt(h.size(-1)), dim=-1)
        return x + self.o(att @ self.v(h))


class Classifier(nn.Module):
    def __init__(self, d=16, n_classes=3):
        super().__init__()
        self.embed = nn.Linear(4, d)
        self.blocks = nn.ModuleList([Block(d) for _ in range(2)])
        self.head = nn.Linear(d, n_classes)

    def forward(self, x):
        x = self.embed(x)
        for blk in self.blocks:
            x = blk(x)
        return self.head(x.mean(dim=1))


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    model = Classifier()
    for p in model.parameters():
        p.requires_grad = False
    inject_lora(model)
    for p in model.head.parameters():
        p.requires_grad = True
    if weights is not None:
        model.load_state_dict({k: torch.tensor(v) for k, v in weights.items()})
    w = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    # a start with B != 0, as after some training, so the adapter's output matters at once
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, LoRALinear):
                m.lora_B.copy_(torch.linspace(-0.1, 0.1, m.lora_B.numel()).view_as(m.lora_B))
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    total = sum(p.numel() for p in model.parameters())
    losses = [trainable, total]
    lora_params = [p for n, p in model.named_parameters() if "lora_" in n]
    head_params = [p for n, p in model.named_parameters() if n.startswith("head")]
    optimizer = torch.optim.AdamW([
        {"params": lora_params, "lr": 1e-2, "weight_decay": 0.0},
        {"params": head_params},
    ], lr=3e-3, weight_decay=0.01)
    assert all(p.requires_grad for p in filter(lambda p: p.requires_grad, model.parameters()))
    rng = np.random.default_rng(0)
    X = rng.standard_normal((32, 6, 4)).astype(np.float32)
    Y = (X.sum(axis=(1, 2)) > 0).astype(np.int64) + (X[:, 0, 0] > 1).astype(np.int64)

    def train_step(x, y):
        logits = model(x)
        loss = F.cross_entropy(logits, y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        return loss

    step = torch.compile(train_step) if compiled else train_step
    model.train()
    for epoch in range(3):
        for b in range(0, 32, 8):
            losses.append(step(torch.from_numpy(X[b:b + 8]), torch.from_numpy(Y[b:b + 8])).item())
    frozen = model.blocks[0].q.base.weight
    losses.append(float(frozen.grad is None))
    model.eval()
    with torch.no_grad():
        before = model(torch.from_numpy(X))
    for m in model.modules():
        if isinstance(m, LoRALinear):
            m.merge()
    with torch.no_grad():
        after = model(torch.from_numpy(X))
    losses += [float(before.sum()), float((before - after).abs().max() < 1e-4)]
    return {"losses": losses, "weights": w, "fn": step}
