"""Hand-written NumPy references for the model workloads (issue 12): forward, backward and
Adam written out by hand, as a careful NumPy programmer would, with no framework.

They are the "hand-written NumPy" column of the benchmarks, and the test suite checks
their gradients against dualgraph's (``tests/product/test_model_workloads.py``), so the
reference is known to compute the same step. Parameters are a dict keyed by dualgraph's
parameter names (``dict(net.named_parameters())`` as arrays), so every implementation can
start from the same values.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view
from scipy.special import erf

Params = dict[str, np.ndarray]


# ------------------------------------------------------------------------ shared pieces
def _cross_entropy(logits: np.ndarray, t: np.ndarray) -> tuple[float, np.ndarray]:
    """Mean cross-entropy of (N, C) logits against int classes, and its gradient."""
    n = logits.shape[0]
    z = logits - logits.max(axis=1, keepdims=True)
    e = np.exp(z)
    s = e.sum(axis=1, keepdims=True)
    loss = float(np.log(s[:, 0]).sum() - z[np.arange(n), t].sum()) / n
    g = e / s
    g[np.arange(n), t] -= 1
    return loss, (g / n).astype(logits.dtype)


def adam(params: Params, lr: float, betas: tuple = (0.9, 0.999), eps: float = 1e-8
         ) -> Callable[[Params], None]:
    """``update(grads)`` applies one Adam step in place (PyTorch's formula)."""
    m = {k: np.zeros_like(v) for k, v in params.items()}
    v2 = {k: np.zeros_like(v) for k, v in params.items()}
    b1, b2 = betas
    state = {"t": 0}

    def update(grads: Params) -> None:
        state["t"] += 1
        t = state["t"]
        bc1, bc2 = 1 - b1 ** t, np.sqrt(1 - b2 ** t)
        for k, p in params.items():
            g = grads[k]
            m[k] *= b1
            m[k] += (1 - b1) * g
            v2[k] *= b2
            v2[k] += (1 - b2) * g * g
            p -= (lr / bc1) * m[k] / (np.sqrt(v2[k]) / bc2 + eps)

    return update


def _linear_back(g: np.ndarray, x: np.ndarray, w: np.ndarray) -> tuple:
    """Gradients of ``x @ w.T + b`` for 2-D ``x``: (input, weight, bias)."""
    return g @ w, g.T @ x, g.sum(axis=0)


# --------------------------------------------------------------------------------- cnn
def _im2col(x: np.ndarray, k: int, pad: int) -> np.ndarray:
    """(N, C, H, W) -> (N*Ho*Wo, C*k*k) patches of a stride-1 k x k convolution."""
    if pad:
        x = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    win = sliding_window_view(x, (k, k), axis=(2, 3))  # N, C, Ho, Wo, k, k
    n, c, ho, wo = win.shape[:4]
    return win.transpose(0, 2, 3, 1, 4, 5).reshape(n * ho * wo, c * k * k)


def _conv(x: np.ndarray, w: np.ndarray, b: np.ndarray, pad: int) -> tuple:
    n, _, h, wd = x.shape
    o, _, k, _ = w.shape
    ho, wo = h + 2 * pad - k + 1, wd + 2 * pad - k + 1
    cols = _im2col(x, k, pad)
    y = cols @ w.reshape(o, -1).T + b
    return y.reshape(n, ho, wo, o).transpose(0, 3, 1, 2), cols


def _conv_back(g: np.ndarray, cols: np.ndarray, x_shape: tuple, w: np.ndarray, pad: int,
               need_input: bool) -> tuple:
    n, c, h, wd = x_shape
    o, _, k, _ = w.shape
    g2 = g.transpose(0, 2, 3, 1).reshape(-1, o)
    gw = (g2.T @ cols).reshape(w.shape)
    gb = g2.sum(axis=0)
    if not need_input:
        return None, gw, gb
    ho, wo = g.shape[2], g.shape[3]
    gc = (g2 @ w.reshape(o, -1)).reshape(n, ho, wo, c, k, k)
    gx = np.zeros((n, c, h + 2 * pad, wd + 2 * pad), g.dtype)
    for i in range(k):
        for j in range(k):
            gx[:, :, i:i + ho, j:j + wo] += gc[:, :, :, :, i, j].transpose(0, 3, 1, 2)
    return gx[:, :, pad:pad + h, pad:pad + wd], gw, gb


def _pool(x: np.ndarray) -> tuple:
    """2 x 2 max pooling, stride 2: the output and each window's argmax (first max)."""
    n, c, h, w = x.shape
    win = x.reshape(n, c, h // 2, 2, w // 2, 2).transpose(0, 1, 2, 4, 3, 5)
    win = win.reshape(n, c, h // 2, w // 2, 4)
    arg = win.argmax(axis=-1)
    return np.take_along_axis(win, arg[..., None], -1)[..., 0], arg


def _pool_back(g: np.ndarray, arg: np.ndarray) -> np.ndarray:
    n, c, h2, w2 = g.shape
    win = np.zeros((n, c, h2, w2, 4), g.dtype)
    np.put_along_axis(win, arg[..., None], g[..., None], -1)
    win = win.reshape(n, c, h2, w2, 2, 2).transpose(0, 1, 2, 4, 3, 5)
    return win.reshape(n, c, 2 * h2, 2 * w2)


def cnn_loss_and_grads(p: Params, x: np.ndarray, t: np.ndarray) -> tuple[float, Params]:
    """The LeNet workload's loss and parameter gradients (names as in `cnn_model`)."""
    c1, cols1 = _conv(x, p["0.weight"], p["0.bias"], 2)
    r1 = np.maximum(c1, 0)
    p1, a1 = _pool(r1)
    c2, cols2 = _conv(p1, p["3.weight"], p["3.bias"], 0)
    r2 = np.maximum(c2, 0)
    p2, a2 = _pool(r2)
    f = p2.reshape(p2.shape[0], -1)
    h1 = f @ p["7.weight"].T + p["7.bias"]
    z1 = np.maximum(h1, 0)
    h2 = z1 @ p["9.weight"].T + p["9.bias"]
    z2 = np.maximum(h2, 0)
    out = z2 @ p["11.weight"].T + p["11.bias"]
    loss, g = _cross_entropy(out, t)
    grads: Params = {}
    g, grads["11.weight"], grads["11.bias"] = _linear_back(g, z2, p["11.weight"])
    g = g * (h2 > 0)
    g, grads["9.weight"], grads["9.bias"] = _linear_back(g, z1, p["9.weight"])
    g = g * (h1 > 0)
    g, grads["7.weight"], grads["7.bias"] = _linear_back(g, f, p["7.weight"])
    g = _pool_back(g.reshape(p2.shape), a2) * (c2 > 0)
    g, grads["3.weight"], grads["3.bias"] = _conv_back(g, cols2, p1.shape, p["3.weight"], 0,
                                                        True)
    g = _pool_back(g, a1) * (c1 > 0)
    _, grads["0.weight"], grads["0.bias"] = _conv_back(g, cols1, x.shape, p["0.weight"], 2,
                                                        False)
    return loss, grads


# ------------------------------------------------------------------------- transformer
def _layer_norm(x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float = 1e-5) -> tuple:
    mu = x.mean(axis=-1, keepdims=True)
    xc = x - mu
    rstd = 1.0 / np.sqrt((xc * xc).mean(axis=-1, keepdims=True) + eps)
    xhat = xc * rstd
    return xhat * w + b, (xhat, rstd)


def _layer_norm_back(g: np.ndarray, saved: tuple, w: np.ndarray) -> tuple:
    xhat, rstd = saved
    gw = (g * xhat).reshape(-1, w.shape[0]).sum(axis=0)
    gb = g.reshape(-1, w.shape[0]).sum(axis=0)
    gx = g * w
    gx = rstd * (gx - gx.mean(axis=-1, keepdims=True)
                 - xhat * (gx * xhat).mean(axis=-1, keepdims=True))
    return gx, gw, gb


def _dense(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    return x @ w.T + b


def _dense_back(g: np.ndarray, x: np.ndarray, w: np.ndarray) -> tuple:
    g2, x2 = g.reshape(-1, g.shape[-1]), x.reshape(-1, x.shape[-1])
    return g @ w, g2.T @ x2, g2.sum(axis=0)


def transformer_loss_and_grads(p: Params, heads: int, tokens: np.ndarray,
                               targets: np.ndarray) -> tuple[float, Params]:
    """The encoder-block workload's loss and parameter gradients (names as in
    `EncoderBlock`)."""
    b, t = tokens.shape
    w = p["pos"].shape[1]
    d = w // heads
    dt = p["pos"].dtype
    x0 = p["embed.weight"][tokens] + p["pos"]
    h1, ln1 = _layer_norm(x0, p["ln1.weight"], p["ln1.bias"])
    qkv = _dense(h1, p["qkv.weight"], p["qkv.bias"])
    q, k, v = (qkv[..., i * w:(i + 1) * w].reshape(b, t, heads, d).transpose(0, 2, 1, 3)
               for i in range(3))
    scale = dt.type(1.0 / np.sqrt(d))
    s = (q @ k.transpose(0, 1, 3, 2)) * scale
    causal = np.triu(np.ones((t, t), bool), 1)
    s = np.where(causal, -np.inf, s)
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    a = e / e.sum(axis=-1, keepdims=True)
    o = (a @ v).transpose(0, 2, 1, 3).reshape(b, t, w)
    x1 = x0 + _dense(o, p["proj.weight"], p["proj.bias"])
    h2, ln2 = _layer_norm(x1, p["ln2.weight"], p["ln2.bias"])
    u = _dense(h2, p["fc1.weight"], p["fc1.bias"])
    cdf = (0.5 * (1.0 + erf(u / np.sqrt(2.0)))).astype(dt)
    gel = u * cdf
    x2 = x1 + _dense(gel, p["fc2.weight"], p["fc2.bias"])
    h3, lnf = _layer_norm(x2, p["ln_f.weight"], p["ln_f.bias"])
    logits = _dense(h3, p["head.weight"], p["head.bias"])
    vocab = logits.shape[-1]
    loss, g = _cross_entropy(logits.reshape(-1, vocab), targets.reshape(-1))
    g = g.reshape(b, t, vocab)

    grads: Params = {}
    g, grads["head.weight"], grads["head.bias"] = _dense_back(g, h3, p["head.weight"])
    gx2, grads["ln_f.weight"], grads["ln_f.bias"] = _layer_norm_back(g, lnf, p["ln_f.weight"])
    g, grads["fc2.weight"], grads["fc2.bias"] = _dense_back(gx2, gel, p["fc2.weight"])
    pdf = (np.exp(-0.5 * u * u) / np.sqrt(2 * np.pi)).astype(dt)
    g = g * (cdf + u * pdf)
    g, grads["fc1.weight"], grads["fc1.bias"] = _dense_back(g, h2, p["fc1.weight"])
    g, grads["ln2.weight"], grads["ln2.bias"] = _layer_norm_back(g, ln2, p["ln2.weight"])
    gx1 = gx2 + g
    g, grads["proj.weight"], grads["proj.bias"] = _dense_back(gx1, o, p["proj.weight"])
    go = g.reshape(b, t, heads, d).transpose(0, 2, 1, 3)
    ga = go @ v.transpose(0, 1, 3, 2)
    gv = a.transpose(0, 1, 3, 2) @ go
    gs = a * (ga - (ga * a).sum(axis=-1, keepdims=True)) * scale
    gq = gs @ k
    gk = gs.transpose(0, 1, 3, 2) @ q
    gqkv = np.concatenate([z.transpose(0, 2, 1, 3).reshape(b, t, w) for z in (gq, gk, gv)],
                          axis=-1)
    g, grads["qkv.weight"], grads["qkv.bias"] = _dense_back(gqkv, h1, p["qkv.weight"])
    g, grads["ln1.weight"], grads["ln1.bias"] = _layer_norm_back(g, ln1, p["ln1.weight"])
    gx0 = gx1 + g
    grads["pos"] = gx0.sum(axis=0)
    gemb = np.zeros_like(p["embed.weight"])
    np.add.at(gemb, tokens.reshape(-1), gx0.reshape(-1, w))
    grads["embed.weight"] = gemb
    return loss, grads


def train_step(loss_and_grads: Callable[..., tuple], params: Params, lr: float, *fixed
               ) -> Callable[..., float]:
    """``step(*data)``: one Adam step of a hand-written model; returns the loss."""
    update = adam(params, lr)

    def step(*data: np.ndarray) -> float:
        loss, grads = loss_and_grads(params, *fixed, *data)
        update(grads)
        return loss

    return step
