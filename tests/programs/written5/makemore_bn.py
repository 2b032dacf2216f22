# In the manner of Karpathy's nn-zero-to-hero makemore part 3 and part 4: an MLP over
# character contexts with parameters made by torch.randn(generator=g) scaled by
# (5/3)/fan_in**0.5, a hand-written batch norm (bngain, bnbias, bnmean_running and
# bnstd_running updated under torch.no_grad()), F.cross_entropy, a manual SGD update
# `p.data += -lr * p.grad`, split_loss evaluated with @torch.no_grad(), and part 4's manual
# backward pass through the same network compared to autograd with cmp() (torch.all and
# torch.allclose on .grad), retain_grad() on the intermediates.
# Written for dualgraph's tests with the public program's idioms, not copied from it.
# ruff: noqa
import numpy as np
import torch
import torch.nn.functional as F


def build_dataset(rng, n, block_size, vocab_size):
    X = rng.integers(0, vocab_size, (n, block_size))
    Y = (X.sum(1) + X[:, -1]) % vocab_size
    return torch.tensor(X), torch.tensor(Y)


def cmp(s, dt, t):
    ex = torch.all(dt == t.grad).item()
    app = torch.allclose(dt, t.grad, rtol=1e-4, atol=1e-6)
    maxdiff = (dt - t.grad).abs().max().item()
    return ex, app, maxdiff


def run(weights=None, compiled=False):
    rng = np.random.default_rng(5)
    vocab_size, block_size, n_embd, n_hidden = 12, 3, 6, 32
    Xtr, Ytr = build_dataset(rng, 256, block_size, vocab_size)
    Xdev, Ydev = build_dataset(rng, 64, block_size, vocab_size)
    g = torch.Generator().manual_seed(2147483647)
    C = torch.randn((vocab_size, n_embd), generator=g)
    W1 = torch.randn((n_embd * block_size, n_hidden), generator=g) * (5 / 3) / ((n_embd * block_size) ** 0.5)
    b1 = torch.randn(n_hidden, generator=g) * 0.1
    W2 = torch.randn((n_hidden, vocab_size), generator=g) * 0.1
    b2 = torch.randn(vocab_size, generator=g) * 0.1
    bngain = torch.randn((1, n_hidden)) * 0.1 + 1.0
    bnbias = torch.randn((1, n_hidden)) * 0.1
    names = ['C', 'W1', 'b1', 'W2', 'b2', 'bngain', 'bnbias']
    parameters = [C, W1, b1, W2, b2, bngain, bnbias]
    if weights is not None:
        for p, n in zip(parameters, names):
            p.copy_(torch.tensor(weights[n]))
    w = {n: p.numpy().copy() for n, p in zip(names, parameters)}
    bnmean_running = torch.zeros((1, n_hidden))
    bnstd_running = torch.ones((1, n_hidden))
    print(sum(p.nelement() for p in parameters))
    for p in parameters:
        p.requires_grad = True

    def train_step(Xb, Yb, lr):
        emb = C[Xb]
        embcat = emb.view(emb.shape[0], -1)
        hpreact = embcat @ W1 + b1
        bnmeani = hpreact.mean(0, keepdim=True)
        bnstdi = hpreact.std(0, keepdim=True)
        hpreact = bngain * (hpreact - bnmeani) / bnstdi + bnbias
        with torch.no_grad():
            bnmean_running.mul_(0.999).add_(0.001 * bnmeani)
            bnstd_running.mul_(0.999).add_(0.001 * bnstdi)
        h = torch.tanh(hpreact)
        logits = h @ W2 + b2
        loss = F.cross_entropy(logits, Yb)
        for p in parameters:
            p.grad = None
        loss.backward()
        for p in parameters:
            p.data += -lr * p.grad
        return loss

    step = torch.compile(train_step) if compiled else train_step
    lossi = []
    batch_size = 32
    for i in range(12):
        ix = torch.from_numpy(rng.integers(0, Xtr.shape[0], batch_size))
        Xb, Yb = Xtr[ix], Ytr[ix]
        lr = 0.1 if i < 8 else 0.01
        loss = step(Xb, Yb, lr)
        lossi.append(loss.log10().item())

    @torch.no_grad()
    def split_loss(split):
        x, y = {'train': (Xtr, Ytr), 'val': (Xdev, Ydev)}[split]
        emb = C[x]
        embcat = emb.view(emb.shape[0], -1)
        hpreact = embcat @ W1 + b1
        hpreact = bngain * (hpreact - bnmean_running) / bnstd_running + bnbias
        h = torch.tanh(hpreact)
        logits = h @ W2 + b2
        loss = F.cross_entropy(logits, y)
        return loss.item()

    lossi += [split_loss('train'), split_loss('val')]
    lossi += bnmean_running[0, :4].tolist() + bnstd_running[0, :4].tolist()

    # part 4: backprop by hand through the expanded forward pass
    n = batch_size
    ix = torch.from_numpy(rng.integers(0, Xtr.shape[0], n))
    Xb, Yb = Xtr[ix], Ytr[ix]

    def forward_manual(Xb, Yb):
        emb = C[Xb]
        embcat = emb.view(emb.shape[0], -1)
        hprebn = embcat @ W1 + b1
        bnmeani = 1 / n * hprebn.sum(0, keepdim=True)
        bndiff = hprebn - bnmeani
        bndiff2 = bndiff ** 2
        bnvar = 1 / (n - 1) * (bndiff2).sum(0, keepdim=True)
        bnvar_inv = (bnvar + 1e-5) ** -0.5
        bnraw = bndiff * bnvar_inv
        hpreact = bngain * bnraw + bnbias
        h = torch.tanh(hpreact)
        logits = h @ W2 + b2
        logit_maxes = logits.max(1, keepdim=True).values
        norm_logits = logits - logit_maxes
        counts = norm_logits.exp()
        counts_sum = counts.sum(1, keepdims=True)
        counts_sum_inv = counts_sum ** -1
        probs = counts * counts_sum_inv
        logprobs = probs.log()
        loss = -logprobs[range(n), Yb].mean()
        for p in parameters:
            p.grad = None
        for t in [logprobs, probs, counts, counts_sum, counts_sum_inv, norm_logits, logit_maxes,
                  logits, h, hpreact, bnraw, bnvar_inv, bnvar, bndiff2, bndiff, hprebn, bnmeani,
                  embcat, emb]:
            t.retain_grad()
        loss.backward()
        # manual backward of the fused cross-entropy and the batch norm
        dlogits = F.softmax(logits, 1)
        dlogits[range(n), Yb] -= 1
        dlogits /= n
        dh = dlogits @ W2.T
        dW2 = h.T @ dlogits
        db2 = dlogits.sum(0)
        dhpreact = (1.0 - h ** 2) * dh
        dbngain = (bnraw * dhpreact).sum(0, keepdim=True)
        dbnbias = dhpreact.sum(0, keepdim=True)
        dhprebn = bngain * bnvar_inv / n * (n * dhpreact - dhpreact.sum(0) - n / (n - 1) * bnraw * (dhpreact * bnraw).sum(0))
        dembcat = dhprebn @ W1.T
        dW1 = embcat.T @ dhprebn
        db1 = dhprebn.sum(0)
        demb = dembcat.view(emb.shape)
        dC = torch.zeros_like(C)
        for k in range(Xb.shape[0]):
            for j in range(Xb.shape[1]):
                ix = Xb[k, j]
                dC[ix] += demb[k, j]
        out = [loss.item()]
        for name, d, t in [('logits', dlogits, logits), ('h', dh, h), ('W2', dW2, W2), ('b2', db2, b2),
                           ('hpreact', dhpreact, hpreact), ('bngain', dbngain, bngain),
                           ('bnbias', dbnbias, bnbias), ('hprebn', dhprebn, hprebn),
                           ('W1', dW1, W1), ('b1', db1, b1), ('C', dC, C)]:
            ex, app, maxdiff = cmp(name, d, t)
            out.append(float(app))
        out.append(float(W1.grad.abs().sum()))
        return out

    lossi += forward_manual(Xb, Yb)
    return {"losses": lossi, "weights": w, "fn": step}
