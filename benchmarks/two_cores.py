"""Two cores: dualgraph ``parallel=True`` against its one-thread kernel, jax.jit and
PyTorch with two threads, in one process, interleaved round by round.

Rows (each step reads its result back, as `compiled.py` does):
  W3      1e7 float32 value and gradient of the ``chain`` workload
  MLP     one SGD step of the 784-256-10 MLP at batch 1024
  W4cnn, W5tr  the model steps (``--models``; their cold compile takes minutes)
Columns: dualgraph compiled on one thread (``parallel=False``), ``parallel=True`` on one
and on two Numba threads (every row: the second over the first is what the second thread
gives the same kernel), for W3 a hand-written Numba ``prange`` reference
(`numba_hand.chain_step_prange`) on one and two threads (what two threads give a careful
hand kernel on this machine), and each peer that imports: ``torch`` eager on one and on two
threads, ``jax.jit`` (XLA picks its own threads: both CPUs). BLAS runs one thread in the
one-thread columns and two in the others (threadpoolctl, when installed). Every OpenMP pool
waits passively (`OMP_WAIT_POLICY=PASSIVE` unless set): a pool left spinning after its
block would take a core from the next column.

    python benchmarks/two_cores.py                       # W3 and MLP, 9 rounds
    python benchmarks/two_cores.py --rounds 15 --models --json two_cores.json
    python benchmarks/two_cores.py --row MLP --apart     # and the MLP's regions unmerged
    python benchmarks/two_cores.py --row MLP --parts 4   # and its products in 4 blocks
    python benchmarks/two_cores.py --models --before     # and each as generated before
                                                         # (merged; and unmerged)

The process may use both CPUs; every other load on the machine shows in the two-thread
columns (wall time waits for the slower thread), so they are figures of a quiet machine
only. Each row gives wall and CPU time (the CPU time of a two-thread column is both
threads' sum: against the one-thread column it shows the work added by running in
parallel, not the speed-up). Ratios are medians of per-round ratios with their
interquartile range (``interleaved.py``).
"""

from __future__ import annotations

import argparse
import os
import sys

# Two threads for every pool; the one-thread columns narrow them per block of calls.
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ.setdefault(_var, "2")
# Every OpenMP pool (PyTorch's, Numba's) waits passively: the columns alternate block by
# block in one process, and a pool left spinning after its block would take a core from
# the next column's framework, whichever it is.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
# XLA on its own threads: `compiled`, imported by the builds, would otherwise set the
# single-core rows' XLA_FLAGS before jax.jit's first call reads them.
os.environ.setdefault("XLA_FLAGS", "")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import interleaved  # noqa: E402
import peers  # noqa: E402
import single_thread  # noqa: E402

import dualgraph as dg  # noqa: E402
from dualgraph.workloads import MLPS, chain_data  # noqa: E402

W3_N = 10_000_000
MLP_BATCH = 1024
CPUS = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
_NOW = [0]  # the thread count the pools are set to


def _threads(n: int) -> None:
    """Numba, BLAS/OpenMP and PyTorch pools at ``n`` threads, the process on all CPUs."""
    _NOW[0] = n
    if CPUS:
        os.sched_setaffinity(0, set(CPUS))
    # dualgraph's own call: the first one starts Numba's pool as a parallel build would
    # (workers waiting passively), so the pool is the one users get.
    dg.set_num_threads(n)
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(n)
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return
    threadpool_limits(n)


def _with_threads(n: int, build):
    """A factory whose step runs with ``n`` threads (set before every call: cheap, and the
    rounds alternate columns of different thread counts)."""
    def factory():
        step = build()
        _threads(n)

        def run():
            if _NOW[0] != n:
                _threads(n)
            return step()
        return run
    return factory


def chain_dualgraph(n: int, parallel: bool):
    def build():
        from compiled import chain_dualgraph as step

        return step(n, True, parallel=parallel)()
    return build


def mlp_dualgraph(batch: int, parallel: bool):
    def build():
        from compiled import mlp_dualgraph as step

        sizes, _, loss = MLPS["mlp"]
        return step(sizes, batch, loss, True, parallel=parallel)()
    return build


def model_dualgraph(name: str, parallel: bool):
    def build():
        from compiled import MODEL_LR, model_step

        step, (x, t), _ = model_step(name, MODEL_LR)
        f = dg.compile(step, tiered=False, parallel=parallel)
        return lambda: f(x, t)
    return build


def regions_apart(factory):
    """``factory`` built with each product and the loop over its result in parallel
    regions of their own (`codegen.product_blocks` off): what merging them saves, in the
    same process."""
    def build():
        from dualgraph.backend.numba import codegen

        keep = codegen.product_blocks
        codegen.product_blocks = lambda stmts, parts=None: list(stmts)
        try:
            run = factory()
            run()  # compiles while the merge is off
        finally:
            codegen.product_blocks = keep
        return run
    return build


def with_parts(parts: int, factory, chain: bool = True):
    """``factory`` built with its products cut in ``parts`` blocks
    (`blas_parallel.product_parts`), whatever the pool: another cut in the same process;
    without ``chain``, no product runs in the block loop of the product before it
    (`codegen._chain_product` off)."""
    def build():
        from dualgraph.backend.numba import blas_parallel, codegen

        keep = blas_parallel.product_parts, codegen._chain_product
        blas_parallel.product_parts = lambda: parts
        if not chain:
            codegen._chain_product = lambda *args: False
        try:
            run = factory()
            run()  # compiles with this cut
        finally:
            blas_parallel.product_parts, codegen._chain_product = keep
        return run
    return build


def calls_apart(factory):
    """``factory`` built with its row routines outside the block loops
    (`codegen._chain_rows` off)."""
    def build():
        from dualgraph.backend.numba import codegen

        keep = codegen._chain_rows
        codegen._chain_rows = lambda *args: False
        try:
            run = factory()
            run()  # compiles with the calls apart
        finally:
            codegen._chain_rows = keep
        return run
    return build


def chain_numba_prange(n: int):
    """The hand-written reference: one fused pass, a ``prange`` of 64 chunks."""
    def build():
        from numba_hand import chain_step_prange

        x = chain_data(n)
        g = x.copy()
        return lambda: (chain_step_prange(x, g), g)
    return build


def _peer(impl: str, *params):
    return lambda: peers.build(impl, *params)


def rows(models: bool, available: list[str], apart: bool = False,
         parts: int | None = None, before: bool = False) -> dict:
    """row -> {column: factory}; ``apart``: the MLP row also with its products and loops
    in regions of their own (`regions_apart`); ``parts``: the MLP and model rows also with
    their products cut in that many blocks (`with_parts`); ``before``: and as the
    generator made them: with the row routines outside the block loops
    ("calls apart"), also with a fixed cut in 4 blocks and no chained products
    ("before"), and also with every product and loop in a region of its own
    ("unmerged": the schedule before any region was merged)."""
    sizes, _, loss = MLPS["mlp"]
    table = {
        "W3 1e7": ({"dg 1 thread": _with_threads(1, chain_dualgraph(W3_N, False)),
                    "dg parallel 1 thread": _with_threads(1, chain_dualgraph(W3_N, True)),
                    "dg parallel 2 threads": _with_threads(2, chain_dualgraph(W3_N, True)),
                    "numba prange 1 thread": _with_threads(1, chain_numba_prange(W3_N)),
                    "numba prange 2 threads": _with_threads(2, chain_numba_prange(W3_N))},
                   ("chain", W3_N)),
        f"MLP b{MLP_BATCH}": (
            {"dg 1 thread": _with_threads(1, mlp_dualgraph(MLP_BATCH, False)),
             "dg parallel 1 thread": _with_threads(1, mlp_dualgraph(MLP_BATCH, True)),
             "dg parallel 2 threads": _with_threads(2, mlp_dualgraph(MLP_BATCH, True))},
            ("mlp", sizes, MLP_BATCH, loss)),
    }
    if apart:
        table[f"MLP b{MLP_BATCH}"][0]["dg parallel 2 threads, regions apart"] = regions_apart(
            _with_threads(2, mlp_dualgraph(MLP_BATCH, True)))
    variants = ([(f"{parts} blocks", parts, True)] if parts else []) + (
        [("calls apart", 0, True), ("before", 4, False), ("unmerged", 4, False)]
        if before else [])

    def variant(label: str, n: int, chain: bool, factory):
        if label == "calls apart":
            return calls_apart(factory)
        if label == "unmerged":
            factory = regions_apart(factory)
        factory = with_parts(n, factory, chain)
        return calls_apart(factory) if label == "before" or label == "unmerged" else factory

    for label, n, chain in variants:
        table[f"MLP b{MLP_BATCH}"][0][f"dg parallel 2 threads, {label}"] = variant(
            label, n, chain, _with_threads(2, mlp_dualgraph(MLP_BATCH, True)))
    if models:
        for name, row in (("cnn", "W4cnn"), ("transformer", "W5tr")):
            table[row] = ({"dg 1 thread": _with_threads(1, model_dualgraph(name, False)),
                           "dg parallel 1 thread": _with_threads(1, model_dualgraph(name, True)),
                           "dg parallel 2 threads": _with_threads(2, model_dualgraph(name,
                                                                                     True))},
                          (name,))
            for label, n, chain in variants:
                table[row][0][f"dg parallel 2 threads, {label}"] = variant(
                    label, n, chain, _with_threads(2, model_dualgraph(name, True)))
    out = {}
    for row, (cols, params) in table.items():
        if "torch" in available and peers.has("torch", params[0]):
            cols["torch 1 thread"] = _with_threads(1, _peer("torch", *params))
            cols["torch 2 threads"] = _with_threads(2, _peer("torch", *params))
        if "jax" in available and peers.has("jax", params[0]):
            cols["jax.jit"] = _with_threads(2, _peer("jax", *params))
        out[row] = cols
    return out


def _available() -> list[str]:
    found = []
    for impl, module in (("torch", "torch"), ("jax", "jax")):
        try:
            __import__(module)
            found.append(impl)
        except ImportError:
            pass
    return found


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--block", type=float, default=0.3, help="seconds per block of calls")
    ap.add_argument("--models", action="store_true", help="also the cnn and transformer steps")
    ap.add_argument("--row", action="append", help="only these rows (W3, MLP, W4cnn, W5tr)")
    ap.add_argument("--json", help="per-round times here")
    ap.add_argument("--apart", action="store_true",
                    help="the MLP row also with each product and its loop in regions apart")
    ap.add_argument("--parts", type=int,
                    help="the MLP and model rows also with their products cut in this many "
                         "blocks (4: the cut before it followed the pool's size)")
    ap.add_argument("--before", action="store_true",
                    help="the MLP and model rows also with row calls apart, in 4 blocks with "
                         "no chained products, and so with every product and loop apart")
    args = ap.parse_args()
    single_thread.limit = lambda: None  # the peers' builders must not pin this process
    meta = interleaved.machine()
    meta["cpus"] = CPUS
    results = {}
    for row, cols in rows(args.models, _available(), args.apart, args.parts,
                          args.before).items():
        if args.row and not any(row.startswith(r) for r in args.row):
            continue
        print(f"{row}: {', '.join(cols)}", flush=True)
        results[row] = interleaved.measure(cols, args.rounds, args.block, peers.readback)
    meta["load_after"] = interleaved.machine().get("load")
    print(f"\n{meta}; {args.rounds} rounds; median per-round ratio (interquartile range)")
    base = "dg parallel 2 threads"
    apart = [(base, f"{base}, regions apart")] if args.apart else []
    if args.parts:
        apart.append((base, f"{base}, {args.parts} blocks"))
    if args.before:
        apart += [(base, f"{base}, {label}") for label in ("calls apart", "before", "unmerged")]
    for clock in ("wall", "cpu"):
        print(f"\n{clock} time\n")
        print(interleaved.table(results, [
            (base, "dg 1 thread"), ("dg parallel 2 threads", "dg parallel 1 thread"),
            ("numba prange 2 threads", "numba prange 1 thread"), (base, "torch 2 threads"),
            (base, "jax.jit")] + apart, clock=clock))
    if args.json:
        interleaved.save(args.json, results, meta)


if __name__ == "__main__":
    main()
