"""What a program's compiled training step compiles: its kernels, their functions (the
parts of split kernels), how many are distinct, and the CPU time of a cold compile.

    PYTHONPATH=. python -m tests.programs.compile_census PROGRAM [--lines] [--no-compile]
        [--functions [--signatures]]

PROGRAM: mingpt, nanogpt, makemore-KIND (transformer, mlp, rnn, gru, bow), the
pytorch/examples programs (mnist, vae, dcgan, regression, wlm-LSTM, wlm-Transformer), a
written program as DIRECTORY/NAME (``written10/glow``: `written_sets.SETS`), or a
workload of `dualgraph.workloads.model_step` (transformer, transformer-4, cnn).

A program starts from torch's initial weights (its golden), runs its ten compiled steps
(regression: until its own stopping criterion) and is checked against torch's losses
(1e-5; regression: its first 100; a written program: its set's tolerances): the report
gives the traces (a list for a program with several compiled functions) and whether they
match.

Runs with an empty kernel cache (a fresh temporary directory), blocking compiles and one
compile process (``DUALGRAPH_COMPILE_JOBS=1`` unless set), and reports CPU seconds of
this process (`time.process_time`): on a loaded machine wall time says little.
``--no-compile`` lowers and splits the kernels but compiles nothing (the census only).
``--functions`` prints instead where the compile goes: each distinct function compiled
alone, the costliest first (thread CPU seconds, Numba's LLVM share); with
``--signatures`` also each function's arguments and the CPU of compiling them alone (its
``def`` line and ``return 0``, `compile_profile.signature_only`).
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


def _golden_run(name: str) -> Any:
    """A runner of test_programs' kind: ``(torch, compiled) -> out``, from torch's weights
    (and recorded random draws) in goldens/, with the losses to compare against."""
    import json

    import numpy as np

    from . import runners
    from .harness import GOLDENS

    weights = np.load(GOLDENS / f"{name}.npz")
    extra: dict = {}
    draws = [weights[f"__draw{i}"] for i in range(len(weights.files))
             if f"__draw{i}" in weights.files]
    if draws:
        extra["draws"] = draws
    program, _, variant = name.partition("-")
    if variant:
        extra["model_type"] = variant
    want = json.loads((GOLDENS / "losses.json").read_text())["programs"][name]["losses"]

    def go(torch: Any, compiled: bool) -> dict:
        out = getattr(runners, program)(torch, weights=weights, compiled=compiled, **extra)
        out["want"] = want[:100] if name == "regression" else want
        out["losses"] = out["losses"][:len(out["want"])]
        return out

    return go


def _wlm_run(variant: str) -> Any:
    """word_language_model's step compiled as its test compiles it."""

    def go(torch: Any, compiled: bool) -> dict:
        from pathlib import Path

        import numpy as np

        from .word_language_model.config import setup

        gold = np.load(Path(__file__).resolve().parent / "word_language_model" / "goldens.npz")
        _, step, _ = setup(torch, variant)
        prefix = f"{variant}/param."
        step.model.load_state_dict({k[len(prefix):]: torch.tensor(gold[k])
                                    for k in gold.files if k.startswith(prefix)})
        source = torch.tensor(gold[f"{variant}/data"])
        if variant == "Transformer":
            fn = torch.compile(lambda data, targets: step.train_step(data, targets)[0])
        else:
            fn = torch.compile(lambda data, targets, h, c: step.train_step(data, targets,
                                                                            (h, c)))
            hidden = step.model.init_hidden(step.args.batch_size)
        losses = []
        for i in range(0, step.args.steps * step.args.bptt, step.args.bptt):
            data, targets = step.get_batch(source, i)
            if variant == "Transformer":
                loss = fn(data, targets)
            else:
                loss, hidden = fn(data, targets, *hidden)
            losses.append(loss.item())
        return {"losses": losses, "want": list(gold[f"{variant}/losses"]), "compiled": fn}

    return go


def _written_run(programs: Any, name: str) -> Any:
    """A written program's runner, from torch's weights, its compiled function(s) as
    ``compiled`` and torch's losses."""

    def go(torch: Any, compiled: bool) -> dict:
        from .harness import run_like_golden

        out, want = run_like_golden(programs, name, torch, compiled)
        fns = out["fn"] if isinstance(out["fn"], list) else [out["fn"]]
        return {"losses": [float(v) for v in out["losses"]], "want": want,
                "atol": programs.atol(name, compiled), "compiled": fns}

    return go


def _programs() -> dict:
    from .written_sets import SETS

    out = {f"{s.directory}/{name}": _written_run(s, name)
           for s in SETS for name in s.programs}
    out.update({name: _golden_run(name)
           for name in ("mingpt", "nanogpt", "mnist", "vae", "dcgan", "regression")})
    for kind in ("transformer", "mlp", "rnn", "gru", "bow"):
        out[f"makemore-{kind}"] = _golden_run(f"makemore-{kind}")
    for variant in ("LSTM", "Transformer"):
        out[f"wlm-{variant}"] = _wlm_run(variant)
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
    result: dict = {}
    with build_swapped(build) as found:
        real.append(found)
        if program in _programs():
            try:
                result = _programs()[program](dg, compiled=True)
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
    out = {"program": program, "kernels": len(built), "cpu_total": total, **cpu, **c}
    if "losses" in result:
        import numpy as np

        got, want = np.asarray(result["losses"]), np.asarray(result["want"], dtype=float)
        fns = result["compiled"]
        out["traces"] = ([f.stats.traces for f in fns] if isinstance(fns, list)
                         else fns.stats.traces)
        out["max_rel"] = float(np.max(np.abs(got - want) / np.abs(want))) if len(got) else 0.0
        out["match"] = got.shape == want.shape and bool(np.allclose(
            got, want, rtol=1e-5, atol=result.get("atol", 0.0)))
    return out


def program_graphs(program: str) -> list:
    """The optimized graphs (and in-place writes) `dg.compile` hands the backend for the
    program's compiled step, taken without compiling them (`compile_profile.step_graphs`'
    kind)."""
    import dualgraph as dg
    from tools.compile_profile import TakenError, build_swapped

    seen: list = []

    def take(graph: Any, parallel: bool = False, use_cache: bool = True,
             name: str = "kernel", write_to: Any = None, **kw: Any) -> Any:
        seen.append((graph, dict(write_to or {})))
        raise TakenError

    with build_swapped(take):
        try:
            _programs()[program](dg, compiled=True)
        except TakenError:
            pass
    return seen


def functions(program: str, top: int = 12, signatures: bool = False) -> None:
    """Print where the program's cold compile goes: each distinct function of its kernels
    compiled alone from an empty cache (`compile_profile.profile`), the costliest first,
    by thread CPU seconds, with Numba's LLVM share of each; ``signatures``: with its
    arguments and the CPU of compiling them alone."""
    from tools.compile_profile import profile

    rows = profile(program, graphs=program_graphs(program), signatures=signatures)
    fns = [r for r in rows if "cpu" in r]
    total, llvm = sum(r["cpu"] for r in fns), sum(r["llvm"] for r in fns)
    shared = sum(1 for r in rows if r.get("shared"))
    sig = (f"; signatures {sum(r['signature'] for r in fns):.2f} s for "
           f"{sum(r['args'] for r in fns)} arguments" if signatures else "")
    print(f"{program}: {len(fns)} distinct functions ({shared} parts shared), "
          f"{total:.2f} CPU s, LLVM {llvm:.2f} s{sig}; Numba's start "
          f"{rows[0]['warm_up']:.2f} s (load average {os.getloadavg()[0]:.1f})")
    extra = (" arguments | signature CPU s |", "---|---|") if signatures else ("", "")
    print(f"| CPU s | LLVM s | lines |{extra[0]} first op |")
    print(f"|---|---|---|{extra[1]}---|")
    for r in sorted(fns, key=lambda r: -r["cpu"])[:top]:
        cols = f" {r['args']} | {r['signature']:.2f} |" if signatures else ""
        print(f"| {r['cpu']:.2f} | {r['llvm']:.2f} | {r['lines']} |{cols} `{r['first']}` |")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("program")
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--lines", action="store_true", help="print each distinct function")
    ap.add_argument("--functions", action="store_true",
                    help="time each distinct function's compile alone instead")
    ap.add_argument("--signatures", action="store_true",
                    help="with --functions: also each function's arguments compiled alone")
    ns = ap.parse_args(argv)
    os.environ.setdefault("DUALGRAPH_COMPILE_JOBS", "1")
    os.environ["DUALGRAPH_TIERED"] = "0"
    if ns.functions:
        functions(ns.program, signatures=ns.signatures)
        return
    with tempfile.TemporaryDirectory(prefix="dg-census-") as d:
        os.environ["DUALGRAPH_CACHE_DIR"] = d
        r = run(ns.program, not ns.no_compile)
    print(f"{r['program']}: {r['kernels']} kernels, {r['total']} functions, "
          f"{r['distinct']} distinct ({r['lines']} lines); repeats {r['repeats']}")
    print(f"cpu s: total {r['cpu_total']:.1f}, build {r['build']:.1f}, "
          f"compile {r['compile']:.1f}")
    if "traces" in r:
        print(f"traces {r['traces']}; losses equal torch's to 1e-5: {r['match']} "
              f"(largest relative difference {r['max_rel']:.1e})")
    if ns.lines:
        for code, n in r["codes"].items():
            digest = hashlib.sha1(code.encode()).hexdigest()[:8]
            print(f"--- {digest} x{n} ({code.count(chr(10))} lines)")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
