"""What a program's compiled training step compiles: its kernels, their functions (the
parts of split kernels), how many are distinct, and the CPU time of a cold compile.

    PYTHONPATH=. python -m tests.programs.compile_census PROGRAM [--lines] [--no-compile]

PROGRAM: mingpt, nanogpt, makemore-KIND (transformer, mlp, rnn, gru, bow), or a workload
of `dualgraph.workloads.model_step` (transformer, transformer-4, cnn).

Runs with an empty kernel cache (a fresh temporary directory), blocking compiles and one
compile process (``DUALGRAPH_COMPILE_JOBS=1`` unless set), and reports CPU seconds of
this process (`time.process_time`): on a loaded machine wall time says little.
``--no-compile`` lowers and splits the kernels but compiles nothing (the census only).
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import os
import sys
import tempfile
import time
from typing import Any


def _programs() -> dict:
    from . import runners

    out = {"mingpt": runners.mingpt, "nanogpt": runners.nanogpt}
    for kind in ("transformer", "mlp", "rnn", "gru", "bow"):
        out[f"makemore-{kind}"] = (
            lambda torch, compiled, kind=kind: runners.makemore(torch, compiled=compiled,
                                                                model_type=kind))
    return out


def census(kernels: list) -> dict:
    """Functions of ``kernels`` (one per kernel, or one per part): total, distinct codes,
    lines of each distinct code, and how often each repeats."""
    codes: list[str] = []
    for k in kernels:
        codes.extend([p.code for p in k.parts] if k.parts else [k.code])
    count = collections.Counter(codes)
    return {"total": len(codes), "distinct": len(count),
            "lines": sum(c.count("\n") for c in count),
            "repeats": sorted(count.values(), reverse=True),
            "codes": count}


def run(program: str, compile_: bool = True) -> dict:
    import dualgraph as dg
    from tools.compile_profile import TakenError, build_swapped

    built: list = []
    cpu = {"build": 0.0, "compile": 0.0}
    real: list = []  # the backend's own build, while the stand-in is in place

    def build(*args: Any, **kwargs: Any) -> Any:
        t0 = time.process_time()
        k = real[0](*args, **kwargs)
        cpu["build"] += time.process_time() - t0
        built.append(k)
        if not compile_:
            raise TakenError
        real_compile = k.compile

        def timed(*a: Any, **kw: Any) -> float:
            t1 = time.process_time()
            try:
                return real_compile(*a, **kw)
            finally:
                cpu["compile"] += time.process_time() - t1

        k.compile = timed
        return k

    t0 = time.process_time()
    with build_swapped(build) as found:
        real.append(found)
        if program in _programs():
            try:
                _programs()[program](dg, compiled=True)
            except TakenError:
                pass
        else:
            from dualgraph.workloads import model_step

            step, args, _ = model_step(program)
            try:
                dg.compile(step, tiered=False)(*args)
            except TakenError:
                pass
    total = time.process_time() - t0
    c = census(built)
    return {"program": program, "kernels": len(built), "cpu_total": total, **cpu, **c}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("program")
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--lines", action="store_true", help="print each distinct function")
    ns = ap.parse_args(argv)
    os.environ.setdefault("DUALGRAPH_COMPILE_JOBS", "1")
    os.environ["DUALGRAPH_TIERED"] = "0"
    with tempfile.TemporaryDirectory(prefix="dg-census-") as d:
        os.environ["DUALGRAPH_CACHE_DIR"] = d
        r = run(ns.program, not ns.no_compile)
    print(f"{r['program']}: {r['kernels']} kernels, {r['total']} functions, "
          f"{r['distinct']} distinct ({r['lines']} lines); repeats {r['repeats']}")
    print(f"cpu s: total {r['cpu_total']:.1f}, build {r['build']:.1f}, "
          f"compile {r['compile']:.1f}")
    if ns.lines:
        for code, n in r["codes"].items():
            digest = hashlib.sha1(code.encode()).hexdigest()[:8]
            print(f"--- {digest} x{n} ({code.count(chr(10))} lines)")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
