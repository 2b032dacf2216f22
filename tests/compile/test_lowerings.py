"""The Numba backend's lowerings: one per registered op, kept in the backend, and what
compiling an op without one does. Also the reductions whose spec the backend reads
(empty ``mean``, ``max`` over bools), compiled against eager.
"""

from __future__ import annotations

import io
import re
import tokenize
from pathlib import Path

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.backend.numba import LoweringError, lowerings
from dualgraph.modes import bind
from dualgraph.ops.registry import OPS, OpDef
from dualgraph.testing import assert_close

from .._support.compiled import B3

OPS_DIR = Path(dg.__file__).parent / "ops"
# A scalar-expression placeholder: an operand ({0}) or a backend constant or function.
TEMPLATE = re.compile(r"\{(\d+|zero|one|half|exp|tanh|sigmoid)\}")


# ------------------------------------------------------------------- coverage


def test_every_registered_op_has_a_lowering() -> None:
    """A new op needs a row in the backend (docs/architecture.md, "Adding an op"): a scalar
    expression in `lowerings.SCALAR` (elementwise ops), a combine the backend knows
    (reductions), a ``@lowers`` function (the others), or a reason in `NOT_LOWERABLE`."""
    missing = sorted(name for name, op in OPS.items()
                     if lowerings.path(op) is None and name not in lowerings.NOT_LOWERABLE)
    assert not missing, f"ops without a Numba lowering: {missing}"


def test_lowering_tables_name_only_registered_ops() -> None:
    """A stale row (an op renamed or removed) would hide a missing lowering."""
    for table in (lowerings.SCALAR, lowerings.LOWER, lowerings.NOT_LOWERABLE):
        assert set(table) <= set(OPS), sorted(set(table) - set(OPS))
    for name in lowerings.NOT_LOWERABLE:
        assert name not in lowerings.SCALAR and name not in lowerings.LOWER, name
    for name in lowerings.SCALAR:
        assert OPS[name].loop_fusible, f"{name} has a scalar expression but is no loop op"


def test_coverage_check_catches_an_op_without_lowering() -> None:
    foo = OpDef("foo_unlowered", lambda x: x, lambda x: (tuple(x.shape), x.dtype), None, "",
                differentiable=False)
    assert lowerings.path(foo) is None
    assert lowerings.path(OPS["mul"]) == "loop"
    assert lowerings.path(OPS["sum"]) == "reduce"
    assert lowerings.path(OPS["matmul"]) == "kernel"


def _code_tokens(path: Path) -> list[str]:
    """The names and string literals of a module, docstrings and comments left out."""
    out = []
    prev = tokenize.NEWLINE
    for tok in tokenize.generate_tokens(io.StringIO(path.read_text()).readline):
        docstring = tok.type == tokenize.STRING and prev in (
            tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.NL)
        if tok.type in (tokenize.NAME, tokenize.STRING) and not docstring:
            out.append(tok.string)
        if tok.type not in (tokenize.COMMENT, tokenize.NL):
            prev = tok.type
    return out


@pytest.mark.parametrize("module", sorted(p.name for p in OPS_DIR.glob("*.py")))
def test_ops_know_no_backend(module: str) -> None:
    """ops/ holds semantics only: no Numba, no source templates (docs may name them)."""
    for tok in _code_tokens(OPS_DIR / module):
        assert "numba" not in tok.lower(), f"{module}: {tok}"
        assert not TEMPLATE.search(tok), f"{module}: a source template {tok}"
    fields = set(OpDef.__dataclass_fields__)
    assert not fields & {"scalar", "lower"}, fields


# ------------------------------------------------------------ missing lowering


def _infer_same(x):
    return tuple(x.shape), x.dtype


@pytest.mark.parametrize("elementwise", [False, True], ids=["kernel_op", "loop_op"])
def test_op_without_lowering_fails_at_compile_time(monkeypatch, elementwise: bool) -> None:
    """A clear error naming the op when the graph is lowered, before any kernel runs; the
    op still works eagerly (its NumPy kernel is the reference)."""
    name = "throwaway_double"
    op = OpDef(name, lambda x: x * 2, _infer_same, None, "", elementwise=elementwise,
               differentiable=False)
    monkeypatch.setitem(OPS, name, op)  # unregistered again after the test

    def fn(x):
        return bind(op, x + 1.0) * 3.0

    x = dg.tensor(np.arange(4.0))
    np.testing.assert_array_equal(fn(x).numpy(), (np.arange(4.0) + 1) * 6)
    f = dg.compile(fn)
    with pytest.raises(NotImplementedError,
                       match=f"the Numba backend has no lowering for op '{name}'") as info:
        f(x)
    assert isinstance(info.value, LoweringError)
    assert f.stats.kernels == 0


# ------------------------------------------------------------------ reductions


def _compiled_equals_eager(fn, *args) -> None:
    f = dg.compile(fn)
    got = f(*args)
    assert f.stats.kernels == 1
    exp = fn(*args).numpy()
    assert_close(got.numpy(), exp, equal_nan=True, msg=fn.__name__, **B3[exp.dtype])


@pytest.mark.parametrize("shape,axis",
                         [((3, 0), 1), ((0, 3), 0), ((0,), None), ((2, 0, 4), (1, 2))],
                         ids=["trailing", "leading", "full", "two_axes"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_empty_mean_is_nan(shape, axis, dtype) -> None:
    """A mean over no elements is 0/0 (nan, as in NumPy and eager), not a Numba error."""
    def mean_empty(x):
        return x.mean(axis=axis)

    x = dg.tensor(np.zeros(shape, dtype))
    expected = mean_empty(x).numpy()
    assert np.isnan(expected).all()
    _compiled_equals_eager(mean_empty, x)


def test_empty_sum_is_zero() -> None:
    def sum_empty(x):
        return x.sum(axis=1) + 1.0

    _compiled_equals_eager(sum_empty, dg.tensor(np.zeros((3, 0), np.float32)))


@pytest.mark.parametrize("axis", [None, 0, 1])
def test_max_over_bools(axis) -> None:
    """max of a bool tensor is a bool (any), eager and compiled alike."""
    def bool_max(x):
        return (x > 0.5).amax(axis=axis)

    data = np.array([[0.1, 0.9, 0.2], [0.3, 0.4, 0.0]])
    x = dg.tensor(data)
    assert bool_max(x).dtype == np.bool_
    _compiled_equals_eager(bool_max, x)
    _compiled_equals_eager(lambda x: x.amax(axis=axis), dg.tensor(data > 0.5))


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.float32])
def test_max_keeps_nan_and_lowest_values(dtype) -> None:
    """The identity of max is the dtype's lowest value; a nan wins (np.max)."""
    data = np.full((2, 3), np.iinfo(dtype).min if dtype != np.float32 else -np.inf, dtype)
    if dtype == np.float32:
        data[1, 2] = np.nan

    def max_rows(x):
        return x.amax(axis=1)

    _compiled_equals_eager(max_rows, dg.tensor(data))


@pytest.mark.parametrize("shapes", [((3, 4), (4, 5)), ((2, 3, 4), (4, 5)),
                                    ((2, 1, 3, 4), (5, 4, 2)), ((4,), (2, 4, 3)),
                                    ((2, 3, 4), (4,)), ((4,), (4,)), ((40, 30), (30, 20))])
def test_products_build_kernel_ir_that_means_a_matmul(shapes) -> None:
    """The product lowerings return kernel IR (no source lines); run by the IR's own
    executor it equals np.matmul, batches folded or not."""
    from dualgraph.backend import kir
    from dualgraph.ir.graph import Node

    from ..backend.kir_exec import run

    rng = np.random.default_rng(0)
    xs = [rng.standard_normal(s) for s in shapes]
    ins = [Node("input", (), {}, s, np.dtype(np.float64)) for s in shapes]
    shape, dtype = OPS["matmul"].infer(*ins)
    node = Node("matmul", tuple(ins), {}, tuple(shape), dtype)
    args = [lowerings.Arg(kir.Buffer(f"a{k}", s, np.float64, kir.ARG, "A"))
            for k, s in enumerate(shapes)]
    block = lowerings.kernel_lowering("matmul")(node, args, "r")
    assert isinstance(block, kir.Block)
    kir.verify(block, [a.buf for a in args])
    got = run(block, {f"a{k}": x for k, x in enumerate(xs)})["r"]
    want = np.matmul(*xs)
    assert_close(got.reshape(np.shape(want)), want, rtol=1e-12, atol=0, equal_nan=True,
                 check_dtype=False)
