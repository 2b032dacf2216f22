"""Scans and sorting: PyTorch's edge cases, eager and compiled.

The values come from PyTorch 2.13 runs (quoted where they are not obvious): tie rules,
NaN placement, cumprod's gradient at zeros, dtype promotion, errors.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.testing import gradcheck

NAN = math.nan


def _t(values, **kw) -> dg.Tensor:
    return dg.tensor(np.asarray(values), **kw)


# ----------------------------------------------------------------------- result types


def test_results_are_pytorch_named_tuples():
    x = _t([[3.0, 1.0, 2.0]])
    for result, name in [(dg.sort(x), "sort"), (dg.topk(x, 1), "topk"),
                         (dg.kthvalue(x, 1), "kthvalue"), (dg.median(x, 1), "median"),
                         (dg.nanmedian(x, 1), "nanmedian"), (dg.cummax(x, 1), "cummax"),
                         (dg.cummin(x, 1), "cummin")]:
        values, indices = result
        assert type(result).__name__ == name
        assert result.values is values and result.indices is indices
        assert indices.dtype == np.int64
        assert repr(result).startswith(f"{name}(values=")


# -------------------------------------------------------------------------- cumsum


def test_cumsum_dtypes_follow_pytorch():
    assert dg.cumsum(_t([1, 2], dtype=dg.int32), 0).dtype == np.int64
    assert dg.cumsum(_t([True, True]), 0).tolist() == [1, 2]
    assert dg.cumprod(_t([1, 2], dtype=dg.int32), 0).dtype == np.int64
    out = dg.cumsum(_t([[1, 2], [3, 4]], dtype=dg.int32), 1, dtype=dg.float32)
    assert out.dtype == np.float32 and out.tolist() == [[1.0, 3.0], [3.0, 7.0]]
    assert _t([1.0, 2.0], dtype=dg.float32).cumsum(0, dtype=dg.float64).dtype == np.float64


def test_scans_of_0d_and_empty():
    assert dg.cumsum(dg.tensor(3.0), 0).item() == 3.0
    assert dg.cumsum(dg.tensor(3.0), -1).shape == ()
    assert dg.cumprod(dg.zeros(0, 3), 1).shape == (0, 3)
    v, i = dg.sort(dg.zeros(0, 3), 1)
    assert v.shape == i.shape == (0, 3)
    v, i = dg.sort(dg.tensor(3.0))
    assert v.item() == 3.0 and i.item() == 0
    assert dg.cummax(dg.tensor(3.0), 0).indices.item() == 0


def test_bad_dims_raise_index_error():
    x = _t([1.0, 2.0])
    for fn in (lambda: dg.cumsum(x, 1), lambda: x.cumprod(-2), lambda: dg.sort(x, 1),
               lambda: dg.cummax(x, 1), lambda: x.topk(1, 2), lambda: dg.logcumsumexp(x, 1)):
        with pytest.raises(IndexError, match="Dimension out of range"):
            fn()
    with pytest.raises(TypeError):
        dg.cumsum(x)  # dim is required, as in PyTorch


def test_inplace_cumsum_keeps_dtype_and_history():
    k = _t([3, 1, 2], dtype=dg.int32)
    k.cumsum_(0)
    assert k.dtype == np.int32 and k.tolist() == [3, 4, 6]
    x = _t([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    y = x * 1.0
    y.cumsum_(1)
    y.cumprod_(0)
    y.sum().backward()
    # PyTorch: y = [[1, 3], [3, 21]], x.grad = [[12, 8], [4, 3]]
    assert y.tolist() == [[1.0, 3.0], [3.0, 21.0]]
    assert x.grad.tolist() == [[12.0, 8.0], [4.0, 3.0]]
    with pytest.raises(RuntimeError, match="leaf"):
        _t([1.0], requires_grad=True).cumsum_(0)


# --------------------------------------------------------------- cumprod at zeros


@pytest.mark.parametrize("row", [[1.0, 0.0, 3.0, 0.0], [2.0, 3.0, 0.0, 4.0],
                                 [0.5, 2.0, 3.0, 1.0], [0.0, 0.0, 0.0, 2.0],
                                 [2.0, 0.0, 0.0, 0.0]])
def test_cumprod_gradient_with_zeros(row):
    x = np.array([row])
    assert gradcheck(lambda t: t.cumprod(1), x)


def test_cumprod_gradient_matches_pytorch_values():
    x = _t([[1.0, 0.0, 3.0, 0.0], [2.0, 3.0, 0.0, 4.0], [0.5, 2.0, 3.0, 1.0]],
           dtype=dg.float64, requires_grad=True)
    x.cumprod(1).backward(dg.ones(3, 4, dtype=dg.float64))
    dg.testing.assert_close(x.grad.numpy(), [[1.0, 4.0, 0.0, 0.0], [4.0, 2.0, 30.0, 0.0],
                                                [15.0, 3.5, 2.0, 3.0]],
                            rtol=1e-7, atol=0, equal_nan=True, check_dtype=False)


def test_cumprod_double_backward():
    x = _t([[1.5, 0.0, 2.0], [0.5, -1.0, 2.0]], dtype=dg.float64, requires_grad=True)
    (g,) = dg.grad((x.cumprod(1) ** 2).sum(), [x], create_graph=True)
    (gg,) = dg.grad(g.sum(), [x])
    eps = 1e-6
    num = np.zeros(x.shape)
    for i in np.ndindex(x.shape):
        d = np.zeros(x.shape)
        d[i] = eps
        gp = _grad_cumprod_sq(x.numpy() + d)
        gm = _grad_cumprod_sq(x.numpy() - d)
        num[i] = (gp.sum() - gm.sum()) / (2 * eps)
    dg.testing.assert_close(gg.numpy(), num, rtol=1e-5, atol=1e-6, equal_nan=True,
                            check_dtype=False)


def _grad_cumprod_sq(a: np.ndarray) -> np.ndarray:
    t = _t(a, requires_grad=True)
    (g,) = dg.grad((t.cumprod(1) ** 2).sum(), [t])
    return g.numpy()


# --------------------------------------------------------------------- logcumsumexp


def test_logcumsumexp_is_stable_for_large_inputs():
    x = _t([-1000.0, 0.0, 1000.0, math.inf, -math.inf], requires_grad=False)
    assert dg.logcumsumexp(x, 0).tolist() == [-1000.0, 0.0, 1000.0, math.inf, math.inf]
    x = _t([-1000.0, 0.0, 1000.0], requires_grad=True)
    dg.logcumsumexp(x, 0).backward(_t([1.0, -2.0, 3.0]))
    # PyTorch: [1.0000, -2.0000, 3.0001]
    dg.testing.assert_close(x.grad.numpy(), [1.0, -2.0, 3.0], rtol=1e-7, atol=2e-4, equal_nan=True,
                            check_dtype=False)
    assert gradcheck(lambda t: dg.logcumsumexp(t * 50.0, 1), np.linspace(-2, 2, 8).reshape(2, 4))


def test_logcumsumexp_rejects_integers():
    with pytest.raises(NotImplementedError):
        dg.logcumsumexp(_t([1, 2]), 0)


# -------------------------------------------------------------- cummax and cummin


def test_cummax_ties_take_the_later_index_and_nan_propagates():
    y = _t([2.0, 1.0, 1.0, 3.0, 3.0, 0.0, 0.0])
    assert dg.cummax(y, 0).indices.tolist() == [0, 0, 0, 3, 4, 4, 4]
    assert dg.cummin(y, 0).indices.tolist() == [0, 1, 2, 2, 2, 5, 6]
    x = _t([1.0, NAN, 3.0, NAN, 5.0])
    v, i = dg.cummax(x, 0)
    assert np.isnan(v.numpy()[1:]).all() and i.tolist() == [0, 1, 1, 3, 3]
    assert dg.cummin(x, 0).indices.tolist() == [0, 1, 1, 3, 3]


def test_cummax_gradient_goes_to_the_index():
    x = _t([[2.0, 1.0, 3.0, 3.0]], requires_grad=True)
    x.cummax(1).values.backward(_t([[1.0, 2.0, 4.0, 8.0]]))
    assert x.grad.tolist() == [[3.0, 0.0, 4.0, 8.0]]


# ------------------------------------------------------------------------- sorting


def test_sort_nan_and_ties_match_pytorch():
    x = _t([1.0, 3.0, 3.0, 2.0, NAN, 5.0, 3.0])
    assert dg.sort(x).indices.tolist() == [0, 3, 1, 2, 6, 5, 4]
    assert dg.sort(x, descending=True).indices.tolist() == [4, 5, 1, 2, 6, 3, 0]
    y = _t([2.0, 1.0, 1.0, 3.0, 3.0, 0.0, 0.0])
    assert dg.argsort(y, stable=True, descending=True).tolist() == [3, 4, 0, 1, 2, 5, 6]
    assert dg.sort(_t([True, False, True])).indices.tolist() == [1, 0, 2]
    assert y.sort(stable=True).values.tolist() == [0.0, 0.0, 1.0, 1.0, 2.0, 3.0, 3.0]


def test_sort_of_noncontiguous_input_and_middle_dim():
    a = np.random.default_rng(0).standard_normal((3, 4, 5))
    x = dg.tensor(a).transpose(0, 2)  # (5, 4, 3), not contiguous
    v, i = x.sort(1, descending=True)
    np.testing.assert_array_equal(v.numpy(), -np.sort(-a.transpose(2, 1, 0), 1))
    np.testing.assert_array_equal(i.numpy(), np.argsort(-a.transpose(2, 1, 0), 1, kind="stable"))


def test_topk_kthvalue_errors():
    with pytest.raises(RuntimeError, match="out of range"):
        dg.topk(_t([1.0, 2.0]), 3)
    with pytest.raises(RuntimeError, match="out of range"):
        dg.kthvalue(_t([1.0, 2.0]), 3)
    with pytest.raises(RuntimeError, match="out of range"):
        dg.kthvalue(_t([1.0, 2.0]), 0)
    assert dg.topk(_t([1.0, 2.0]), 0).values.shape == (0,)


def test_median_rules():
    assert dg.median(_t([1.0, 2.0, 3.0, 4.0])).item() == 2.0  # the lower median
    x = _t([1.0, 3.0, 3.0, 2.0, NAN, 5.0, 3.0])
    assert np.isnan(x.median().item()) and x.median(0).indices.item() == 4
    assert dg.median(_t([NAN, 1.0, NAN]), 0).indices.item() == 0  # the first NaN
    assert x.nanmedian().item() == 3.0 and x.nanmedian(0).indices.item() == 1
    v, i = dg.nanmedian(_t([NAN, NAN]), 0)
    assert np.isnan(v.item()) and i.item() == 0
    assert np.isnan(dg.median(dg.zeros(0)).item())
    with pytest.raises(IndexError, match="non-zero size"):
        dg.median(dg.zeros(2, 0), 1)
    assert dg.median(_t([[3, 1, 2]]), 1).values.tolist() == [2]  # integers


def test_sort_gradient_is_a_scatter_by_indices():
    x = _t([1.0, 3.0, 3.0, 2.0, 5.0, 3.0, 0.0], requires_grad=True)
    s = dg.sort(x, stable=True)
    s.values.backward(dg.arange(7.0))
    expected = np.zeros(7)
    expected[s.indices.numpy()] = np.arange(7.0)
    np.testing.assert_array_equal(x.grad.numpy(), expected)
    # The scatter's own gradient is a gather: double backward works.
    x = _t(np.linspace(-1, 1, 6).reshape(2, 3)[:, ::-1].copy(), requires_grad=True)
    assert gradcheck(lambda t: dg.topk(t * t, 2).values, x.numpy())
    (g,) = dg.grad((dg.sort(x, 1).values ** 3).sum(), [x], create_graph=True)
    (gg,) = dg.grad(g.sum(), [x])
    dg.testing.assert_close(gg.numpy(), 6 * x.numpy(), rtol=1e-7, atol=0, equal_nan=True,
                            check_dtype=False)


# ------------------------------------------------------------------------ searching


def test_searchsorted_with_empty_dims():
    assert dg.searchsorted(dg.zeros(0, 0, 0), dg.zeros(0, 0, 0)).shape == (0, 0, 0)
    assert dg.searchsorted(dg.zeros(2, 0), dg.zeros(2, 3), right=True).tolist() == [[0] * 3] * 2
    assert dg.searchsorted(dg.zeros(2, 3), dg.zeros(2, 0)).shape == (2, 0)


def test_searchsorted_and_bucketize_surface():
    b = _t([1.0, 2.0, 2.0, 3.0])
    v = _t([[2.0, 0.5, NAN], [3.0, 4.0, 1.0]])
    assert dg.searchsorted(b, v).tolist() == [[1, 0, 4], [3, 4, 0]]
    assert dg.searchsorted(b, v, side="right").tolist() == [[3, 0, 4], [4, 4, 1]]
    assert dg.bucketize(v, b, right=True).tolist() == [[3, 0, 4], [4, 4, 1]]
    assert dg.searchsorted(b, v, out_int32=True).dtype == np.int32
    assert dg.searchsorted(b, 2.0).item() == 1
    assert dg.bucketize(_t([1, 2, 5]), b).tolist() == [0, 1, 4]
    s2 = _t([[1.0, 2.0, 3.0], [0.0, 5.0, 6.0]])
    assert dg.searchsorted(s2, _t([[2.5], [5.0]])).tolist() == [[2], [1]]
    with pytest.raises(RuntimeError, match="boundaries tensor"):
        dg.searchsorted(s2, _t([2.5]))
    with pytest.raises(RuntimeError, match="1 dimension"):
        dg.bucketize(v, s2)
    with pytest.raises(RuntimeError, match="opposites"):
        dg.searchsorted(b, v, right=True, side="left")
    assert dg.searchsorted(_t([3.0, 1.0, 2.0]), _t([2.5]),
                           sorter=_t([1, 2, 0])).tolist() == [2]


def test_count_nonzero_and_histc():
    x = _t([[0.0, 1.0, NAN], [2.0, 0.0, 0.0]])
    assert dg.count_nonzero(x, 1).tolist() == [2, 1]
    assert x.count_nonzero().item() == 3
    assert dg.count_nonzero(x, (0, 1)).item() == 3
    assert dg.histc(_t([1.0, 2.0, 1.0]), bins=4, min=0, max=3).tolist() == [0.0, 2.0, 1.0, 0.0]
    assert dg.histc(_t([1.0, 2.0, 1.0, 5.0]), bins=4).tolist() == [2.0, 1.0, 0.0, 1.0]
    assert dg.histc(_t([1.0, 1.0]), bins=4).tolist() == [0.0, 0.0, 2.0, 0.0]
    assert dg.histc(_t([NAN, 1.0]), bins=2, min=0, max=2).tolist() == [0.0, 1.0]
    with pytest.raises(NotImplementedError):
        dg.histc(_t([1, 2]), bins=4)


def test_histogram_errors_and_eager_only():
    x = _t([1.0, 2.0, 4.0])
    assert dg.histogram(x, 3)._fields == ("hist", "bin_edges")
    assert dg.histogram(dg.zeros(0), 4).bin_edges.tolist() == [0.0, 0.25, 0.5, 0.75, 1.0]
    with pytest.raises(NotImplementedError, match="floating point"):
        dg.histogram(_t([1, 2]), 2)
    with pytest.raises(RuntimeError, match="min should not exceed max"):
        dg.histogram(x, 2, range=(3.0, 1.0))
    with pytest.raises(RuntimeError, match="bins must be > 0"):
        dg.histogram(x, 0)
    with pytest.raises(RuntimeError, match="at least 2 elements"):
        dg.histogram(x, _t([1.0]))
    with pytest.raises(RuntimeError, match="same shape as input"):
        dg.histogram(x, 2, weight=_t([1.0, 2.0]))
    with pytest.raises(dg.TraceError, match="run this part eagerly"):
        dg.trace(lambda t: dg.histogram(t, 2).hist, x)


# ------------------------------------------------------------------------- compiled


def _edge_program(x, y, z):
    return (x.cumprod(1), dg.cummax(y, 0).values, dg.cummax(y, 0).indices, dg.cummin(y, 0)[1],
            dg.sort(y, descending=True).indices, y.argsort(), dg.median(y, 0).indices,
            dg.nanmedian(y, 0).values, dg.nanmedian(y, 0).indices, dg.logcumsumexp(z, 0),
            dg.searchsorted(dg.tensor([1.0, 2.0, 2.0, 3.0]), y), dg.histc(y, 3))


def test_compiled_edge_cases_equal_eager():
    x = np.array([[1.0, 0.0, 3.0, 0.0], [2.0, 3.0, 0.0, 4.0], [0.5, 2.0, 3.0, 1.0]])
    y = np.array([1.0, 3.0, 3.0, 2.0, NAN, 5.0, 3.0, 2.0, NAN])
    z = np.array([-1000.0, 0.0, 1000.0, -np.inf, np.inf])
    f = dg.compile(_edge_program)
    eager = _edge_program(*[dg.tensor(a) for a in (x, y, z)])
    xs = dg.tensor(x, requires_grad=True)
    compiled = f(xs, dg.tensor(y), dg.tensor(z))
    for k, (a, e) in enumerate(zip(compiled, eager)):
        np.testing.assert_array_equal(a.numpy(), e.numpy(), err_msg=f"output {k}")
    compiled[0].backward(dg.ones(3, 4, dtype=dg.float64))
    dg.testing.assert_close(xs.grad.numpy(), [[1.0, 4.0, 0.0, 0.0], [4.0, 2.0, 30.0, 0.0],
                                                 [15.0, 3.5, 2.0, 3.0]],
                            rtol=1e-7, atol=0, equal_nan=True, check_dtype=False)
    assert f.stats.traces == 1
