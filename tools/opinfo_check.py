"""Differential check against PyTorch's OpInfo database (development tool; needs torch).

For every entry of torch's ``op_db`` whose name dualgraph also has (``add``,
``nn.functional.relu``, ``linalg.det``, ``special.erfc``, or a Tensor method such as
``expand_as``), the OpInfo sample inputs for CPU float32 and float64 are run through the
same-named torch and dualgraph callables. Values are compared; for float64 samples of
differentiable ops, the gradients of ``sum(out * cotangent)`` with respect to every input
tensor are compared too. A sample torch itself rejects is skipped; a dualgraph exception
is a failure. The summary lists pass rates by op, and ``--failures`` prints one line per
failing sample (op, dtype, what failed, the error or the largest difference).

    python -m tools.opinfo_check                     # summary of every shared name
    python -m tools.opinfo_check --ops add,amax -v   # selected ops, every failure
    python -m tools.opinfo_check --json out.json     # per-op results for comparison

Without torch it prints a note and exits 0: it is not part of the default test suite.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import types
import unittest
import warnings
from dataclasses import dataclass, field
from typing import Any

import numpy as np

# Ops whose values are random or uninitialised: only shapes and dtypes are compared.
_UNCOMPARABLE_VALUES = ("rand", "normal", "bernoulli", "multinomial", "dropout", "rrelu",
                        "empty", "poisson", "uniform", "cauchy", "exponential", "geometric",
                        "log_normal")
# Names whose dualgraph function is something else (``dg.trace`` traces a function):
# their Tensor method is compared.
_METHOD_ONLY = {"trace"}
# OpInfo names whose torch and dualgraph callables are looked up as methods.
_DUNDER_REFLECTED = {"__radd__", "__rsub__", "__rmul__", "__rdiv__", "__rpow__",
                     "__rmatmul__", "__rand__", "__ror__", "__rxor__", "__rmod__"}


@dataclass
class Result:
    """Counts for one OpInfo entry (name plus variant)."""

    samples: int = 0
    value_ok: int = 0
    grad_samples: int = 0
    grad_ok: int = 0
    failures: list[str] = field(default_factory=list)


def _load_op_db() -> list:
    # torch's testing package imports expecttest only for its TestCase base; op_db and the
    # sample-input generators never use it.
    if "expecttest" not in sys.modules:
        try:
            import expecttest  # noqa: F401
        except ImportError:
            stub = types.ModuleType("expecttest")
            stub.TestCase = unittest.TestCase
            sys.modules["expecttest"] = stub
    from torch.testing._internal.common_methods_invocations import op_db

    return op_db


def _resolve(root: Any, dotted: str) -> Any:
    obj = root
    for part in dotted.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def callables(opinfo: Any, torch: Any, dg: Any) -> tuple[Any, Any] | None:
    """The torch and dualgraph callables of the same name, or None if dualgraph lacks it."""
    name = opinfo.name
    if name.startswith(("torch.ops", "_", "masked.", "sparse.", "fft.", "jiterator")) and \
            name not in _DUNDER_REFLECTED:
        return None
    if name in _DUNDER_REFLECTED:
        if not hasattr(dg.Tensor, name):
            return None
        return (lambda x, *a, **k: getattr(x, name)(*a, **k),) * 2
    t_fn, d_fn = _resolve(torch, name), _resolve(dg, name)
    if name in _METHOD_ONLY:
        t_fn = d_fn = None
    if t_fn is not None and d_fn is not None and callable(d_fn) and not isinstance(d_fn, type):
        return t_fn, d_fn
    if opinfo.method_variant is not None and "." not in name and hasattr(dg.Tensor, name):
        return (lambda x, *a, **k: getattr(x, name)(*a, **k),) * 2
    return None


class Converter:
    """Maps torch sample arguments to dualgraph ones, keeping leaves for the gradient."""

    def __init__(self, torch: Any, dg: Any) -> None:
        self.torch, self.dg = torch, dg

    def dtype(self, d: Any) -> Any:
        return getattr(self.dg, str(d).rsplit(".", 1)[-1])

    def __call__(self, x: Any, leaves: list | None = None) -> Any:
        torch, dg = self.torch, self.dg
        if isinstance(x, torch.Tensor):
            if x.is_complex() or x.dtype in (torch.bfloat16, torch.float16):
                raise _UnsupportedError(f"dtype {x.dtype}")
            t = dg.tensor(x.detach().numpy().copy(), requires_grad=x.requires_grad)
            if leaves is not None and x.requires_grad:
                leaves.append((x, t))
            return t
        if isinstance(x, torch.Size):
            return tuple(x)
        if isinstance(x, torch.dtype):
            return self.dtype(x)
        if isinstance(x, torch.device):
            return str(x)
        if isinstance(x, torch.memory_format):
            return getattr(dg, str(x).rsplit(".", 1)[-1])
        if isinstance(x, (list, tuple)) and not hasattr(x, "_fields"):
            return type(x)(self(v, leaves) for v in x)
        if isinstance(x, dict):
            return {k: self(v, leaves) for k, v in x.items()}
        if isinstance(x, torch.nn.Module) or type(x).__module__.startswith("torch"):
            raise _UnsupportedError(f"a torch object argument ({type(x).__name__})")
        return x


class _UnsupportedError(Exception):
    """A sample dualgraph cannot express (complex or half inputs): not counted."""


def _flat(out: Any, torch: Any) -> list:
    if isinstance(out, (list, tuple)):
        return [v for o in out for v in _flat(o, torch)]
    return [out]


def _as_array(v: Any) -> Any:
    if hasattr(v, "detach") and hasattr(v, "numpy"):
        v = v.detach()
        return np.asarray(v.numpy())
    if isinstance(v, (bool, int, float, np.generic)):
        return np.asarray(v)
    return v


def _compare(expected: Any, actual: Any, rtol: float, atol: float,
             values: bool = True) -> str | None:
    e, a = _as_array(expected), _as_array(actual)
    if not isinstance(e, np.ndarray) or not isinstance(a, np.ndarray):
        return None if e == a or type(e) is type(a) and str(e) == str(a) else \
            f"{type(a).__name__} {a!r} != {e!r}"
    if e.shape != a.shape:
        return f"shape {a.shape} != {e.shape}"
    if e.dtype != a.dtype and not (e.dtype == np.int64 and a.dtype == np.int64):
        return f"dtype {a.dtype} != {e.dtype}"
    if e.size == 0 or not values:
        return None
    if e.dtype.kind in "biu":
        return None if np.array_equal(e, a) else "values differ"
    ok = np.isclose(a, e, rtol=rtol, atol=atol, equal_nan=True)
    if ok.all():
        return None
    diff = np.where(ok, 0.0, np.abs(a.astype(np.float64) - e.astype(np.float64)))
    return f"max abs diff {np.nanmax(diff):.3g} (of {(~ok).sum()} elements)"


def _tolerances(dtype: Any, torch: Any) -> tuple[float, float]:
    return (1.3e-6 * 10, 1e-5 * 10) if dtype == torch.float32 else (1e-7, 1e-7)


def _random_sample(name: str, sample: Any) -> bool:
    if any(w in name for w in _UNCOMPARABLE_VALUES):
        return True
    p = sample.kwargs.get("dropout_p", 0.0)
    return bool(p) and sample.kwargs.get("training", True) is not False or \
        name.endswith("multi_head_attention_forward") and len(sample.args) > 9 \
        and sample.args[9] and sample.kwargs.get("training", True)


def _processed(fn: Any, out: Any) -> Any:
    """``out`` through the sample's ``output_process_fn_grad`` (which makes sign-ambiguous
    decompositions comparable), or as it is where that function cannot take it."""
    try:
        return fn(out)
    except Exception:  # noqa: BLE001 - torch-only code in the processing function
        return out


def check_sample(fns: tuple, sample: Any, dtype: Any, grad: bool, torch: Any, dg: Any,
                 convert: Converter, name: str = "") -> tuple[str | None, str | None, bool]:
    """(value failure, gradient failure, whether the gradient was checked)."""
    t_fn, d_fn = fns
    values = not _random_sample(name, sample)
    process = sample.output_process_fn_grad
    args = (sample.input, *sample.args)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            t_out = t_fn(*args, **sample.kwargs)
        except Exception:
            raise _UnsupportedError("torch rejects it") from None
    leaves: list = []
    d_args = convert(args, leaves)
    d_kwargs = convert(dict(sample.kwargs))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            d_out = d_fn(*d_args, **d_kwargs)
    except _UnsupportedError:
        raise
    except Exception as e:  # noqa: BLE001 - every dualgraph error is a finding
        msg = str(e).splitlines()[0] if str(e) else ""
        return f"{type(e).__name__}: {msg[:160]}", None, False
    rtol, atol = _tolerances(dtype, torch)
    t_out, d_out = _processed(process, t_out), _processed(process, d_out)
    t_flat, d_flat = _flat(t_out, torch), _flat(d_out, dg)
    if len(t_flat) != len(d_flat):
        return f"{len(d_flat)} outputs != {len(t_flat)}", None, False
    value_fail = None
    for i, (e, a) in enumerate(zip(t_flat, d_flat)):
        why = _compare(e, a, rtol, atol, values)
        if why:
            value_fail = f"output {i}: {why}" if len(t_flat) > 1 else why
            break
    if not grad or not leaves or value_fail or not values:
        return value_fail, None, False
    diff_out = [(e, a) for e, a in zip(t_flat, d_flat)
                if isinstance(e, torch.Tensor) and e.requires_grad and e.is_floating_point()]
    if not diff_out:
        return None, None, False
    rng = np.random.default_rng(0)
    cots = [rng.standard_normal(e.shape) for e, _ in diff_out]
    t_in = [t for t, _ in leaves]
    try:
        t_grads = torch.autograd.grad(
            [e for e, _ in diff_out], t_in, [torch.from_numpy(c) for c in cots],
            allow_unused=True)
        t_grads = [None if g is None else g.detach().numpy() for g in t_grads]
    except Exception:  # noqa: BLE001 - torch cannot differentiate this sample
        return value_fail, None, False
    try:
        outs = [a for _, a in diff_out]
        if any(not getattr(a, "requires_grad", False) for a in outs):
            return None, "output does not require grad", True
        d_grads = dg.autograd.grad(
            outs, [d for _, d in leaves], [dg.tensor(c) for c in cots], allow_unused=True)
    except Exception as e:  # noqa: BLE001
        msg = str(e).splitlines()[0] if str(e) else ""
        return None, f"{type(e).__name__}: {msg[:160]}", True
    for i, (e, a) in enumerate(zip(t_grads, d_grads)):
        if e is None and a is None:
            continue
        if e is None or a is None:
            zero = e if a is None else a
            if not np.any(_as_array(zero)):
                continue
            return None, f"grad {i}: {'missing' if a is None else 'unexpected'}", True
        why = _compare(e, a, 1e-6, 1e-6)
        if why:
            return None, f"grad {i}: {why}", True
    return None, None, True


def run(names: set[str] | None = None, verbose: bool = False) -> dict[str, Result]:
    """Check every shared OpInfo entry (or those named) and return per-entry results."""
    import torch

    import dualgraph as dg

    convert = Converter(torch, dg)
    results: dict[str, Result] = {}
    for opinfo in _load_op_db():
        key = opinfo.name + (f".{opinfo.variant_test_name}" if opinfo.variant_test_name else "")
        if names and opinfo.name not in names and key not in names:
            continue
        fns = callables(opinfo, torch, dg)
        if fns is None:
            continue
        res = results.setdefault(key, Result())
        supported = opinfo.supported_dtypes("cpu")
        for dtype in (torch.float32, torch.float64):
            if dtype not in supported:
                continue
            grad = dtype == torch.float64 and opinfo.supports_autograd
            try:
                samples = list(opinfo.sample_inputs("cpu", dtype, requires_grad=grad))
            except Exception:  # noqa: BLE001 - a generator torch cannot run is not ours
                continue
            for k, sample in enumerate(samples):
                torch.manual_seed(0)
                try:
                    vf, gf, checked = check_sample(fns, sample, dtype, grad, torch, dg, convert,
                                                   key)
                except _UnsupportedError:
                    continue
                except Exception as e:  # noqa: BLE001 - a comparison the checker cannot make
                    vf, gf, checked = f"checker: {type(e).__name__}: {e}"[:200], None, False
                res.samples += 1
                res.value_ok += vf is None
                res.grad_samples += checked
                res.grad_ok += checked and gf is None
                if vf or gf:
                    what = f"value {vf}" if vf else f"grad {gf}"
                    res.failures.append(f"{key} {str(dtype)[6:]} #{k} {_describe(sample)}: "
                                        f"{what}")
        if verbose and res.failures:
            print("\n".join(res.failures), flush=True)
        print(f"{key}: {res.value_ok}/{res.samples} values, {res.grad_ok}/{res.grad_samples} "
              "gradients", file=sys.stderr, flush=True)
    return results


def _describe(sample: Any) -> str:
    def d(x: Any) -> str:
        if hasattr(x, "shape") and hasattr(x, "dtype"):
            return f"T{list(x.shape)}"
        if isinstance(x, (list, tuple)):
            inner = ",".join(d(v) for v in x[:4])
            return f"[{inner}{',...' if len(x) > 4 else ''}]"
        return repr(x)[:30]

    parts = [d(sample.input)] + [d(a) for a in sample.args]
    parts += [f"{k}={d(v)}" for k, v in sample.kwargs.items()]
    return "(" + ", ".join(parts) + ")"


def summary(results: dict[str, Result]) -> str:
    """Pass rates by op and by sample, values and gradients."""
    ops = [r for r in results.values() if r.samples]
    v_ops = sum(r.value_ok == r.samples for r in ops)
    g_ops = [r for r in ops if r.grad_samples]
    g_ok = sum(r.grad_ok == r.grad_samples and r.value_ok == r.samples for r in g_ops)
    samples = sum(r.samples for r in ops)
    lines = [
        f"entries checked: {len(ops)}, samples: {samples}",
        f"values:    {v_ops}/{len(ops)} entries pass every sample "
        f"({100 * v_ops / max(len(ops), 1):.1f}%), "
        f"{sum(r.value_ok for r in ops)}/{samples} samples",
        f"gradients: {g_ok}/{len(g_ops)} differentiable entries pass every sample "
        f"({100 * g_ok / max(len(g_ops), 1):.1f}%), "
        f"{sum(r.grad_ok for r in g_ops)}/{sum(r.grad_samples for r in g_ops)} samples",
    ]
    failing = sorted((k for k, r in results.items() if r.failures),
                     key=lambda k: -len(results[k].failures))
    if failing:
        lines.append("failing entries (failed samples): " + ", ".join(
            f"{k} ({len(results[k].failures)})" for k in failing))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ops", help="comma-separated OpInfo names (name or name.variant)")
    p.add_argument("-v", "--failures", action="store_true", help="print each failing sample")
    p.add_argument("--json", help="write per-entry results to this file")
    a = p.parse_args(argv)
    try:
        import torch  # noqa: F401
    except ImportError:
        print("opinfo_check: torch is not installed; nothing to compare against")
        return 0
    t0 = time.perf_counter()
    results = run(set(a.ops.split(",")) if a.ops else None, a.failures)
    print(summary(results))
    print(f"({time.perf_counter() - t0:.0f} s)")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({k: {"samples": r.samples, "value_ok": r.value_ok,
                           "grad_samples": r.grad_samples, "grad_ok": r.grad_ok,
                           "failures": r.failures} for k, r in results.items()}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
