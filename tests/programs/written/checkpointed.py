# In the manner of activation-checkpointing examples (a deep MLP whose blocks run through
# torch.utils.checkpoint, a logging helper kept out of torch.compile with
# torch.compiler.disable, and an evaluation under torch.random.fork_rng).
# Written for dualgraph's tests with the public programs' idioms, not copied from them.
# ruff: noqa
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint, checkpoint_sequential


class Block(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.fc1 = nn.Linear(dim, dim * 2)
        self.fc2 = nn.Linear(dim * 2, dim)

    def forward(self, x):
        return x + self.fc2(F.gelu(self.fc1(self.norm(x))))


class DeepMLP(nn.Module):
    def __init__(self, dim=16, depth=4, n_out=3):
        super().__init__()
        self.stem = nn.Linear(8, dim)
        self.blocks = nn.Sequential(*[Block(dim) for _ in range(depth)])
        self.head = nn.Linear(dim, n_out)
        self.use_checkpoint = True

    def forward(self, x):
        # The classic pitfall: the reentrant variant on the raw input (which requires no
        # grad) records no history, so the stem is never trained.
        h = checkpoint(self.stem, x, use_reentrant=True)
        if self.use_checkpoint:
            h = h.requires_grad_()
            h = checkpoint_sequential(self.blocks, 2, h, use_reentrant=False)
            return checkpoint(self.head, h, use_reentrant=False)
        return self.head(self.blocks(h))


grad_norms = []


@torch.compiler.disable
def log_grad_norm(model):
    total = 0.0
    for p in model.parameters():
        if p.grad is not None:
            total += p.grad.norm().item() ** 2
    grad_norms.append(total ** 0.5)


def run(weights=None, compiled=False):
    import warnings
    torch.manual_seed(0)
    model = DeepMLP()
    if weights is not None:
        model.load_state_dict({k: torch.tensor(v) for k, v in weights.items()})
    w = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    rng = np.random.default_rng(0)
    x = torch.tensor(rng.standard_normal((10, 12, 8)).astype(np.float32))
    y = torch.tensor(rng.integers(0, 3, (10, 12)))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    stem_before = model.stem.weight.detach().clone()

    def train_step(xb, yb):
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(xb), yb)
        loss.backward()
        opt.step()
        return loss

    step = torch.compile(train_step) if compiled else train_step
    losses = []
    del grad_norms[:]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i in range(x.shape[0]):
            losses.append(step(x[i], y[i]).item())
            log_grad_norm(model)
    losses += grad_norms
    losses.append(float(torch.equal(model.stem.weight, stem_before)))
    model.eval()
    with torch.no_grad(), torch.random.fork_rng():
        noise = torch.rand(12, 8)  # drawn and forgotten: the stream is put back
        model.use_checkpoint = False
        losses.append(F.cross_entropy(model(x[0]), y[0]).item())
    return {"losses": losses, "weights": w, "fn": step}
