"""IEEE and dtype edges, eagerly, compiled blocking and compiled tiered (tier 0 and tier 1).

`tests/goldens` holds PyTorch's answers for the same cases (recorded from torch); these
tests pin the compiled paths, including the tier swap, where the goldens run blocking.
"""

from __future__ import annotations

import numpy as np
import pytest

import dualgraph as dg

F = dg.nn.functional
INF, NAN = np.inf, np.nan


def _grads(runner, fn, *values, dtype=np.float32):
    """Outputs and input gradients of ``fn``, each call on fresh leaves: tiered, the first
    result is tier 0's and the second tier 1's."""
    f = runner(fn)
    results = []
    for _ in range(2):
        leaves = [dg.tensor(np.array(v, dtype), requires_grad=True) for v in values]
        out = f(*leaves)
        out.backward(dg.ones(*out.shape))
        results.append((out.numpy(), [t.grad.numpy() for t in leaves]))
    return results


def test_logaddexp_of_equal_infinities(runner):
    a = dg.tensor([-INF, INF, INF, 1.0])
    b = dg.tensor([-INF, INF, -INF, 1.0])
    for out in runner.twice(lambda a, b: dg.logaddexp(a, b), a, b):
        np.testing.assert_array_equal(out.numpy()[:3], [-INF, INF, INF])
        dg.testing.assert_close(out.numpy()[3], 1.0 + np.log(2.0), rtol=1e-6, atol=0,
                                equal_nan=True, check_dtype=False)


@pytest.mark.parametrize("op", ["maximum", "minimum"])
def test_maximum_minimum_pass_the_gradient_where_the_result_is_nan(runner, op):
    fn = getattr(dg, op)
    for out, (ga, gb) in _grads(runner, lambda a, b: fn(a, b), [NAN, 1.0, 2.0], [1.0, NAN, 2.0]):
        assert np.isnan(out[:2]).all()
        np.testing.assert_array_equal(ga, [1.0, 1.0, 0.5])
        np.testing.assert_array_equal(gb, [1.0, 1.0, 0.5])


def test_atan2_gradient_at_the_origin(runner):
    for _, (gy, gx) in _grads(runner, lambda y, x: dg.atan2(y, x), [0.0, 0.0, 1.0],
                              [0.0, -0.0, 0.0]):
        np.testing.assert_array_equal(gy, [0.0, 0.0, 0.0])
        assert np.signbit(gy).tolist() == [False, True, False]  # PyTorch: g * x * 0
        np.testing.assert_array_equal(gx, [0.0, 0.0, -1.0])


def test_softplus_gradient_for_large_inputs(runner):
    for out, (g,) in _grads(runner, lambda x: F.softplus(x), [300.0, 350.0, 400.0, 19.0]):
        np.testing.assert_array_equal(out[:3], [300.0, 350.0, 400.0])
        assert np.isfinite(g).all()
        dg.testing.assert_close(g, np.ones_like(g), rtol=1e-6, atol=0, equal_nan=True,
                                check_dtype=False)


def test_uint8_sum_is_int64(runner):
    x = dg.tensor(np.array([200, 100, 255], np.uint8))
    for out in runner.twice(lambda x: x.sum(), x):
        assert out.dtype == np.int64
        assert out.item() == 555


def test_normalize_of_a_zero_row(runner):
    values = [[0.0, 0.0, 0.0], [3.0, -4.0, 0.0]]
    for out, (g,) in _grads(runner, lambda x: F.normalize(x), values):
        dg.testing.assert_close(out, [[0.0, 0.0, 0.0], [0.6, -0.8, 0.0]], rtol=1e-6, atol=0,
                                equal_nan=True, check_dtype=False)
        assert np.isfinite(g).all()
        # 1 / eps, as PyTorch
        dg.testing.assert_close(g[0], np.full_like(g[0], 1e12), rtol=1e-6, atol=0, equal_nan=True,
                                check_dtype=False)


def test_max_axis_is_dim(runner):
    x = dg.tensor([[1.0, 5.0, 2.0], [7.0, 0.0, 3.0]])
    for values, indices in runner.twice(lambda x: tuple(x.max(axis=1)), x):
        assert values.tolist() == [5.0, 7.0] and indices.tolist() == [1, 0]


def test_cummax_of_an_empty_axis(runner):
    x = dg.zeros(2, 0)
    for values, indices in runner.twice(lambda x: tuple(dg.cummax(x, 1)), x):
        assert values.shape == (2, 0) and indices.shape == (2, 0)
        assert indices.dtype == np.int64


def test_clamp_function(runner):
    x = dg.tensor([-2.0, 0.25, 2.0])
    for out in runner.twice(lambda x: dg.clamp(x, -1.0, 1.0), x):
        assert out.tolist() == [-1.0, 0.25, 1.0]


def test_formatting_a_traced_value_names_the_line():
    def fn(x):
        text = f"{x.sum():.3f}"
        return x * len(text)

    assert fn(dg.ones(2)).tolist() == [5.0, 5.0]  # eager formats the value
    # A format spec reads the value into Python: the signature runs eagerly (a graph
    # break), with a warning naming the line; strict=True raises instead.
    with pytest.warns(RuntimeWarning, match=r"test_ieee_edges.py:\d+.*formatting"):
        assert dg.compile(fn)(dg.ones(2)).tolist() == [5.0, 5.0]
    with pytest.raises(dg.TraceError, match=r"test_ieee_edges.py:\d+.*formatting"):
        dg.compile(fn, strict=True)(dg.ones(2))


@pytest.mark.parametrize("value", ["a", None, [1.0]])
def test_full_refuses_values_that_are_not_numbers(value):
    with pytest.raises(TypeError, match="fill_value"):
        dg.full((2,), value)


def test_full_of_a_complex_number_is_complex():
    # PyTorch: torch.full((2,), 1 + 2j) is a complex64 tensor.
    z = dg.full((2,), 1 + 2j)
    assert z.dtype == dg.complex64 and z.tolist() == [1 + 2j, 1 + 2j]


def test_stack_of_numbers_is_a_type_error():
    with pytest.raises(TypeError, match="element 0 is float"):
        dg.stack([1.0, 2.0])
