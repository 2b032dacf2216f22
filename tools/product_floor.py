"""The transformer step's matrix products as bare library calls: each product's shape,
transpose flags and leading dimensions as the compiled step makes the call, timed alone
with its operands in cache (CPU time, ``--rounds`` rounds, the median), in GFLOP/s.

With `tools.block_profile`'s blocks this gives the step at the products' floor: the sum
of these times plus every block that is not a product.

    python -m tools.product_floor [--rounds 15] [--reps 20]
"""

from __future__ import annotations

import argparse
import time

import numba
import numpy as np

from dualgraph.backend.numba import blas as dgb

N, T = 111, 112  # cblas transpose flags

# (label, ta, tb, m, n, k, lda, ldb): one pre-norm block, batch 16 x 64 tokens, width 128,
# 4 heads, hidden 512, vocabulary 256; rows of a (b, t) pair run 1024 long.
LINEAR = [
    ("qkv = x @ Wqkv.T", N, T, 1024, 384, 128, 128, 128),
    ("out = y @ Wo.T", N, T, 1024, 128, 128, 128, 128),
    ("h = x @ W1.T", N, T, 1024, 512, 128, 128, 128),
    ("f = h @ W2.T", N, T, 1024, 128, 512, 512, 512),
    ("logits = x @ Wh.T", N, T, 1024, 256, 128, 128, 128),
    ("g @ Wh", N, N, 1024, 128, 256, 256, 128),
    ("g.T @ x (Wh)", T, N, 256, 128, 1024, 256, 128),
    ("g @ W2", N, N, 1024, 512, 128, 128, 512),
    ("g.T @ h (W2)", T, N, 128, 512, 1024, 128, 512),
    ("g @ W1", N, N, 1024, 128, 512, 512, 128),
    ("g.T @ x (W1)", T, N, 512, 128, 1024, 512, 128),
    ("g @ Wo", N, N, 1024, 128, 128, 128, 128),
    ("g.T @ y (Wo)", T, N, 128, 128, 1024, 128, 128),
    ("g @ Wqkv", N, N, 1024, 128, 384, 384, 128),
    ("g.T @ x (Wqkv)", T, N, 384, 128, 1024, 384, 128),
]

# (label, ta, tb, m, n, k, a: (lda, item stride), b: (ldb, item stride), ldc, c item
# stride): 16 x 4 items; a head of q/k/v is 32 columns of the 16x64x384 projection, a
# head of the output gradient 32 columns of 16x64x128, results contiguous per item or a
# slice of the 16x64x384 gradient join.
_QKV = (384, 64 * 384, 32)
_G = (128, 64 * 128, 32)
_S = (64, 64 * 64, 0)
BATCHED = [
    ("q @ k.T", N, T, 64, 64, 32, _QKV, _QKV, 64, 4096, 0),
    ("p @ v", N, N, 64, 32, 64, _S, _QKV, 32, 2048, 0),
    ("dp = g @ v.T", N, T, 64, 64, 32, _G, _QKV, 64, 4096, 0),
    ("dv = p.T @ g", T, N, 64, 32, 64, _S, _G, 384, 64 * 384, 32),
    ("dq = ds @ k", N, N, 64, 32, 64, _S, _QKV, 384, 64 * 384, 32),
    ("dk = ds.T @ q", T, N, 64, 32, 64, _S, _QKV, 384, 64 * 384, 32),
]


@numba.njit(cache=False)
def _linear(reps, ta, tb, m, n, k, a, lda, b, ldb, c, ldc):
    for _ in range(reps):
        dgb.gemm_call(ta, tb, m, n, k, a, lda, b, ldb, 0.0, c, ldc)


@numba.njit(cache=False)
def _batched(reps, ta, tb, m, n, k, a, lda, sa, ha, b, ldb, sb, hb, c, ldc, sc, hc):
    for _ in range(reps):
        for i in range(16):
            for h in range(4):
                dgb._gemm_at(ta, tb, m, n, k, a, i * sa + h * ha, lda, b, i * sb + h * hb,
                             ldb, 0.0, c, i * sc + h * hc, ldc)


def _median_time(run, rounds: int, reps: int) -> float:
    run(1)
    out = []
    for _ in range(rounds):
        t0 = time.thread_time()
        run(reps)
        out.append((time.thread_time() - t0) / reps)
    return float(np.median(out))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--reps", type=int, default=20)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    big = rng.standard_normal(1 << 20).astype(np.float32)
    out = np.empty(1 << 20, np.float32)
    print("| product | m x n x k | flags | us | GFLOP/s |\n|---|---|---|---|---|")
    total = 0.0
    for label, ta, tb, m, n, k, lda, ldb in LINEAR:
        s = _median_time(lambda r, a=(ta, tb, m, n, k, lda, ldb): _linear(
            r, a[0], a[1], a[2], a[3], a[4], big, a[5], big[1 << 19:], a[6], out, a[3]),
            args.rounds, args.reps)
        total += s
        flags = ("T" if ta == T else "N") + ("T" if tb == T else "N")
        print(f"| `{label}` | {m}x{n}x{k} | {flags} | {s * 1e6:.1f} | "
              f"{2 * m * n * k / s / 1e9:.1f} |")
    for label, ta, tb, m, n, k, (lda, sa, ha), (ldb, sb, hb), ldc, sc, hc in BATCHED:
        s = _median_time(lambda r, a=(ta, tb, m, n, k, lda, sa, ha, ldb, sb, hb, ldc, sc, hc):
                         _batched(r, *a[:5], big, *a[5:8], big[1 << 19:], *a[8:11], out,
                                  *a[11:]),
                         args.rounds, args.reps)
        total += s
        flags = ("T" if ta == T else "N") + ("T" if tb == T else "N")
        print(f"| `{label}` (64 items) | {m}x{n}x{k} | {flags} | {s * 1e6:.1f} | "
              f"{64 * 2 * m * n * k / s / 1e9:.1f} |")
    print(f"\nall products: {total * 1e3:.2f} ms")


if __name__ == "__main__":
    main()
