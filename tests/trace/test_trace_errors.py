"""TraceError (API.md B3) and bad input to the tracer."""

from __future__ import annotations

import sys

import numpy as np
import pytest

import dualgraph as dg

LINES: list[int] = []


def _here() -> int:
    """The line after the caller's: where the offending statement is."""
    return sys._getframe(1).f_lineno + 1


def _branch(x):
    LINES.append(_here())
    if x.sum() > 0:
        return x
    return -x


def _while(x):
    LINES.append(_here())
    while x.max() > 1:
        x = x / 2
    return x


def _item(x):
    LINES.append(_here())
    return x * x.sum().item()


def _numpy(x):
    LINES.append(_here())
    return x * x.numpy().sum()


def _float(x):
    LINES.append(_here())
    return x * float(x.sum())


def _bool(x):
    LINES.append(_here())
    return x if bool(x.sum() > 0) else -x


def _int(x):
    LINES.append(_here())
    return x * int(x.sum())


def _tolist(x):
    LINES.append(_here())
    return x * len(x.tolist())


def _np_exp(x):
    LINES.append(_here())
    return np.exp(x)


def _np_asarray(x):
    LINES.append(_here())
    return dg.tensor(np.asarray(x))


def _index(x):
    LINES.append(_here())
    return x * [1.0, 2.0, 3.0][x.sum()]


@pytest.mark.parametrize("fn,what", [
    (_branch, "the truth value"), (_while, "the truth value"), (_item, ".item()"),
    (_numpy, ".numpy()"), (_float, "float()"), (_bool, "the truth value"), (_int, "int()"),
    (_tolist, ".tolist()"), (_np_exp, "passing a tracer to NumPy"),
    (_np_asarray, "passing a tracer to NumPy"), (_index, "using a tensor as an index"),
])
def test_data_dependent_python_raises_trace_error(fn, what):
    LINES.clear()
    with pytest.raises(dg.TraceError) as info:
        dg.trace(fn, dg.ones(3))
    msg = str(info.value)
    assert isinstance(info.value, RuntimeError)
    assert f"{__file__}:{LINES[0]}:" in msg
    assert what in msg
    assert "dg.where" in msg and "constant" in msg
    # The offending source line is quoted.
    with open(__file__) as f:
        assert f.read().splitlines()[LINES[0] - 1].strip() in msg


def test_the_suggested_fix_works():
    g = dg.trace(lambda x: dg.where(x.sum() > 0, x, -x), dg.ones(3))
    assert [n.op for n in g.nodes] == ["sum", "gt", "neg", "where"]
    assert (g(np.array([1.0, -3.0, 1.0], np.float32)) == [-1.0, 3.0, -1.0]).all()
    # ... and the other way out: the value as a Python constant.
    g = dg.trace(lambda x, k: x * k if k > 0 else -x, dg.ones(3), 2.0)
    assert [n.op for n in g.nodes] == ["mul"]


def test_python_control_flow_on_python_values_is_fine():
    def prog(x, n):
        for _ in range(n):
            x = x * 2
        if x.shape[0] == 3:
            x = x + 1
        return x

    assert [n.op for n in dg.trace(prog, dg.ones(3), 2).nodes] == ["mul", "mul", "add"]


@pytest.mark.parametrize("fn,what", [
    (lambda x: None, "returned nothing (None)"),
    (lambda x: 3.0, "returned a float"),
    (lambda x: "out", "returned a str"),
    (lambda x: (x, 2), "returned a int as output 1"),
    (lambda x: (), "returned an empty tuple"),
    (lambda x: x.shape, "returned a int"),
])
def test_function_must_return_tensors(fn, what):
    with pytest.raises(dg.TraceError, match="returned") as info:
        dg.trace(fn, dg.ones(3))
    assert what in str(info.value)


def test_returning_a_captured_tensor_is_allowed():
    w = dg.tensor([1.0, 2.0])
    g = dg.trace(lambda x: (x * 2, w), dg.ones(2))
    assert g.outputs[1].op == "const"


class _Stash:
    tracer = None


def _leak(x):
    _Stash.tracer = x * 2
    return x + 1


def test_escaped_tracer_used_in_another_trace():
    dg.trace(_leak, dg.ones(3))
    with pytest.raises(dg.TraceError, match="escaped the function it was traced in"):
        dg.trace(lambda y: y + _Stash.tracer, dg.ones(3))


def test_escaped_tracer_used_eagerly():
    dg.trace(_leak, dg.ones(3))
    with pytest.raises(dg.TraceError, match="escaped"):
        _Stash.tracer + 1
    with pytest.raises(dg.TraceError, match="escaped"):
        dg.exp(_Stash.tracer)


@pytest.mark.parametrize("arg", ["abc", [1.0, 2.0], {"x": 1}, object()],
                         ids=["str", "list", "dict", "object"])
def test_non_tensor_inputs(arg):
    with pytest.raises(TypeError, match="argument 1 is a .*tensors, NumPy arrays or Python "
                                        "scalars"):
        dg.trace(lambda x, y: x, dg.ones(2), arg)


def test_shape_errors_name_both_shapes_and_the_line():
    LINES.clear()

    def prog(x, y):
        LINES.append(_here())
        return x + y

    with pytest.raises(ValueError, match=r"\(2, 3\) and \(4,\)") as info:
        dg.trace(prog, dg.ones(2, 3), dg.ones(4))
    assert f"{__file__}:{LINES[0]}" in str(info.value)


def test_eager_mode_is_restored_after_an_error():
    with pytest.raises(dg.TraceError):
        dg.trace(_branch, dg.ones(3))
    y = dg.ones(2) * 3
    assert isinstance(y, dg.Tensor) and y.numpy().tolist() == [3.0, 3.0]
