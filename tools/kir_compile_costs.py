"""Numba's compile time per kernel IR construct: each construct is printed into a function
of its own beside a minimal body, compiled cold (a new function each time, after one
warm-up compile so that shared helpers are already typed), and its median is compared
with the minimal function's. Prints a Markdown table (docs/architecture.md keeps one).

    python tools/kir_compile_costs.py [repeats]
"""

from __future__ import annotations

import math
import statistics
import sys
import time

import numba
import numpy as np

from dualgraph.backend import kir
from dualgraph.backend.numba import blas as dgb
from dualgraph.backend.numba import kernels as dgk
from dualgraph.backend.numba import printer

F4 = np.dtype(np.float32)
X = kir.Buffer("x", (64, 64), F4, kir.ARG)
Y = kir.Buffer("y", (64, 64), F4, kir.ARG)
B3 = kir.Buffer("b", (8, 64, 64), F4, kir.ARG)
OUT = kir.Buffer("o", (64, 64), F4, kir.OUT)
O3 = kir.Buffer("p", (8, 64, 64), F4, kir.OUT)
PARAMS = [X, Y, B3, OUT, O3]
i, j, b = kir.Var("i"), kir.Var("j"), kir.Var("t")


def nest(*body: object) -> list:
    return [kir.Loop(i, 64, (kir.Loop(j, 64, tuple(body)),))]


def constructs() -> dict[str, list]:
    acc = kir.Var("acc", np.float64)
    m = kir.Var("m", F4)
    xv = kir.Buffer("xv", (4096,), F4, kir.VIEW)
    xi = kir.Buffer("xi", (64, 64), F4, kir.VIEW, "A")
    yt = kir.Buffer("yt", (64, 64), F4, kir.VIEW, "F")
    k = kir.Var("k")
    return {
        "minimal function (one store)": [],
        "elementwise loop nest (2-D, `x * 2 + 1`)": nest(kir.Store(
            OUT, (i, j), X[i, j] * kir.const(2.0, F4) + kir.const(1.0, F4))),
        "the same with float32 `exp` (vectorizable)": nest(kir.Store(
            OUT, (i, j), kir.Call("exp", (X[i, j],), F4))),
        "the same with `erf` (scalar libm call)": nest(kir.Store(
            OUT, (i, j), kir.Call("erf", (X[i, j],), F4))),
        "sum reduction (float64 accumulator)": [kir.Let(acc, kir.const(0.0, np.float64)),
                                                *nest(kir.Accum(acc, "add", X[i, j])),
                                                kir.Store(OUT, (0, 0), kir.Cast(acc, F4))],
        "max reduction (nan propagates)": [kir.Let(m, kir.const(-math.inf, F4)),
                                           *nest(kir.Accum(m, "maximum", X[i, j])),
                                           kir.Store(OUT, (0, 0), m)],
        "view: reshape of an argument": [kir.View(xv, X, "reshape"),
                                         kir.Store(OUT, (0, 0), xv[kir.const(5)])],
        "GEMM, layouts known (C operands)": [kir.Gemm(64, 64, 64, kir.Operand(X, 64),
                                                      kir.Operand(Y, 64),
                                                      kir.Operand(OUT, 64))],
        "GEMM, layouts resolved at typing (`dgb.operand`)": [
            kir.View(yt, Y, "transpose", (1, 0)),
            kir.Gemm(64, 64, 64, kir.Operand(X, None), kir.Operand(yt, None),
                     kir.Operand(OUT, 64))],
        "batched GEMM, strided batch (8 items)": [kir.Gemm(
            64, 64, 64, kir.Operand(B3, 64, batch_stride=4096), kir.Operand(Y, 64),
            kir.Operand(O3, 64, batch_stride=4096), batch=8)],
        "batched GEMM on item views (8 items)": [kir.Loop(b, 8, (
            kir.View(xi, B3, "slice", (b, (0, None, 1), (0, None, 1))),
            kir.Gemm(64, 64, 64, kir.Operand(xi, None), kir.Operand(Y, None),
                     kir.Operand(O3, 64, offset=b * 4096))))],
        "small product as loops (64^3)": [kir.Loop(i, 64, (kir.Loop(j, 64, (
            kir.Store(OUT, (i, j), kir.const(0.0, F4)),
            kir.Loop(k, 64, (kir.Store(OUT, (i, j), X[i, k] * Y[k, j], "+"),)))),))],
    }


def compile_seconds(stmts: list, tag: int) -> float:
    body = [kir.Store(OUT, (0, 0), kir.const(0.0, F4))] + stmts
    kir.verify(body, PARAMS)
    lines = printer.block_lines(body, 1)
    src = (f"def k{tag}({', '.join(p.name for p in PARAMS)}):\n" + "\n".join(lines)
           + "\n    return 0\n")
    ns = {"np": np, "numba": numba, "math": math, "dgb": dgb, "dgk": dgk}
    exec(src, ns)
    arr2 = numba.types.Array(numba.float32, 2, "C")
    arr3 = numba.types.Array(numba.float32, 3, "C")
    sig = numba.int64(arr2, arr2, arr3, arr2, arr3)
    t0 = time.perf_counter()
    numba.njit(sig)(ns[f"k{tag}"])
    return time.perf_counter() - t0


def main(repeats: int = 3) -> None:
    cases = constructs()
    tag = 0
    for stmts in cases.values():  # warm-up: shared helpers typed once
        tag += 1
        compile_seconds(stmts, tag)
    times: dict[str, list] = {name: [] for name in cases}
    for _ in range(repeats):  # interleaved rounds
        for name, stmts in cases.items():
            tag += 1
            times[name].append(compile_seconds(stmts, tag))
    base = statistics.median(times["minimal function (one store)"])
    print("| construct | compile (ms) | over the minimal function (ms) |")
    print("|---|---|---|")
    for name, ts in times.items():
        med = statistics.median(ts)
        print(f"| {name} | {med * 1e3:.0f} | {(med - base) * 1e3:+.0f} |")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3)
