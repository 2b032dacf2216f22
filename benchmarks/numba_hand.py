"""Hand-written ``numba.njit`` versions of the benchmark workloads: what a careful person
writes with Numba and no framework. One function per step, ``np.dot`` for the matrix
products, plain loops for the rest, float32 throughout. ``cache=True``: the kernels go to
Numba's cache (``NUMBA_CACHE_DIR``), so a fresh process reuses them, as dualgraph's do.

Imported lazily by ``peers.py`` (importing this module imports Numba).
"""

from __future__ import annotations

import numba
import numpy as np

from dualgraph.backend.numba.kernels import sigmoid_f32, tanh_f32

F32 = np.float32


@numba.njit(cache=True)
def scalar_step(x, y):
    """z = x*y + y**2 and its gradients (0-d float32 arrays in, float32 scalars out)."""
    a = x[()]
    b = y[()]
    return a * b + b * b, b, a + F32(2) * b


@numba.njit(cache=True)
def mse_step(X, Y, W1, c1, W2, c2, lr):
    """One SGD step of ``X -> W1,c1 -> ReLU -> W2,c2`` with the mean squared error, all in
    loops (the tiny network's products are too small for BLAS); returns the loss."""
    n, d = X.shape
    hid, out_dim = W1.shape[0], W2.shape[0]
    h = np.empty((n, hid), np.float32)
    out = np.empty((n, out_dim), np.float32)
    for i in range(n):
        for j in range(hid):
            s = c1[j]
            for k in range(d):
                s += X[i, k] * W1[j, k]
            h[i, j] = s
        for o in range(out_dim):
            s = c2[o]
            for j in range(hid):
                s += max(h[i, j], F32(0)) * W2[o, j]
            out[i, o] = s
    gW1 = np.zeros_like(W1)
    gc1 = np.zeros_like(c1)
    gW2 = np.zeros_like(W2)
    gc2 = np.zeros_like(c2)
    scale = F32(2.0 / (n * out_dim))
    loss = 0.0
    for i in range(n):
        for o in range(out_dim):
            diff = out[i, o] - Y[i, o]
            loss += diff * diff
            go = diff * scale
            gc2[o] += go
            for j in range(hid):
                gW2[o, j] += go * max(h[i, j], F32(0))
                if h[i, j] > 0:
                    gh = go * W2[o, j]
                    gc1[j] += gh
                    for k in range(d):
                        gW1[j, k] += gh * X[i, k]
    W1 -= lr * gW1
    c1 -= lr * gc1
    W2 -= lr * gW2
    c2 -= lr * gc2
    return loss / (n * out_dim)


@numba.njit(cache=True)
def ce_step(X, T, W1, c1, W2, c2, lr):
    """One SGD step of ``X -> W1,c1 -> ReLU -> W2,c2`` with cross-entropy against the class
    indices ``T``: ``np.dot`` for the four products, loops for everything else; returns the
    mean loss."""
    n = X.shape[0]
    hid, classes = W1.shape[0], W2.shape[0]
    h = np.dot(X, W1.T)
    a = np.empty_like(h)
    for i in range(n):
        for j in range(hid):
            v = h[i, j] + c1[j]
            h[i, j] = v
            a[i, j] = max(v, F32(0))
    out = np.dot(a, W2.T)
    gout = np.empty_like(out)
    loss = 0.0
    inv_n = F32(1.0 / n)
    for i in range(n):
        m = -np.inf
        for c in range(classes):
            v = out[i, c] + c2[c]
            out[i, c] = v
            m = max(m, v)
        s = F32(0)
        for c in range(classes):
            e = np.exp(out[i, c] - m)
            gout[i, c] = e
            s += e
        loss += np.log(s) + m - out[i, T[i]]
        for c in range(classes):
            gout[i, c] = gout[i, c] / s * inv_n
        gout[i, T[i]] -= inv_n
    gW2 = np.dot(gout.T, a)
    gh = np.dot(gout, W2)
    for i in range(n):
        for j in range(hid):
            if h[i, j] <= 0:
                gh[i, j] = 0
    gW1 = np.dot(gh.T, X)
    for j in range(hid):
        g = F32(0)
        for i in range(n):
            g += gh[i, j]
        c1[j] -= lr * g
        for k in range(W1.shape[1]):
            W1[j, k] -= lr * gW1[j, k]
    for c in range(classes):
        g = F32(0)
        for i in range(n):
            g += gout[i, c]
        c2[c] -= lr * g
        for j in range(hid):
            W2[c, j] -= lr * gW2[c, j]
    return loss / n


@numba.njit(cache=True)
def chain_step(x, g):
    """sum(tanh(.5x+1) * sigmoid(x) + .1x^2) of float32 ``x``, its gradient written to
    ``g``; one pass over the data."""
    total = 0.0
    for i in range(x.size):
        v = x[i]
        t = np.tanh(v * F32(0.5) + F32(1))
        s = F32(1) / (F32(1) + np.exp(-v))
        total += t * s + F32(0.1) * v * v
        g[i] = (F32(1) - t * t) * F32(0.5) * s + t * s * (F32(1) - s) + F32(0.2) * v
    return total


@numba.njit(cache=True, parallel=True, fastmath=True)
def chain_step_prange(x, g):
    """`chain_step` over a ``numba.prange`` of 64 chunks (a partial sum each, added in
    chunk order): the two-core reference for dualgraph's ``parallel=True`` kernel, run on
    one thread or two by ``numba.set_num_threads``. Its float32 ``tanh`` and ``exp`` are
    dualgraph's polynomial ones, and ``fastmath`` lets LLVM reorder the chunk's sum: a
    loop LLVM can vectorize, as dualgraph's is. ``np.tanh`` and ``np.exp`` would each be
    a scalar libm call per element (this Numba has no SVML): ten times the work of
    dualgraph's kernel, a compute-bound loop whose two-thread speed-up says nothing of
    this memory-bound workload."""
    n = x.size
    chunks = 64
    per = (n + chunks - 1) // chunks
    parts = np.zeros(chunks)
    for c in numba.prange(chunks):
        total = F32(0)
        for i in range(c * per, min(n, c * per + per)):
            v = x[i]
            t = tanh_f32(v * F32(0.5) + F32(1))
            s = sigmoid_f32(v)
            total += t * s + F32(0.1) * v * v
            g[i] = (F32(1) - t * t) * F32(0.5) * s + t * s * (F32(1) - s) + F32(0.2) * v
        parts[c] = total
    return parts.sum()
