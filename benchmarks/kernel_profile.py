"""Where a compiled step's time goes, block by block of its generated kernel.

    python benchmarks/kernel_profile.py transformer [--calls 20] [--top 30]

Compiles ``dualgraph.workloads.model_step(name)`` (warm kernel cache if there is one), runs
one call and captures the arguments its kernel receives. It then rewrites the kernel's
source with a cycle-counter read (``llvm.readcyclecounter``) before every top-level block
(each starts with its graph line as a comment), compiles that copy with Numba (cold: as
long as the kernel's own compile; cached on disk next to this file's output after that),
runs it ``--calls`` times on the captured arguments and prints the time per block and per
op family. The counter costs a few nanoseconds per block, so the total stays within a
percent of the uninstrumented kernel's time, which is printed beside it.

Pinned to one CPU, one thread. On a loaded machine the shares are the claim, not the
milliseconds.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import os
import re
import sys
import time
from collections import defaultdict

os.environ.setdefault("NUMBA_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np  # noqa: E402
from llvmlite import ir  # noqa: E402
from numba import types  # noqa: E402
from numba.core import cgutils  # noqa: E402
from numba.core.extending import intrinsic  # noqa: E402


@intrinsic
def rdtsc(typingctx):
    """The CPU's cycle counter (``llvm.readcyclecounter``)."""
    def codegen(context, builder, signature, args):
        fnty = ir.FunctionType(ir.IntType(64), [])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.readcyclecounter")
        return builder.call(fn, [])

    return types.int64(), codegen


# op family of a graph line's op (the first word after '=').
FAMILIES = [
    ("products", ("matmul", "addmm", "kind='matmul'", "conv2d", "im2col", "col2im")),
    ("softmax/log_softmax (+bwd)", ("softmax", "log_softmax")),
    ("nll_loss (+bwd)", ("nll_loss",)),
    ("layer_norm fwd", ("layer_norm",)),
    ("pools", ("pool", "pad_index", "unfold")),
    ("copies (reshape/getitem/scatter/transpose)", ("reshape", "getitem", "scatter",
                                                    "transpose", "concat", "outputs")),
    ("index/embedding", ("index",)),
]


def family(comment: str, body: str) -> str:
    op = comment.split("=", 1)[1].split()[0] if "=" in comment else comment
    op = op.split("[")[0]
    if "erf" in body or "exp_f32" in body and "0.7071067811865475" in body:
        return "GELU (erf) fwd/bwd"
    if "kind='reduce'" in comment or op in ("sum", "mean", "max", "amax"):
        return "reductions (layer_norm bwd, bias grads)"
    if "kind='elementwise'" in comment or op in ("add", "sub", "mul", "where", "eq", "div"):
        if "** " in body or "sqrt(v" in body:
            return "optimizer update"
        return "elementwise (other)"
    for name, keys in FAMILIES:
        if any(k == op or k in comment for k in keys):
            return name
    return "other: " + op


HEAD = re.compile(r"^    (# %.*|# outputs)$")


def instrument(source: str) -> tuple[str, list]:
    """The kernel source with a counter read before each top-level block, and the blocks
    (comment, body) in order."""
    lines = source.split("\n")
    out, blocks = [], []
    in_def = False
    cur_body: list = []
    for line in lines:
        if line.startswith("@dgc.njit"):
            out.append("@numba.njit(cache=True, error_model='numpy', nogil=True)")
            continue
        if line.startswith("def kernel("):
            line = line.replace("def kernel(", "def kernel(dgprof_acc, ")
            in_def = True
            out.append(line)
            if line.rstrip().endswith(":"):
                out.append("    dgprof_t = dgprof.rdtsc()")
                in_def = False
            continue
        if in_def:
            out.append(line)
            if line.rstrip().endswith(":"):
                out.append("    dgprof_t = dgprof.rdtsc()")
                in_def = False
            continue
        m = HEAD.match(line)
        if m or line == "    return 0":
            k = len(blocks) - 1
            if k >= 0:
                blocks[-1] = (blocks[-1][0], "\n".join(cur_body))
                out += ["    dgprof_n = dgprof.rdtsc()",
                        f"    dgprof_acc[{k}] += dgprof_n - dgprof_t",
                        "    dgprof_t = dgprof_n"]
            if m:
                blocks.append((m.group(1), ""))
                cur_body = []
        cur_body.append(line)
        out.append(line)
    header = "from benchmarks import kernel_profile as dgprof\n"
    return header + "\n".join(out), blocks


def capture(name: str) -> tuple:
    import dualgraph as dg
    from dualgraph.backend import numba as backend
    from dualgraph.workloads import model_step

    seen = []
    orig = backend.Kernel.run

    def run(self, ins, outs):
        work = self.new_scratch()
        seen.append((self, list(ins) + list(self._consts) + work + list(outs)))
        return orig(self, ins, outs)

    step, args, _ = model_step(name)
    c = dg.compile(step, tiered=False)
    t = time.perf_counter()
    c(*args)
    print(f"first call (compile or cache load): {time.perf_counter() - t:.1f} s", flush=True)
    backend.Kernel.run = run
    c(*args)
    backend.Kernel.run = orig
    t = time.perf_counter()
    for _ in range(10):
        float(c(*args))
    step_ms = (time.perf_counter() - t) / 10 * 1e3
    return seen, step_ms


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("workload", choices=["cnn", "transformer"])
    p.add_argument("--calls", type=int, default=20)
    p.add_argument("--top", type=int, default=25)
    p.add_argument("--out", default=os.path.join(os.path.dirname(__file__), ".profile"))
    a = p.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[-1]})
    seen, step_ms = capture(a.workload)
    print(f"compiled step: {step_ms:.2f} ms per call (dg.compile's call path included)")
    os.makedirs(a.out, exist_ok=True)
    fam_total: dict = defaultdict(float)
    rows = []
    total_ms = 0.0
    for kernel, kargs in seen:
        src, blocks = instrument(kernel.source)
        tag = hashlib.sha1(src.encode()).hexdigest()[:12]
        path = os.path.join(a.out, f"prof_{a.workload}_{tag}.py")
        if not os.path.exists(path):
            with open(path, "w") as f:
                f.write(src)
        spec = importlib.util.spec_from_file_location(f"prof_{tag}", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        acc = np.zeros(len(blocks), np.int64)
        t = time.perf_counter()
        mod.kernel(acc, *kargs)
        print(f"instrumented kernel ({len(blocks)} blocks) compiled/loaded in "
              f"{time.perf_counter() - t:.1f} s", flush=True)
        acc[:] = 0
        c0, t0 = rdtsc_py(), time.perf_counter()
        for _ in range(a.calls):
            mod.kernel(acc, *kargs)
        c1, t1 = rdtsc_py(), time.perf_counter()
        per_cycle = (t1 - t0) / max(c1 - c0, 1)
        kms = (t1 - t0) / a.calls * 1e3
        total_ms += kms
        print(f"kernel: {kms:.2f} ms per call")
        for (comment, body), cyc in zip(blocks, acc):
            ms = cyc * per_cycle / a.calls * 1e3
            fam = family(comment, body)
            fam_total[fam] += ms
            rows.append((ms, fam, comment[:110]))
    print(f"\n== by op family ({total_ms:.2f} ms per call in kernels)")
    for fam, ms in sorted(fam_total.items(), key=lambda kv: -kv[1]):
        print(f"{ms:8.2f} ms {100 * ms / total_ms:5.1f}%  {fam}")
    print(f"\n== top {a.top} blocks")
    for ms, fam, comment in sorted(rows, reverse=True)[:a.top]:
        print(f"{ms:8.3f} ms  {fam:30.30s} {comment}")


def rdtsc_py() -> int:
    return int(_rdtsc_py())


try:
    import numba

    @numba.njit(cache=False)
    def _rdtsc_py():
        return rdtsc()
except Exception:  # pragma: no cover
    raise


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    main()
