"""Numerical edge cases: nan and inf propagate the same way eager and compiled; large logits
stay finite; anomaly mode names the forward op and line behind a nan gradient."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.nn import functional as F

SPECIAL = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 2.5, -3.0, 1e-30, 80.0,
                    -80.0])


def _same(actual: np.ndarray, expected: np.ndarray, what: str, rtol: float) -> None:
    """Same nan positions, same infinities (with sign), finite values close."""
    assert actual.shape == expected.shape and actual.dtype == expected.dtype, what
    np.testing.assert_array_equal(np.isnan(actual), np.isnan(expected), err_msg=f"{what}: nan")
    inf = np.isinf(expected)
    np.testing.assert_array_equal(np.isinf(actual), inf, err_msg=f"{what}: inf")
    np.testing.assert_array_equal(actual[inf], expected[inf], err_msg=f"{what}: inf sign")
    fin = np.isfinite(expected)
    dg.testing.assert_close(actual[fin], expected[fin], rtol=rtol, atol=0, equal_nan=True,
                            check_dtype=False, msg=what)


def elementwise(x, y):
    return (x + y, x - y, x * y, x / y, x ** 2, y ** x, -x, dg.exp(x), dg.log(x), dg.sqrt(x),
            dg.tanh(x), dg.sigmoid(x), dg.relu(x), dg.abs(x), dg.sin(x), dg.cos(x),
            dg.maximum(x, y), dg.minimum(x, y), dg.where(x > y, x, y), x < y, x == x,
            x != y, x.clamp(-1.0, 1.0))


def reductions(x):
    m = x.reshape(3, 4)
    return (x.sum(), x.mean(), x.max(), m.sum(axis=1), m.mean(axis=0), m.amax(axis=1),
            m.amax(axis=0, keepdims=True), dg.abs(m).amax(axis=1))


def products(a, b):
    return a @ b, a.T @ a, (a @ b).sum(axis=0)


def _inputs(dtype):
    x = SPECIAL.astype(dtype)
    y = np.roll(SPECIAL, 5).astype(dtype)  # every pairing of specials somewhere
    return x, y


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_elementwise_nan_inf_propagate_like_eager(dtype):
    x, y = _inputs(dtype)
    f = dg.compile(elementwise)
    with np.errstate(all="ignore"):
        eager = elementwise(dg.tensor(x), dg.tensor(y))
        compiled = f(dg.tensor(x), dg.tensor(y))
    assert f.stats.kernels == 1
    rtol = 1e-5 if dtype == np.float32 else 1e-12
    for k, (c, e) in enumerate(zip(compiled, eager)):
        _same(c.numpy(), e.numpy(), f"output {k}", rtol)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_elementwise_gradients_with_nan_inf_like_eager(dtype):
    x, y = _inputs(dtype)

    def loss(x, y):
        return (dg.tanh(x) * y + dg.sigmoid(y) * x + dg.relu(x) + dg.maximum(x, y)).sum()

    grads = []
    for fn in (loss, dg.compile(loss)):
        xt, yt = dg.tensor(x, requires_grad=True), dg.tensor(y, requires_grad=True)
        with np.errstate(all="ignore"):
            fn(xt, yt).backward()
        grads.append((xt.grad.numpy(), yt.grad.numpy()))
    rtol = 1e-5 if dtype == np.float32 else 1e-12
    for k in range(2):
        _same(grads[1][k], grads[0][k], f"gradient {k}", rtol)


def test_reductions_with_nan_inf_like_eager():
    f = dg.compile(reductions)
    cases = {
        "nan": SPECIAL,
        "inf_and_minus_inf": np.array([1.0, np.inf, -np.inf, 2.0] * 3),
        "inf_only": np.array([1.0, np.inf, 3.0, -1.0] * 3),
        "minus_inf_row": np.array([-np.inf] * 4 + [1.0, 2.0, 3.0, 4.0] + [5.0] * 4),
        "nan_last": np.array([1.0] * 11 + [np.nan]),
    }
    for name, x in cases.items():
        with np.errstate(all="ignore"):
            eager = reductions(dg.tensor(x))
            compiled = f(dg.tensor(x))
        for k, (c, e) in enumerate(zip(compiled, eager)):
            _same(c.numpy(), e.numpy(), f"{name}: output {k}", 1e-12)
    assert f.stats.traces == 1


def test_matmul_with_nan_inf_like_eager():
    a = np.arange(12.0).reshape(4, 3) - 5.0
    b = np.linspace(-1.0, 1.0, 6).reshape(3, 2)
    a[1, 2], a[3, 0], b[0, 1] = np.nan, np.inf, -np.inf
    f = dg.compile(products)
    with np.errstate(all="ignore"):
        eager = products(dg.tensor(a), dg.tensor(b))
        compiled = f(dg.tensor(a), dg.tensor(b))
    for k, (c, e) in enumerate(zip(compiled, eager)):
        _same(c.numpy(), e.numpy(), f"output {k}", 1e-12)


def losses(z, labels, targets):
    return (F.softmax(z, dim=-1), F.log_softmax(z, dim=-1), F.cross_entropy(z, labels),
            F.binary_cross_entropy_with_logits(z, targets))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_large_logits_stay_finite_and_equal(dtype):
    z = np.array([[1e4, 0.0, -1e4], [-1e4, -1e4, -1e4 + 1.0], [5e3, 1e4, 1e4]], dtype)
    labels = np.array([1, 2, 0])
    targets = np.array([[1.0, 0.0, 1.0], [0.0, 1.0, 0.0], [1.0, 1.0, 0.0]], dtype)
    f = dg.compile(losses)
    outs = []
    for fn in (losses, f):
        zt = dg.tensor(z, requires_grad=True)
        res = fn(zt, dg.tensor(labels), dg.tensor(targets))
        (res[2] + res[3]).backward()
        outs.append([r.numpy() for r in res] + [zt.grad.numpy()])
    rtol = 1e-5 if dtype == np.float32 else 1e-12
    for k, (c, e) in enumerate(zip(outs[1], outs[0])):
        assert np.isfinite(e).all(), f"eager output {k} is not finite: {e}"
        assert np.isfinite(c).all(), f"compiled output {k} is not finite: {c}"
        dg.testing.assert_close(c, e, rtol=rtol, atol=rtol, equal_nan=True, check_dtype=False,
                                msg=f"output {k}")
    softmax = outs[0][0]
    dg.testing.assert_close(softmax[0], [1.0, 0.0, 0.0], rtol=1e-7, atol=1e-6, equal_nan=True,
                            check_dtype=False)
    dg.testing.assert_close(outs[0][1][0], [0.0, -1e4, -2e4], rtol=1e-6, atol=0, equal_nan=True,
                            check_dtype=False)
    zz = z.astype(np.float64)
    top = zz.max(axis=1, keepdims=True)
    lse = (top + np.log(np.exp(zz - top).sum(axis=1, keepdims=True)))[:, 0]
    ce = (lse - zz[np.arange(3), labels]).mean()  # ~5000.41: large but exact
    dg.testing.assert_close(outs[0][2], ce, rtol=1e-6, atol=0, equal_nan=True, check_dtype=False)


# ------------------------------------------------------------------- anomaly mode


def _line(fn, marker: str) -> int:
    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, line in enumerate(lines) if marker in line)


def test_detect_anomaly_names_forward_op_and_line():
    x = dg.tensor(np.array([0.0, 1.0, 4.0]), requires_grad=True)

    def run():
        with dg.detect_anomaly():
            y = dg.sqrt(x)  # SQRT_LINE: d sqrt at 0 is inf; times 0 below gives nan
            (y * 0.0).sum().backward()

    with pytest.raises(RuntimeError) as info, np.errstate(all="ignore"):
        run()
    msg = str(info.value)
    assert "Function 'SqrtBackward0'" in msg
    assert "returned nan values" in msg
    assert f"sqrt at {__file__}:{_line(run, 'SQRT_LINE')}" in msg
    assert "detect_anomaly" in msg


def test_without_anomaly_mode_nan_gradients_pass_silently():
    x = dg.tensor(np.array([0.0, 1.0, 4.0]), requires_grad=True)
    with np.errstate(all="ignore"):
        (dg.sqrt(x) * 0.0).sum().backward()
    assert np.isnan(x.grad.numpy()[0])


def test_detect_anomaly_log_of_negative_through_composite():
    """A nan made by the backward of an op deep inside a composition (log_softmax's log)
    is reported at that op, with the user's line."""
    z = dg.tensor(np.array([[0.0, 1.0]]), requires_grad=True)

    def run():
        with dg.detect_anomaly():
            y = dg.log(z - 0.0)  # LOG_LINE: log(0) = -inf, its gradient 1/0 = inf
            (y * 0.0).sum().backward()

    with pytest.raises(RuntimeError, match=r"log at .*test_numerics.py:\d+"), \
            np.errstate(all="ignore"):
        run()


def test_detect_anomaly_restores_state_and_is_quiet_when_finite():
    from dualgraph.eager import autograd

    before = (autograd.ANOMALY[0], autograd.RECORD_LOCATIONS[0])
    x = dg.tensor(np.array([1.0, 4.0]), requires_grad=True)
    with dg.detect_anomaly():
        dg.sqrt(x).sum().backward()
    dg.testing.assert_close(x.grad.numpy(), [0.5, 0.25], rtol=1e-7, atol=0, equal_nan=True,
                            check_dtype=False)
    assert (autograd.ANOMALY[0], autograd.RECORD_LOCATIONS[0]) == before
    with pytest.raises(ValueError), dg.detect_anomaly():
        raise ValueError("restored on errors too")
    assert (autograd.ANOMALY[0], autograd.RECORD_LOCATIONS[0]) == before
