"""PyTorch parity without torch: dualgraph, eager and compiled, against recorded goldens.

``goldens.json`` holds what PyTorch computed for every program in ``programs.py`` (outputs,
input gradients, dtypes, shapes, exception types); ``record.py`` regenerates it and is the
only file that imports torch. Each program runs here eagerly and, when it is a pure
function of its inputs, under ``dg.compile`` (one trace, one Numba compile). The compiled
runs of the registry-op programs (source ``"ops"``) are marked ``slow``: their kernels are
the costly ones, and tests/backend/test_ops_compiled.py checks compiled == eager per op;
so are the few hand-written programs listed in `SLOW_COMPILED`.

Where dualgraph is known to differ, the (program, mode) pair is listed in
`KNOWN_DIVERGENCES`, the one place they live: it is a strict xfail, so a fix turns the test
into an XPASS failure that forces the entry's removal.
"""

from __future__ import annotations

import builtins
import json
import warnings
from pathlib import Path

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.nn import functional as F
from dualgraph.ops.registry import OPS

from .programs import PROGRAMS, Program, execute

GOLDENS: dict = json.loads((Path(__file__).parent / "goldens.json").read_text())
TOLERANCES = {"float32": (1.3e-6, 1e-5), "float64": (1e-7, 1e-7)}

# (program, mode) -> what dualgraph gets wrong. Each reason says what differs: this table is
# the parity bug list.
KNOWN_DIVERGENCES: dict[tuple[str, str], str] = {}

MODES = ("eager", "compiled")

# Hand-written programs whose compiled run is marked slow, and where the default run still
# covers what it compiles. Their eager runs stay in the default run.
SLOW_COMPILED: dict[str, str] = {
    # Complex ops decompose into real ones at trace time; each of these compiles dozens of
    # kernels. rotary_embedding (compiled by default) and tests/compile/test_complex.py
    # (a training step through complex intermediates) cover the compiled path.
    "complex_arithmetic": "complex arithmetic compiled == eager: rotary_embedding and "
                          "tests/compile/test_complex.py",
    "complex_products": "complex matmul/einsum compiled: tests/compile/test_complex.py",
    "complex_polar_and_shapes": "complex shapes compiled: rotary_embedding",
    "complex_trigonometric": "complex sin/cos/tanh/sigmoid compose real elementwise ops, "
                             "which rotary_embedding's compiled run covers",
    # ~55 s of cold Numba compile each (the recurrent kernels are the suite's biggest).
    "recurrent_layers": "rnn_layer and rnn_layer_backward compiled == eager for every mode "
                        "(tanh, relu, LSTM, GRU; reversed; with lengths): rows-recurrent0 "
                        "of tests/backend/test_ops_compiled.py",
    "recurrent_projected_packed": "rnn_layer_proj compiled == eager, reversed and with "
                                  "lengths: rows-recurrent0 of "
                                  "tests/backend/test_ops_compiled.py",
    # 20-30 s of cold Numba compile each on a two-core runner. Each is a list of calls of
    # ops whose compiled == eager the rows of tests/backend/test_ops_compiled.py pin in
    # the same forms; the eager run here (default) pins the program to torch.
    "interpolates": "interpolate is pool_gather, mul and add with indices and weights "
                    "made at trace time as eagerly: the interpolate and upsample rows "
                    "(nearest, bilinear and trilinear with align_corners, linear, "
                    "nearest-exact) of rows-composite3 and rows-composite6, pool_gather in "
                    "rows-gather1",
    "indexing_family": "setitem, index_put with accumulate, scatter, scatter_add, "
                       "index_add, index_fill, gather, take_along_dim, index_select: "
                       "rows-gather0 and rows-gather1 (float32 and float64); masked_fill "
                       "in rows-composite2, scatter_reduce in rows-composite6",
    "shape_products_differences": "diff (with prepend), cross, outer, kron: the "
                                  "shape_extra program (float32 and float64) and "
                                  "rows-composite4 and rows-composite5",
    "cross_entropy_forms": "cross_entropy with weights, ignore_index, label smoothing, "
                           "probability targets, N-d and 1-d inputs and the module: "
                           "rows-composite0 and rows-composite5",
}


def _cases() -> list:
    cases = []
    for name, prog in PROGRAMS.items():
        for mode in MODES:
            if mode == "compiled" and not prog.compile:
                continue
            reason = KNOWN_DIVERGENCES.get((name, mode))
            marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
            if mode == "compiled" and prog.source == "ops":
                # tests/backend/test_ops_compiled.py already pins compiled == eager for
                # every registry op in the default run; these bigger kernels add ~2 minutes
                # of cold Numba compiles under load.
                marks.append(pytest.mark.slow)
            if mode == "compiled" and name in SLOW_COMPILED:
                marks.append(pytest.mark.slow)
            cases.append(pytest.param(name, mode, marks=marks, id=f"{name}-{mode}"))
    return cases


# ------------------------------------------------------------------ comparison


def _compare(actual: dict, expected: dict, where: str, out: list) -> None:
    """Append a line to ``out`` for every difference between two encoded values."""
    if actual["kind"] != expected["kind"]:
        out.append(f"{where}: {actual['kind']} {_brief(actual)}, PyTorch gives "
                   f"{expected['kind']} {_brief(expected)}")
        return
    kind = expected["kind"]
    if kind == "tuple":
        a, e = actual["items"], expected["items"]
        if len(a) != len(e):
            out.append(f"{where}: {len(a)} items, PyTorch gives {len(e)}")
        for i, (x, y) in enumerate(zip(a, e)):
            _compare(x, y, f"{where}[{i}]", out)
    elif kind == "tensor":
        _compare_tensor(actual, expected, where, out)
    elif kind != "none" and actual["value"] != expected["value"]:
        out.append(f"{where}: {actual['value']!r}, PyTorch gives {expected['value']!r}")


def _compare_tensor(a: dict, e: dict, where: str, out: list) -> None:
    bad = []
    if a["dtype"] != e["dtype"]:
        bad.append(f"dtype {a['dtype']} (PyTorch {e['dtype']})")
    if a["shape"] != e["shape"]:
        bad.append(f"shape {tuple(a['shape'])} (PyTorch {tuple(e['shape'])})")
    if a["requires_grad"] != e["requires_grad"]:
        bad.append(f"requires_grad={a['requires_grad']} (PyTorch {e['requires_grad']})")
    if a["shape"] == e["shape"]:
        x = np.asarray(a["data"], dtype=np.float64 if e["dtype"].startswith("float") else None)
        y = np.asarray(e["data"], dtype=x.dtype)
        if e["dtype"].startswith("float"):
            rtol, atol = TOLERANCES.get(e["dtype"], TOLERANCES["float32"])
            if a["dtype"] != e["dtype"]:  # compare the values anyway, at the looser dtype
                rtol, atol = TOLERANCES["float32"]
            close = np.isclose(x, y, rtol=rtol, atol=atol, equal_nan=True)
            # -0.0 vs +0.0 is a real IEEE difference (1/x differs): compare zeros' signs.
            close &= ~((y == 0) & (np.signbit(x) != np.signbit(y)))
        else:
            close = x == y
        if not np.all(close):
            bad.append(f"values {_fmt(x)} (PyTorch {_fmt(y)})")
    if bad:
        out.append(f"{where}: " + "; ".join(bad))


def _fmt(a: np.ndarray) -> str:
    return np.array2string(a[:12], precision=6, separator=", ")


def _brief(v: dict) -> str:
    if v["kind"] == "tensor":
        return f"{v['dtype']}{v['shape']} {_fmt(np.asarray(v['data']))}"
    if v["kind"] == "tuple":
        return "(" + ", ".join(_brief(x) for x in v["items"]) + ")"
    return repr(v.get("value", ""))


def differences(prog: Program, actual: dict, expected: dict) -> list[str]:
    """Every way ``actual`` (dualgraph) differs from ``expected`` (PyTorch's golden)."""
    a_err, e_err = actual.get("error"), expected.get("error")
    if e_err is not None:
        if a_err is None:
            return [f"returns {_brief(actual['outputs'])}; PyTorch raises "
                    f"{e_err['type']}: {e_err['message']}"]
        want = getattr(builtins, e_err["type"])
        got = actual["exception"]  # isinstance: dualgraph may raise a subclass
        out = []
        if not isinstance(got, want):
            out.append(f"raises {a_err['type']}: {a_err['message']}; PyTorch raises "
                       f"{e_err['type']}: {e_err['message']}")
        elif prog.match and prog.match.lower() not in a_err["message"].lower():
            out.append(f"message {a_err['message']!r} lacks {prog.match!r} (PyTorch: "
                       f"{e_err['message']!r})")
        return out
    if a_err is not None:
        return [f"raises {a_err['type']}: {a_err['message']}"]
    out: list[str] = []
    _compare(actual["outputs"], expected["outputs"], "output", out)
    if len(actual["grads"]) != len(expected["grads"]):
        out.append(f"{len(actual['grads'])} input grads, PyTorch {len(expected['grads'])}")
    for i, (x, y) in enumerate(zip(actual["grads"], expected["grads"])):
        _compare(x, y, f"grad of input {i}", out)
    return out


def run_dualgraph(prog: Program, mode: str) -> dict:
    """Run ``prog`` in dualgraph eagerly or compiled, noting NumPy warnings it leaks."""
    compiled = None
    if mode == "compiled":
        compiled = dg.compile(lambda *args: prog.fn(dg, F, *args))
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        result = execute(dg, F, prog, compiled)
    result["warnings"] = [f"{w.category.__name__}: {w.message}" for w in seen
                          if issubclass(w.category, RuntimeWarning)]
    if compiled is not None and "error" not in result:
        result["traces"] = compiled.stats.traces
    return result


# ----------------------------------------------------------------------- tests


@pytest.mark.parametrize(("name", "mode"), _cases())
def test_program_matches_pytorch(name: str, mode: str) -> None:
    prog = PROGRAMS[name]
    actual = run_dualgraph(prog, mode)
    problems = differences(prog, actual, GOLDENS[name])
    problems += [f"leaks {w} (PyTorch warns nothing)" for w in actual["warnings"]]
    if actual.get("traces", 1) != 1:
        problems.append(f"compiled run traced {actual['traces']} times, expected once")
    assert not problems, f"{name} ({mode}) differs from PyTorch:\n  " + "\n  ".join(problems)


def test_goldens_cover_every_program() -> None:
    recorded = {k for k in GOLDENS if not k.startswith("_")}
    assert recorded == set(PROGRAMS), (
        "goldens.json is out of date: rerun tests/goldens/record.py with torch (docs/eager.md)"
    )


# Random ops draw another stream than PyTorch's, so their values have no golden; their
# statistics, eval-mode identity and mask gradients are tested in tests/compile/test_random.py.
# (A deterministic program, such as dropout with p=1, could be recorded once torch is here.)
# reduce_precision (autocast's rounding to bfloat16/float16) has no torch op of its own:
# it is checked against NumPy's casts and torch's autocast results in
# tests/compile/test_autocast.py.
NO_GOLDEN = {"dropout", "rand", "randn", "reduce_precision"}


def test_every_registered_op_has_a_program() -> None:
    coverage = {op: [n for n, p in PROGRAMS.items() if op in p.covers] for op in OPS}
    missing = sorted(op for op, names in coverage.items() if not names and op not in NO_GOLDEN)
    assert not missing, f"registry ops without a golden program: {missing}"
    unknown = {op for p in PROGRAMS.values() for op in p.covers} - set(OPS)
    assert not unknown, f"programs claim to cover unregistered ops: {sorted(unknown)}"


def test_slow_compiled_names_real_compiled_programs() -> None:
    for name in SLOW_COMPILED:
        assert name in PROGRAMS and PROGRAMS[name].compile, name


def test_known_divergences_name_real_cases() -> None:
    for name, mode in KNOWN_DIVERGENCES:
        assert name in PROGRAMS, name
        assert mode in MODES, (name, mode)
        assert mode == "eager" or PROGRAMS[name].compile, f"{name} never runs compiled"


def test_checking_needs_no_torch() -> None:
    here = Path(__file__).parent
    for name in ("programs.py", "test_goldens.py"):
        text = (here / name).read_text()
        assert "import " + "torch" not in text, f"{name} must run without torch"
