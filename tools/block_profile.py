"""Where a compiled model step's run time goes, block by block of its generated kernels.

Each part of the step's kernel is compiled again from its own source with a clock read
before every top-level block (a graph line and the code that computes it) and after every
BLAS call, so a product's call and its epilogue are timed apart; the step then runs
``--steps`` times and every block's time is summed. The clock is the thread's CPU time
(``clock_gettime``, a system call per block; the step's time outside the blocks is the
call path between parts), which a loaded machine does not inflate; ``--clock cycles``
reads the cycle counter (``llvm.readcyclecounter``), finer but in wall time. Prints
one row per block over ``--min`` percent, then the totals by family (linear products,
batched attention products, row kernels, GELU, convolutions, pooling, copies, optimizer
updates, the rest).

    python -m tools.block_profile [transformer|cnn] [--steps 60] [--min 0.5] [--clock cpu|cycles]
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from collections import defaultdict
from typing import Any

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic


@intrinsic
def _cycles(typingctx):
    def codegen(context, builder, signature, args):
        fnty = ir.FunctionType(ir.IntType(64), [])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.readcyclecounter")
        return builder.call(fn, [])

    return types.int64(), codegen


@intrinsic
def _thread_ns(typingctx):
    # clock_gettime(CLOCK_THREAD_CPUTIME_ID): the thread's CPU time, which time on other
    # processes' turns does not inflate (a system call, about 0.3 us a block).
    def codegen(context, builder, signature, args):
        i64 = ir.IntType(64)
        spec = ir.LiteralStructType([i64, i64])
        fnty = ir.FunctionType(ir.IntType(32), [ir.IntType(32), spec.as_pointer()])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "clock_gettime")
        ts = cgutils.alloca_once(builder, spec)
        builder.call(fn, [ir.Constant(ir.IntType(32), 3), ts])
        sec = builder.load(cgutils.gep_inbounds(builder, ts, 0, 0))
        nsec = builder.load(cgutils.gep_inbounds(builder, ts, 0, 1))
        return builder.add(builder.mul(sec, ir.Constant(i64, 1_000_000_000)), nsec)

    return types.int64(), codegen


@numba.njit(inline="always")
def _tick(prof, j):
    # prof[-2]: the block being timed, prof[-1]: the cycle it started at.
    now = _cycles()
    n = prof.shape[0] - 2
    prof[prof[n]] += now - prof[n + 1]
    prof[n] = j
    prof[n + 1] = _cycles()


@numba.njit(inline="always")
def _tick_cpu(prof, j):
    # `_tick` in nanoseconds of the thread's CPU time.
    now = _thread_ns()
    n = prof.shape[0] - 2
    prof[prof[n]] += now - prof[n + 1]
    prof[n] = j
    prof[n + 1] = _thread_ns()


@numba.njit
def _now():
    return _cycles()


def instrument(code: str) -> tuple[str, list[str]]:
    """``code`` (a part's generated module) with a tick before each top-level block and
    after each BLAS call, its function taking the counters last; and the blocks' labels
    (label 0 is the entry, before the first block)."""
    out, labels, cur = [], ["(entry)"], "(entry)"
    inside = False
    for line in code.split("\n"):
        m = re.match(r"^def part\((.*)\):$", line)
        if m:
            out.append(f"def part({m.group(1)}, prof):")
            inside = True
            continue
        if inside and re.match(r"^    (# %|return)", line):
            if line.strip().startswith("#"):
                cur = line.strip()[2:]
            labels.append(cur if not line.strip().startswith("return") else "(exit)")
            out.append(f"    _tick(prof, {len(labels) - 1})")
        if inside and "dgw.row_" in line and not labels[-1].endswith(_ROW):
            # A row routine's call stands under the last graph line it computes (the
            # layer norm's gradients under their bias sum).
            labels[-1] += _ROW
        out.append(line)
        if inside and re.match(r"^    dgb\.gemm", line):
            labels.append(f"epilogue of {cur}")
            out.append(f"    _tick(prof, {len(labels) - 1})")
    src = "\n".join(out).replace("@dgc.njit(cache=True,", "@numba.njit(cache=False,")
    if labels[-1] != "(exit)":
        labels.append("(exit)")
        src += f"\n    _tick(prof, {len(labels) - 1})\n"
    return src, labels


_ROW = " (row routine)"


def family(label: str, part: int, updates_from: int) -> str:
    """The row of the totals a block belongs to."""
    if part >= updates_from:
        return "optimizer updates"
    if label.startswith("epilogue of"):
        return "product epilogues (bias)"
    if label.endswith(_ROW):
        return "row kernels"
    m = re.match(r"%\d+:\w+\[([\d,]*)\] = (\w+)(\[kind='(\w+)'\])?", label)
    if not m:
        return "entry, exit"
    rank, op, kind = m.group(1).count(",") + 1, m.group(2), m.group(4)
    if op in ("addmm", "matmul") or kind == "matmul":
        return "batched products" if rank > 2 else "linear products"
    if op in ("layer_norm", "layer_norm_backward", "layer_norm_weight_grad", "softmax",
              "softmax_backward", "log_softmax", "log_softmax_backward"):
        return "row kernels"
    if op.startswith("conv"):
        return "convolutions (im2col + GEMM, col2im)"
    if "pool" in op:
        return "pooling"
    if op.startswith("gelu"):
        return "GELU"
    if op in ("reshape", "transpose", "getitem", "scatter", "concatenate") or re.search(
            r"= add %\d+, 0\.0$", label):  # a piece of a join (`fold_add_scatters`)
        return "copies, scatters, joins"
    return "other elementwise, sums, gathers"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", nargs="?", default="transformer")
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--min", type=float, default=0.5, help="percent below which a block's "
                    "row is not printed")
    ap.add_argument("--clock", choices=("cpu", "cycles"), default="cpu", help="the "
                    "thread's CPU time (default), or the cycle counter (wall time, finer)")
    args = ap.parse_args()
    import dualgraph as dg
    from dualgraph.workloads import model_step

    step, (x, t), _ = model_step(args.model, 1e-3)
    f = dg.compile(step, tiered=False)
    f(x, t)
    kernel = f.entries()[0].kernel
    if not kernel.parts:
        sys.exit("the step's kernel is one function: nothing to time part by part")
    table: list[tuple[int, list[str], np.ndarray]] = []
    calls = []
    for i, (part, (_, get)) in enumerate(zip(kernel.parts, kernel._calls)):
        src, labels = instrument(part.source)
        ns: dict[str, Any] = {"_tick": _tick_cpu if args.clock == "cpu" else _tick}
        exec(compile(src, f"<part {i}>", "exec"), ns)  # noqa: S102 - our own generated code
        prof = np.zeros(len(labels) + 2, np.int64)
        table.append((i, labels, prof))
        calls.append((_timed(ns["part"], prof), get))
    kernel._calls = calls
    # The parts' generated caller calls their dispatchers itself: route the step through
    # the general path, which calls `_calls`.
    work = kernel._new_work()
    kernel._caller = lambda ins, outs: kernel._run_general(ins, outs, work)
    for _ in range(3):
        f(x, t)
    for _, _, prof in table:
        prof[:] = 0
    c0, w0 = _now(), time.perf_counter()
    time.sleep(0.2)
    hz = (_now() - c0) / (time.perf_counter() - w0) if args.clock == "cycles" else 1e9
    cpu = time.thread_time()
    for _ in range(args.steps):
        f(x, t)
    cpu = (time.thread_time() - cpu) / args.steps
    # The optimizer's updates are the parts after the last one holding a product.
    updates_from = 1 + max(i for i, p in enumerate(kernel.parts) if "dgb.gemm" in p.code)
    rows = [(i, label, prof[j] / args.steps / hz * 1e3)
            for i, labels, prof in table for j, label in enumerate(labels)]
    total = sum(ms for _, _, ms in rows)
    print(f"{args.model}: {len(kernel.parts)} parts, step {cpu * 1e3:.2f} ms CPU, blocks "
          f"{total:.2f} ms " + ("of CPU time\n" if args.clock == "cpu" else
                                f"by the cycle counter ({hz / 1e9:.2f} GHz)\n"))
    print("| part | block | ms | share |\n|---|---|---|---|")
    families: dict[str, float] = defaultdict(float)
    for i, label, ms in rows:
        families[family(label, i, updates_from)] += ms
        if ms / total * 100 >= args.min:
            print(f"| {i} | `{label[:110]}` | {ms:.3f} | {ms / total:.1%} |")
    print("\n| family | ms | share |\n|---|---|---|")
    for name, ms in sorted(families.items(), key=lambda kv: -kv[1]):
        print(f"| {name} | {ms:.3f} | {ms / total:.1%} |")


def _timed(fn: Any, prof: np.ndarray) -> Any:
    n = prof.shape[0] - 2

    def call(*a: Any) -> None:
        prof[n] = 0
        prof[n + 1] = 0
        fn(*a, prof)
        prof[0] = 0  # the entry's slot took the counter's absolute value

    return call


if __name__ == "__main__":
    main()
