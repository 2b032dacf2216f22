# In the manner of Keller Jordan's Muon optimizer and the modded-nanogpt speedrun
# (``train_gpt.py``): ``@torch.compile``-decorated helpers inside the program
# (``zeropower_via_newtonschulz5``: the quintic Newton-Schulz iteration with ``a, b, c =
# (3.4445, -4.7750, 2.0315)``, ``X /= (X.norm() + eps)``, ``X = X.T`` for tall matrices,
# ``A = X @ X.T``, ``B = b * A + c * A @ A``, ``X = a * X + B @ X``; and a compiled
# ``rms_norm`` by ``F.rms_norm(x, (x.size(-1),))``), a ``Muon(torch.optim.Optimizer)``
# subclass (``@torch.no_grad() step`` over ``self.param_groups``, a ``momentum_buffer`` in
# ``self.state[p]`` created by ``torch.zeros_like``, ``buf.mul_(momentum).add_(g)``, Nesterov
# ``g.add(buf, alpha=momentum)``, ``g *= max(1, g.size(0) / g.size(1)) ** 0.5``,
# ``p.add_(g, alpha=-lr)``), parameters split by ``p.ndim == 2`` between Muon and AdamW
# (embedding and head in Adam with ``betas=(0.8, 0.95), fused=False``), a GPT block with
# ``F.scaled_dot_product_attention(is_causal=True)``, ``F.relu(x).square()`` MLP, a logit
# soft-cap ``30 * torch.tanh(logits / 30)``, ``CastedLinear`` zero-initialised projections
# by ``.weight.data.zero_()``, and a learning-rate schedule applied through
# ``group["lr"] = group["initial_lr"] * get_lr(step)`` for every optimizer.
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


@torch.compile
def zeropower_via_newtonschulz5(G, steps=5, eps=1e-7):
    assert len(G.shape) == 2
    a, b, c = (3.4445, -4.7750, 2.0315)
    X = G.float()
    X /= (X.norm() + eps)
    if G.size(0) > G.size(1):
        X = X.T
    for _ in range(steps):
        A = X @ X.T
        B = b * A + c * A @ A
        X = a * X + B @ X
    if G.size(0) > G.size(1):
        X = X.T
    return X


@torch.compile
def rms_norm(x):
    return F.rms_norm(x, (x.size(-1),))


class Muon(torch.optim.Optimizer):
    def __init__(self, params, lr=0.02, momentum=0.95, nesterov=True, ns_steps=5):
        defaults = dict(lr=lr, momentum=momentum, nesterov=nesterov, ns_steps=ns_steps)
        super().__init__(params, defaults)

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            lr = group['lr']
            momentum = group['momentum']
            for p in group['params']:
                g = p.grad
                if g is None:
                    continue
                state = self.state[p]
                if 'momentum_buffer' not in state:
                    state['momentum_buffer'] = torch.zeros_like(g)
                buf = state['momentum_buffer']
                buf.mul_(momentum).add_(g)
                g = g.add(buf, alpha=momentum) if group['nesterov'] else buf
                g = zeropower_via_newtonschulz5(g, steps=group['ns_steps'])
                g *= max(1, g.size(0) / g.size(1)) ** 0.5
                p.add_(g, alpha=-lr)


class CastedLinear(nn.Linear):
    def __init__(self, in_features, out_features):
        super().__init__(in_features, out_features, bias=False)

    def forward(self, x):
        return F.linear(x, self.weight.to(x.dtype))


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, num_heads):
        super().__init__()
        self.num_heads = num_heads
        self.head_dim = dim // num_heads
        self.c_q = CastedLinear(dim, dim)
        self.c_k = CastedLinear(dim, dim)
        self.c_v = CastedLinear(dim, dim)
        self.c_proj = CastedLinear(dim, dim)
        self.c_proj.weight.data.zero_()

    def forward(self, x):
        B, T = x.size(0), x.size(1)
        q = self.c_q(x).view(B, T, self.num_heads, -1)
        k = self.c_k(x).view(B, T, self.num_heads, -1)
        v = self.c_v(x).view(B, T, self.num_heads, -1)
        q, k = rms_norm(q), rms_norm(k)
        y = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
        y = y.transpose(1, 2).contiguous().view_as(x)
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.c_fc = CastedLinear(dim, 4 * dim)
        self.c_proj = CastedLinear(4 * dim, dim)
        self.c_proj.weight.data.zero_()

    def forward(self, x):
        x = self.c_fc(x)
        x = F.relu(x).square()
        return self.c_proj(x)


class Block(nn.Module):
    def __init__(self, dim, num_heads):
        super().__init__()
        self.attn = CausalSelfAttention(dim, num_heads)
        self.mlp = MLP(dim)

    def forward(self, x):
        x = x + self.attn(rms_norm(x))
        x = x + self.mlp(rms_norm(x))
        return x


class GPT(nn.Module):
    def __init__(self, vocab_size=16, num_layers=2, num_heads=2, model_dim=8):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, model_dim)
        self.blocks = nn.ModuleList([Block(model_dim, num_heads) for _ in range(num_layers)])
        self.lm_head = CastedLinear(model_dim, vocab_size)

    def forward(self, idx, target):
        x = rms_norm(self.embed(idx))
        for block in self.blocks:
            x = block(x)
        x = rms_norm(x)
        logits = self.lm_head(x)
        logits = 30 * torch.tanh(logits / 30)
        logits = logits.float()
        return F.cross_entropy(logits.view(-1, logits.size(-1)), target.view(-1))


def run(weights=None, compiled=False):
    torch.manual_seed(0)
    rng = np.random.default_rng(1309)
    model = GPT()
    if weights is not None:
        model.load_state_dict({k: torch.tensor(v) for k, v in weights.items()})
    w = {k: v.detach().numpy().copy() for k, v in model.state_dict().items()}
    hidden_matrix_params = [p for p in model.blocks.parameters() if p.ndim == 2]
    adam_params = [dict(params=[model.lm_head.weight], lr=0.008), dict(params=[model.embed.weight], lr=0.06)]
    optimizer1 = torch.optim.Adam(adam_params, betas=(0.8, 0.95), eps=1e-10, fused=False)
    optimizer2 = Muon(hidden_matrix_params, lr=0.05, momentum=0.95)
    optimizers = [optimizer1, optimizer2]
    for opt in optimizers:
        for group in opt.param_groups:
            group["initial_lr"] = group["lr"]
    num_iterations, cooldown_frac = 8, 0.5

    def get_lr(step):
        x = step / num_iterations
        if x < 1 - cooldown_frac:
            return 1.0
        w = (1 - x) / cooldown_frac
        return w * 1.0 + (1 - w) * 0.1

    batches = [tuple(torch.from_numpy(a) for a in pair) for pair in
               [(s[:, :-1].copy(), s[:, 1:].copy()) for s in [rng.integers(0, 16, (2, 9)) for _ in range(4)]]]

    def train_step(inputs, targets):
        loss = model(inputs, targets)
        loss.backward()
        for opt in optimizers:
            opt.step()
        model.zero_grad(set_to_none=True)
        return loss

    step_fn = torch.compile(train_step) if compiled else train_step
    losses = []
    for step in range(num_iterations):
        inputs, targets = batches[step % len(batches)]
        for opt in optimizers:
            for group in opt.param_groups:
                group["lr"] = group["initial_lr"] * get_lr(step)
        loss = step_fn(inputs, targets)
        losses.append(loss.item())
    return {"losses": losses, "weights": w, "fn": step_fn}
