"""PyTorch parity at the API's edges and bad input stopped where it enters: dims as PyTorch
reads them, PyTorch's exception types, grad-mode and formatting API, duplicate backward
roots, hooks, modules and optimizers, creation functions.
"""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest

import dualgraph as dg

# ----------------------------------------------------------- transpose and dims


def _a(*shape: int) -> np.ndarray:
    return np.arange(float(np.prod(shape)), dtype=np.float64).reshape(shape)


@pytest.mark.parametrize(("shape", "d0", "d1"), [
    ((2, 3), 0, 1), ((2, 3, 4), -1, -3), ((2, 3), 0, 0),
    ((2, 3, 4), 0, 2), ((2, 3, 4), 1, -1), ((2, 3, 4, 5), 3, 1), ((3,), 0, -1),
])
def test_transpose_swaps_two_dims_as_pytorch(shape: tuple, d0: int, d1: int) -> None:
    a = _a(*shape)
    x = dg.tensor(a, requires_grad=True)
    want = np.swapaxes(a, d0, d1)
    np.testing.assert_array_equal(x.transpose(d0, d1).numpy(), want)
    np.testing.assert_array_equal(dg.transpose(x, d0, d1).numpy(), want)
    # The gradient goes back through the same swap.
    w = _a(*want.shape) + 1
    (x.transpose(d0, d1) * dg.tensor(w)).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), np.swapaxes(w, d0, d1))


def test_permute_and_dot_t_keep_their_meaning() -> None:
    a = _a(2, 3, 4)
    x = dg.tensor(a)
    np.testing.assert_array_equal(x.permute(2, 0, 1).numpy(), a.transpose(2, 0, 1))
    np.testing.assert_array_equal(x.permute((1, 2, 0)).numpy(), a.transpose(1, 2, 0))
    np.testing.assert_array_equal(x.permute(-1, 0, 1).numpy(), a.transpose(2, 0, 1))
    np.testing.assert_array_equal(x.T.numpy(), a.T)
    np.testing.assert_array_equal(dg.tensor(_a(2, 3)).T.numpy(), _a(2, 3).T)
    with pytest.raises(ValueError, match=r"\(0, 0, 1\)"):
        x.permute(0, 0, 1)
    with pytest.raises(RuntimeError, match=r"\(0, 1\).*\(2, 3, 4\)"):
        x.permute(0, 1)


_X2 = dg.ones(2, 3)

BAD_DIMS = [
    ("transpose", lambda: _X2.transpose(0, 5), "[-2, 1]", 5),
    ("transpose_neg", lambda: _X2.transpose(-3, 0), "[-2, 1]", -3),
    ("dg_transpose", lambda: dg.transpose(_X2, 2, 0), "[-2, 1]", 2),
    ("permute", lambda: _X2.permute(0, 2), "[-2, 1]", 2),
    ("squeeze", lambda: _X2.squeeze(2), "[-2, 1]", 2),
    ("squeeze_neg", lambda: _X2.squeeze(-3), "[-2, 1]", -3),
    ("unsqueeze", lambda: _X2.unsqueeze(3), "[-3, 2]", 3),
    ("unsqueeze_neg", lambda: _X2.unsqueeze(-4), "[-3, 2]", -4),
    ("sum", lambda: _X2.sum(2), "[-2, 1]", 2),
    ("sum_dim", lambda: _X2.sum(dim=-3), "[-2, 1]", -3),
    ("mean", lambda: _X2.mean(dim=(0, 5)), "[-2, 1]", 5),
    ("max", lambda: _X2.max(dim=7), "[-2, 1]", 7),
    ("dg_sum", lambda: dg.sum(_X2, 2), "[-2, 1]", 2),
    ("dg_max", lambda: dg.max(_X2, dim=2), "[-2, 1]", 2),
    ("scalar_sum", lambda: dg.tensor(2.0).sum(dim=1), "[-1, 0]", 1),
    ("scalar_squeeze", lambda: dg.tensor(2.0).squeeze(1), "[-1, 0]", 1),
]


@pytest.mark.parametrize(("call", "span", "dim"), [pytest.param(c, s, d, id=n)
                                                    for n, c, s, d in BAD_DIMS])
def test_dim_out_of_range_raises_index_error(call, span: str, dim: int) -> None:
    # PyTorch's type and words; never taken modulo the rank.
    want = (r"Dimension out of range \(expected to be in range of "
            + re.escape(span) + rf", but got {dim}\)")
    with pytest.raises(IndexError, match=want):
        call()


def test_negative_dims_and_squeeze_unsqueeze_as_pytorch() -> None:
    a = _a(2, 1, 3)
    x = dg.tensor(a)
    assert x.squeeze(-2).shape == (2, 3)
    assert x.squeeze(0).shape == (2, 1, 3)  # size 2: left alone, as PyTorch
    assert x.squeeze((0, 1)).shape == (2, 3)
    assert x.unsqueeze(-1).shape == (2, 1, 3, 1)
    assert x.unsqueeze(-4).shape == (1, 2, 1, 3)
    assert x.unsqueeze(3).shape == (2, 1, 3, 1)
    np.testing.assert_array_equal(x.sum(-1).numpy(), a.sum(-1))
    np.testing.assert_array_equal(x.max(dim=-3).values.numpy(), a.max(0))


def test_keepdim_is_accepted_everywhere_keepdims_is() -> None:
    a = _a(2, 3)
    x = dg.tensor(a)
    for name in ("sum", "mean", "max"):
        want = getattr(np, name)(a, axis=1, keepdims=True)
        for got in (getattr(x, name)(1, keepdim=True), getattr(x, name)(dim=1, keepdim=True),
                    getattr(x, name)(axis=1, keepdims=True), getattr(dg, name)(x, 1, keepdim=True),
                    getattr(dg, name)(x, dim=1, keepdim=True)):
            got = got.values if isinstance(got, tuple) else got  # max(dim): a named tuple
            np.testing.assert_array_equal(got.numpy(), want)
        assert getattr(x, name)(keepdim=True).shape == (1, 1)
        got = getattr(x, name)(axis=0, keepdim=False)
        assert (got.values if isinstance(got, tuple) else got).shape == (3,)
        with pytest.raises(TypeError, match="keepdim"):
            getattr(x, name)(1, keepdims=True, keepdim=True)
        with pytest.raises(TypeError, match="keepdim"):
            getattr(x, name)(1, keepdim="yes")


# --------------------------------------------------------------- shape errors

SHAPE_ERRORS = [
    ("add", lambda: dg.ones(2, 3) + dg.ones(4), [(2, 3), (4,)]),
    ("where", lambda: dg.where(dg.ones(2) > 0, dg.ones(3), dg.ones(2)), [(2,), (3,)]),
    ("matmul", lambda: dg.ones(2, 3) @ dg.ones(4, 5), [(2, 3), (4, 5)]),
    ("matmul_batch", lambda: dg.ones(2, 2, 3) @ dg.ones(3, 3, 4), [(2, 2, 3), (3, 3, 4)]),
    ("addmm", lambda: dg.ops.linalg.addmm(dg.ones(2), dg.ones(4, 5), dg.ones(3, 2)),
     [(4, 5), (3, 2)]),
    ("reshape", lambda: dg.ones(2, 3).reshape(4, 2), [(2, 3), (4, 2)]),
    ("expand", lambda: dg.ones(2, 3).expand(3, 3), [(2, 3), (3, 3)]),
    ("concatenate", lambda: dg.cat([dg.ones(2, 3), dg.ones(2, 4)]), [(2, 3), (2, 4)]),
    ("stack", lambda: dg.stack([dg.ones(2, 3), dg.ones(3, 2)]), [(2, 3), (3, 2)]),
    ("traced", lambda: dg.trace(lambda a, b: a * b, dg.ones(2, 3), dg.ones(3, 2)),
     [(2, 3), (3, 2)]),
]


@pytest.mark.parametrize(("call", "shapes"), [pytest.param(c, s, id=n)
                                              for n, c, s in SHAPE_ERRORS])
def test_shape_mismatch_is_runtime_and_value_error_naming_both_shapes(call, shapes) -> None:
    with pytest.raises(dg.ShapeError) as info:
        call()
    # PyTorch raises RuntimeError, NumPy ValueError: code written for either catches it.
    assert isinstance(info.value, RuntimeError) and isinstance(info.value, ValueError)
    for shape in shapes:
        assert str(shape) in str(info.value)


# --------------------------------------------------------------- one compiled function


def _dims_program(x):
    """transpose (swap), negative dims, keepdim and squeeze/unsqueeze in one program."""
    y = x.transpose(0, 2) * 2.0                     # (4, 3, 2)
    z = y.sum(dim=-1, keepdim=True)                  # (4, 3, 1)
    m = dg.max(x, dim=1, keepdim=True).values.transpose(-1, 0)  # (4, 1, 2)
    return (z.squeeze(-1).unsqueeze(0) + m.mean(dim=1).T.unsqueeze(-1)).sum()


def _dims_numpy(a: np.ndarray) -> float:
    z = (np.swapaxes(a, 0, 2) * 2).sum(-1)[None]
    m = np.swapaxes(a.max(1, keepdims=True), -1, 0)
    return float((z + m.mean(1).T[..., None]).sum())


def test_compiled_dims_program_matches_eager_and_numpy() -> None:
    f = dg.compile(_dims_program)
    for scale in (1.0, 2.0, -1.0):
        a = _a(2, 3, 4) / 10 * scale
        xe = dg.tensor(a, requires_grad=True)
        xc = dg.tensor(a, requires_grad=True)
        eager = _dims_program(xe)
        compiled = f(xc)
        dg.testing.assert_close(eager.item(), _dims_numpy(a), rtol=1e-12, atol=0, equal_nan=True,
                                check_dtype=False)
        dg.testing.assert_close(compiled.item(), eager.item(), rtol=1e-10, atol=0, equal_nan=True,
                                check_dtype=False)
        eager.backward()
        compiled.backward()
        dg.testing.assert_close(xc.grad.numpy(), xe.grad.numpy(), rtol=1e-10, atol=0,
                                equal_nan=True, check_dtype=False)
    assert f.stats.traces == 1 and f.stats.calls == 3


# ----------------------------------------------------------- grad mode and autograd


def test_set_grad_enabled_is_a_function_and_a_context_manager() -> None:
    x = dg.ones(2, requires_grad=True)
    assert dg.is_grad_enabled()
    try:
        dg.set_grad_enabled(False)  # a plain call switches at once
        assert not dg.is_grad_enabled() and not (x * 2).requires_grad
        with dg.set_grad_enabled(True):
            assert dg.is_grad_enabled() and (x * 2).requires_grad
        assert not dg.is_grad_enabled()  # the previous mode comes back
    finally:
        dg.set_grad_enabled(True)
    with dg.set_grad_enabled(False):
        assert not (x * 2).requires_grad
        with dg.set_grad_enabled(True):
            assert (x * 2).requires_grad
        assert not dg.is_grad_enabled()
    assert dg.is_grad_enabled()
    with pytest.raises(KeyError), dg.set_grad_enabled(False):
        raise KeyError("restored on errors too")
    assert dg.is_grad_enabled()

    @dg.set_grad_enabled(False)
    def double(t):
        return t * 2

    assert dg.is_grad_enabled()  # decorating does not switch the caller's mode
    assert not double(x).requires_grad and dg.is_grad_enabled()


def test_autograd_namespace_aliases() -> None:
    from dualgraph.eager.autograd import run_backward  # the engine keeps its import path

    assert callable(run_backward)
    assert dg.autograd.grad is dg.grad and dg.autograd.backward is dg.backward
    x = dg.tensor([1.0, 2.0], requires_grad=True)
    (gx,) = dg.autograd.grad((x * x).sum(), [x])
    np.testing.assert_array_equal(gx.numpy(), [2.0, 4.0])
    dg.autograd.backward([(x * 3).sum()])
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 3.0])
    with dg.autograd.no_grad():
        assert not (x * 2).requires_grad


def test_format_spec_on_tensors() -> None:
    assert f"{dg.tensor(3.14159):.4f}" == "3.1416"
    assert f"{dg.tensor(2.5, requires_grad=True) * 2:.2f}" == "5.00"
    assert f"{dg.tensor(7):>3}" == "  7"
    assert f"{dg.tensor([1.0, 2.0])}" == "tensor([1., 2.])"  # empty spec: the repr
    with pytest.raises(TypeError, match="unsupported format string"):
        f"{dg.tensor([1.0, 2.0]):.4f}"


def test_backward_with_the_same_root_twice_accumulates() -> None:
    x = dg.tensor([1.0, 2.0], requires_grad=True)
    y = x * 3
    g = dg.tensor([1.0, 10.0])
    dg.backward([y, y], [g, g])
    np.testing.assert_array_equal(x.grad.numpy(), [6.0, 60.0])
    s = (x * x).sum()
    x.grad = None
    dg.backward([s, s])
    np.testing.assert_array_equal(x.grad.numpy(), [4.0, 8.0])
    h = x.exp()
    gx, = dg.grad([h, h], [x], [g, g])
    dg.testing.assert_close(gx.numpy(), 2 * np.exp([1.0, 2.0]) * [1.0, 10.0], rtol=1e-6, atol=0,
                            equal_nan=True, check_dtype=False)


def test_make_dot_draws_torchvizs_picture() -> None:
    lin = dg.nn.Linear(2, 3)
    x = dg.ones(4, 2)
    y = (lin(x) * 2).relu().sum()
    dot = dg.viz.make_dot_source(y, params=dict(lin.named_parameters()))
    for name in ("SumBackward0", "ReluBackward0", "MulBackward0", "AddmmBackward0"):
        assert f'label="{name}"' in dot
    assert dot.count('label="AccumulateGrad"') == 2
    assert 'label="weight\\n (3, 2)", fillcolor=lightblue' in dot
    assert 'label="bias\\n (3)", fillcolor=lightblue' in dot
    assert 'label="\\n ()", fillcolor=darkolivegreen1' in dot  # the output, as torchviz
    assert 'label="mul' not in dot and 'label="addmm' not in dot  # IR names: to_dot only
    assert 'label="mul' in dg.viz.to_dot(y)
    # Sum -> y, Relu -> Sum, Mul -> Relu, Addmm -> Mul, (bias, T) -> Addmm, weight -> T, and
    # each leaf box -> its AccumulateGrad node.
    assert 'label="TBackward0"' in dot
    assert dot.count("->") == 1 + 1 + 1 + 1 + 2 + 1 + 2


# ------------------------------------------------------------ creation boundary

REJECTED = [
    ("object", np.array([1, "a"], dtype=object), "object"),
    ("str", np.array(["1.5", "2"]), "string"),
    ("bytes", np.array([b"ab"]), "bytes"),
    ("datetime", np.array(["2020-01-01"], dtype="datetime64[D]"), "datetime"),
    ("timedelta", np.array([5], dtype="timedelta64[s]"), "timedelta"),
    ("void", np.zeros(2, dtype=[("a", "f4")]), "void"),
    ("uint16", np.array([1], np.uint16), "uint16"),
    ("uint32", np.array([1], np.uint32), "uint32"),
    ("uint64", np.array([1], np.uint64), "uint64"),
]


@pytest.mark.parametrize("requires_grad", [False, True])
@pytest.mark.parametrize(("arr", "word"), [pytest.param(a, w, id=n) for n, a, w in REJECTED])
def test_tensor_and_from_numpy_reject_dtypes_naming_them(arr, word, requires_grad) -> None:
    for make in (dg.tensor, dg.from_numpy):
        with pytest.raises(TypeError, match=re.escape(f"dtype {arr.dtype}")) as info:
            make(arr, requires_grad=requires_grad)
        assert word in str(info.value)
    if arr.dtype.kind in "USO":
        with pytest.raises(TypeError):
            dg.tensor(arr.tolist(), requires_grad=requires_grad)


def test_int_operands_beyond_64_bits_raise_overflow_error_eager_and_compiled() -> None:
    """PyTorch converts an int operand through 64 bits: beyond them OverflowError, from
    eager code and from a compiled function's constant alike; inside them (2**63 with a
    float tensor) the value is used."""
    x, i = dg.zeros(2), dg.zeros(2, dtype=dg.int64)
    for fn in (lambda: x + 2 ** 70, lambda: i * 2 ** 70, lambda: x - (-(2 ** 63) - 1),
               lambda: x.clamp(max=2 ** 64), lambda: dg.where(x > 0, x, 2 ** 70),
               lambda: x ** 10 ** 400, lambda: dg.full((2,), 2 ** 70), lambda: x.fill_(2 ** 64)):
        with pytest.raises(OverflowError, match="int too big to convert"):
            fn()
    with pytest.raises(RuntimeError, match="cannot be converted to type int64_t"):
        dg.full((1,), 2 ** 63)
    assert dg.full((1,), 2 ** 63, dtype=dg.float64).item() == 2.0 ** 63
    f = dg.compile(lambda a: (a + 2 ** 63, a * -(2 ** 63)))
    for got, want in zip(f(x), (x + 2 ** 63, x * -(2 ** 63))):
        assert np.array_equal(got.numpy(), want.numpy())
    with pytest.raises(OverflowError, match="int too big to convert"):
        dg.compile(lambda a: a + 2 ** 70)(x)


def test_ints_beyond_int64_raise_instead_of_becoming_uint64() -> None:
    for data in ([2 ** 63], 2 ** 63, [-(2 ** 63) - 1], [1, 2 ** 64]):
        with pytest.raises(RuntimeError, match="Overflow when unpacking long"):
            dg.tensor(data)
    assert dg.tensor([2 ** 63 - 1]).dtype == np.int64
    assert dg.tensor([2 ** 63], dtype=dg.float64).item() == 2.0 ** 63  # asked for a float
    # What a tensor can hold still goes through unchanged.
    for dtype in (np.float16, np.float32, np.float64, np.int8, np.int16, np.int32, np.int64,
                  np.uint8, np.bool_):
        a = np.ones(2, dtype)
        assert dg.tensor(a).dtype == dtype and dg.from_numpy(a).dtype == dtype


def test_bad_arguments_raise_pytorchs_types() -> None:
    x = dg.ones(2, 3)
    with pytest.raises(TypeError, match="axis/dim must be an int.*1.0"):
        x.sum(axis=1.0)
    with pytest.raises(TypeError, match="axis/dim must be an int"):
        x.mean(dim="a")
    with pytest.raises(TypeError, match="reshape: shape must be ints.*'a'"):
        x.reshape("a")
    with pytest.raises(TypeError, match="reshape: shape must be ints.*3.0"):
        x.reshape(2, 3.0)
    with pytest.raises(TypeError, match="dim must be an int"):
        x.transpose(0, 1.0)
    with pytest.raises(RuntimeError, match="step must be nonzero"):
        dg.arange(0, 10, 0)
    with pytest.raises(RuntimeError, match="inconsistent with step sign"):
        dg.arange(0, 10, -1)
    with pytest.raises(TypeError, match="arange: end must be a number"):
        dg.arange("a")
    with pytest.raises(TypeError, match="dimensions must be non-negative ints"):
        dg.zeros(2.5)
    np.testing.assert_array_equal(dg.arange(5, 0, -2).numpy(), [5, 3, 1])


# ---------------------------------------------------------------------- hooks


@pytest.mark.parametrize("leaf", [True, False])
def test_hook_results_are_checked(leaf: bool) -> None:
    def run(hook):
        x = dg.ones(3, requires_grad=True)
        y = x * 2
        (x if leaf else y).register_hook(hook)
        (y * 1).sum().backward()
        return x

    def as_array(g):
        return np.ones(3)

    def widen(g):
        return g.double()

    def grow(g):
        return dg.ones(4)

    with pytest.raises(TypeError, match="hook 'as_array' returned ndarray; expected a Tensor "
                                        "or None"):
        run(as_array)
    with pytest.raises(RuntimeError, match=r"hook 'widen' has changed the type of value "
                                           r"\(was float32 got float64\)"):
        run(widen)
    with pytest.raises(RuntimeError, match=r"hook 'grow' has changed the size of value"):
        run(grow)
    np.testing.assert_array_equal(run(lambda g: g * 10).grad.numpy(), [20.0] * 3)
    np.testing.assert_array_equal(run(lambda g: None).grad.numpy(), [2.0] * 3)


# ------------------------------------------------------------- modules and optim


def test_assigning_a_non_parameter_to_a_parameter_name_raises() -> None:
    lin = dg.nn.Linear(2, 3)
    with pytest.raises(TypeError, match=r"cannot assign 'int' as parameter 'weight' "
                                        r"\(dg.nn.Parameter or None expected\)"):
        lin.weight = 5
    with pytest.raises(TypeError, match="as parameter 'bias'"):
        lin.bias = dg.ones(3)  # a plain tensor is not a Parameter either (PyTorch too)
    assert isinstance(lin.weight, dg.nn.Parameter) and lin.weight.shape == (3, 2)
    seq = dg.nn.Sequential(lin)
    with pytest.raises(TypeError, match="as child module '0'"):
        setattr(seq, "0", "relu")
    new = dg.nn.Parameter(dg.zeros(3, 2))
    lin.weight = new
    assert lin.weight is new and dict(lin.named_parameters())["weight"] is new
    lin.bias = None
    assert [n for n, _ in lin.named_parameters()] == ["weight"]


def test_optimizer_refuses_duplicate_parameters() -> None:
    p = dg.ones(3, requires_grad=True)
    q = dg.ones(2, requires_grad=True)
    with pytest.raises(ValueError, match="duplicate parameters"):
        dg.optim.SGD([p, p], lr=0.1)
    with pytest.raises(ValueError, match="more than one parameter group"):
        dg.optim.Adam([{"params": [p]}, {"params": [q, p]}])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        opt = dg.optim.SGD([{"params": [p]}, {"params": q, "lr": 0.5}], lr=0.1)
    assert [(g["lr"], g["momentum"], len(g["params"])) for g in opt.param_groups] == [
        (0.1, 0.0, 1), (0.5, 0.0, 1)]
