# In the manner of training scripts that accumulate gradients over micro-batches
# (loss / accumulation_steps, optimizer.zero_grad(set_to_none=True) after each update),
# use AdamW with parameter groups (no weight decay on biases and norms) under a linear
# warmup LambdaLR, and save a checkpoint dict mid-run (torch.save of the model's,
# optimizer's and scheduler's state dicts), then build everything afresh, torch.load it
# and resume.
# Written for dualgraph's tests with the public programs' idioms, not copied from them.
# ruff: noqa
import os
import tempfile

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class Classifier(nn.Module):
    def __init__(self, d_in=10, d_hidden=32, n_classes=4):
        super().__init__()
        self.fc1 = nn.Linear(d_in, d_hidden)
        self.norm = nn.LayerNorm(d_hidden)
        self.fc2 = nn.Linear(d_hidden, n_classes)

    def forward(self, x):
        return self.fc2(F.gelu(self.norm(self.fc1(x))))


def configure_optimizer(model, lr, weight_decay):
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        if p.dim() < 2 or "norm" in name:
            no_decay.append(p)
        else:
            decay.append(p)
    groups = [{"params": decay, "weight_decay": weight_decay},
              {"params": no_decay, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95))


def build(warmup):
    model = Classifier()
    optimizer = configure_optimizer(model, lr=3e-3, weight_decay=0.1)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: min(1.0, (step + 1) / warmup))
    return model, optimizer, scheduler


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    accumulation_steps, warmup = 4, 3
    model, optimizer, scheduler = build(warmup)
    if weights is not None:
        model.load_state_dict({k: torch.tensor(v) for k, v in weights.items()})
    w = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    rng = np.random.default_rng(0)
    X = rng.standard_normal((96, 10)).astype(np.float32)
    Y = (X[:, :4] + 0.3 * X[:, 4:8]).argmax(1)
    loader = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(torch.from_numpy(X), torch.from_numpy(Y)), batch_size=8)

    def micro_step(xb, yb):
        logits = model(xb)
        loss = F.cross_entropy(logits, yb)
        loss = loss / accumulation_steps
        loss.backward()
        return loss

    step = torch.compile(micro_step) if compiled else micro_step
    path = os.path.join(tempfile.mkdtemp(), "checkpoint.pt")
    losses = []
    for epoch in range(2):
        running = 0.0
        for i, (xb, yb) in enumerate(loader):
            running += step(xb, yb).item()
            if (i + 1) % accumulation_steps == 0:
                torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad(set_to_none=True)
                losses.append(running)
                running = 0.0
        losses.append(scheduler.get_last_lr()[0])
        if epoch == 0:
            torch.save({"epoch": epoch, "model_state_dict": model.state_dict(),
                        "optimizer_state_dict": optimizer.state_dict(),
                        "scheduler_state_dict": scheduler.state_dict(),
                        "loss": losses[-2]}, path)
            # Resume from the checkpoint: everything built afresh.
            model, optimizer, scheduler = build(warmup)
            checkpoint = torch.load(path)
            model.load_state_dict(checkpoint["model_state_dict"])
            optimizer.load_state_dict(checkpoint["optimizer_state_dict"])
            scheduler.load_state_dict(checkpoint["scheduler_state_dict"])
            model.train()
            losses.append(checkpoint["loss"])
            losses.append(checkpoint["epoch"])
    os.remove(path)
    model.eval()
    with torch.no_grad():
        pred = model(torch.from_numpy(X)).argmax(dim=1)
        losses.append((pred == torch.from_numpy(Y)).float().mean().item())
    return {"losses": losses, "weights": w, "fn": step}
