"""PyTorch's wider top-level and Tensor surface: the names exist, compositions have the
right gradients (float64 finite differences), compile to the same numbers as eager, and
bad input raises PyTorch's exception types. PyTorch's values are in the goldens
(``tests/goldens/programs.py``: special_functions, matrix_functions, products,
pointwise_names, statistics_names, eager_only_names)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.errors import TraceError
from dualgraph.testing import assert_close, gradcheck

# Names real programs reach for (torch.X, Tensor.X, torch.linalg.X, torch.special.X).
TOP_LEVEL = """Size equal numel bernoulli normal poisson finfo iinfo LongTensor FloatTensor
DoubleTensor IntTensor ByteTensor BoolTensor addmm addbmm baddbmm mv dot vdot tensordot
addcmul addcdiv hypot nan_to_num signbit lgamma digamma erfinv erfc logdet det inverse linalg
norm cdist broadcast_tensors broadcast_shapes block_diag cartesian_prod tril_indices
triu_indices squeeze unsqueeze permute t unique unique_consecutive bincount aminmax quantile
nanquantile nanmean nansum mode logspace as_tensor is_floating_point promote_types
result_type can_cast set_default_dtype set_num_threads get_num_threads set_printoptions
special jit uint16 clone detach eq ne gt ge lt le numel select take masked_scatter
combinations unravel_index hann_window trapezoid vander diagflat polygamma logit xlogy
fmax fmin float_power logaddexp2 deg2rad rad2deg clamp_min clamp_max isin isposinf isneginf
dist chain_matmul inner addmv addr conv2d max_pool2d dropout layer_norm embedding
channels_last contiguous_format strided autocast e pi inf nan scalar_tensor typename i0""".split()
METHODS = """stride element_size data_ptr nelement ndimension storage_offset byte char short
bernoulli_ exponential_ random_ geometric_ masked_scatter_ put_ sum_to_size addmm_ baddbmm
lerp_ norm renorm mT mH H apply_ share_memory_ pin_memory is_pinned addcmul_ addcdiv_ det
inverse lgamma digamma erfinv logit quantile nanmean nansum mode unique bincount aminmax
multinomial bernoulli new type fill_diagonal_ cov corrcoef dot mv select take put i0 i0_""".split()
LINALG = "norm vector_norm matrix_norm inv det slogdet solve matmul cross multi_dot".split()
SPECIAL = """erf erfc erfinv expit logit xlogy gammaln digamma psi ndtr ndtri entr i0 i0e i1 i1e
modified_bessel_i0 modified_bessel_i1""".split()


def test_the_names_exist():
    x = dg.ones(2, 2)
    missing = ([n for n in TOP_LEVEL if not hasattr(dg, n)]
               + [f"Tensor.{n}" for n in METHODS if not hasattr(x, n)]
               + [f"linalg.{n}" for n in LINALG if not hasattr(dg.linalg, n)]
               + [f"special.{n}" for n in SPECIAL if not hasattr(dg.special, n)])
    assert not missing, missing


# ------------------------------------------------------------------ gradients
_R = np.random.default_rng(7)
_M = _R.standard_normal((2, 3, 3)) * 0.3 + 2.0 * np.eye(3)
GRADIENTS = [
    ("addmm_scaled", lambda c, a, b: dg.addmm(c, a, b, beta=0.5, alpha=-2.0),
     [(3, 2), (3, 4), (4, 2)]),
    ("baddbmm", lambda c, a, b: dg.baddbmm(c, a, b, alpha=0.3), [(3, 2), (2, 3, 4), (2, 4, 2)]),
    ("addbmm", lambda c, a, b: dg.addbmm(c, a, b, beta=2.0), [(3, 2), (2, 3, 4), (2, 4, 2)]),
    ("tensordot", lambda a, b: dg.tensordot(a, b, ([0, 2], [0, 1])), [(2, 3, 4), (2, 4, 2)]),
    ("inner_mv_dot", lambda a, v: dg.inner(a, a).sum() + dg.mv(a, v).sum() + dg.dot(v, v),
     [(3, 4), (4,)]),
    ("addcmul_addcdiv", lambda x, y: dg.addcmul(x, x, y, value=0.5)
     + dg.addcdiv(x, x, y.abs() + 1.0, value=2.0), [(2, 3), (2, 3)]),
    ("hypot_logaddexp2", lambda x, y: dg.hypot(x, y) + dg.logaddexp2(x, y), [(2, 3), (2, 3)]),
    ("vector_norms", lambda x: dg.linalg.vector_norm(x) + dg.linalg.vector_norm(x, 3.0)
     + dg.linalg.vector_norm(x, 1, dim=1).sum() + dg.linalg.vector_norm(x, -2, dim=0).sum(),
     [(3, 4)]),
    ("matrix_norms", lambda x: dg.linalg.matrix_norm(x) + dg.linalg.matrix_norm(x, 1)
     + dg.linalg.matrix_norm(x, -math.inf), [(3, 4)]),
    ("renorm", lambda x: x.renorm(2, 0, 1.5), [(3, 4)]),
    ("cdist_p2_p1", lambda a, b: dg.cdist(a, b).sum() + dg.cdist(a, b, p=1).sum(),
     [(3, 4), (2, 4)]),
    ("inv_det_solve", lambda m, b: dg.linalg.inv(m).sum() + dg.linalg.det(m).sum()
     + dg.linalg.solve(m, b).sum() + dg.logdet(m).sum()
     + dg.linalg.matrix_power(m, -2).sum(), [_M, (2, 3, 2)]),
    ("special", lambda p, u: dg.lgamma(p) + dg.digamma(p) + dg.polygamma(2, p)
     + dg.erfc(u) + dg.erfinv(u * 0.9) + dg.special.ndtr(u) + dg.special.entr(p)
     + dg.special.xlogy(p, p) + dg.special.logit(p / 3.0), [("pos", (2, 3)), (2, 3)]),
    # Both signs, zero (where i1's derivative is the limit 1/2; i0e has a kink there) and
    # the asymptotic side, which the unscaled forms see at a scale where finite
    # differences of e^|x| keep their precision.
    ("bessel", lambda x: dg.special.i0(x * 0.125) + dg.special.i0e(x + 0.5)
     + dg.special.i1(x * 0.125) + dg.special.i1e(x) + (x * 0.125).i0(),
     [np.array([-23.0, -2.5, 0.0, 0.7, 3.0, 24.0])]),
    ("cov_weights", lambda x, a: dg.cov(x, fweights=dg.tensor([1, 2, 0, 3, 1]))
     + dg.cov(x, aweights=a.abs() + 0.1) + dg.cov(x, fweights=dg.tensor([2, 1, 1, 1, 3]),
                                                  aweights=a.abs() + 0.2, correction=2),
     [(3, 5), (5,)]),
    ("quantiles", lambda x: dg.quantile(x, 0.3, dim=1).sum()
     + dg.nanquantile(x, 0.6, dim=0, interpolation="midpoint").sum()
     + dg.quantile(x, 0.5), [(3, 5)]),
    ("quantiles_of_a_tensor_q", lambda x, q: dg.quantile(x, q.sigmoid(), dim=1).pow(2).sum()
     + dg.nanquantile(x, q.sigmoid() * 0.9, dim=0).sum() + dg.quantile(x, q[0].sigmoid()),
     [(3, 5), (3,)]),
    ("statistics", lambda x: dg.nanmean(x, 1).sum() + dg.cov(x).sum()
     + dg.corrcoef(x).sum() + dg.aminmax(x, dim=1).max.sum(), [(3, 5)]),
    ("scatter_like", lambda x, s: x.masked_scatter(x > 0, s).sum() + dg.take(
        x, dg.tensor([1, 4])).sum() + x.put(dg.tensor([0, 3]), s[:2]).pow(2).sum()
     + x.sum_to_size(1, 3).sum(), [(2, 3), (6,)]),
    ("fmax_nan_to_num", lambda x, y: dg.fmax(x, y) + dg.fmin(x, y) + dg.nan_to_num(x),
     [(2, 3), (2, 3)]),
    ("finite_differences", lambda x, c: dg.gradient(x, edge_order=2)[1].pow(2).sum()
     + dg.gradient(x, spacing=(dg.cumsum(c * c + 0.5, 0),), dim=0)[0].pow(2).sum(),
     [(4, 5), (4,)]),
    ("view_copies", lambda x: dg.narrow_copy(x, 1, 1, 2).sum() * 2.0
     + dg.expand_copy(x[:, :1], (2, 4)).pow(2).sum() + dg.slice_copy(x, 1, 0, None, 2).prod()
     + dg.split_copy(x, 2, 1)[1].exp().sum() + dg.diagonal_copy(x).sum() * 3.0
     + dg.unfold_copy(x, 1, 2, 1).pow(3).sum() + dg.permute_copy(x, (1, 0))[0].sum(),
     [(2, 3)]),
]


def _array(spec, rng):
    if isinstance(spec, np.ndarray):
        return spec
    if spec[0] == "pos":
        return rng.uniform(0.5, 2.0, spec[1])
    return rng.standard_normal(spec)


@pytest.mark.parametrize(("fn", "specs"), [pytest.param(f, s, id=n) for n, f, s in GRADIENTS])
def test_composition_gradients_match_finite_differences(fn, specs):
    rng = np.random.default_rng(3)
    assert gradcheck(lambda *a: fn(*a).sum(), *[_array(s, rng) for s in specs])


def test_norm_gradients_are_zero_at_zero():
    x = dg.zeros(2, 3, dtype=dg.float64, requires_grad=True)
    (dg.linalg.vector_norm(x) + dg.norm(x, dim=1).sum() + dg.cdist(x, x).sum()
     + dg.linalg.vector_norm(x, 3.0)).backward()
    assert np.all(x.grad.numpy() == 0)


# ------------------------------------------------------ compiled equals eager


def test_compiled_equals_eager_for_the_new_ops():
    """One compiled function over the new primitives and the traceable compositions:
    its value and gradients equal eager ones (float64), in one trace."""
    def f(m, p, u, x):
        return (dg.linalg.inv(m).sum() + dg.det(m).sum() + dg.linalg.slogdet(m).logabsdet.sum()
                + dg.lgamma(p).sum() + dg.digamma(p - 2.6).sum() + dg.polygamma(1, p).sum()
                + dg.erfc(u).sum() + dg.erfinv(u * 0.5).sum() + dg.special.logit(p / 3.0).sum()
                + dg.linalg.vector_norm(x, 3.0) + dg.cdist(x, x * 0.5).sum()
                + dg.quantile(x, 0.3, dim=1).sum() + dg.nanmean(x) + dg.cov(x).sum()
                + dg.cov(x, fweights=dg.tensor([1, 2, 0, 3]), aweights=p.reshape(-1)[:4]).sum()
                + dg.addmm(x[:, :2], x, x.T[:, :2], beta=0.5).sum()
                + dg.tensordot(x, x, ([1], [1])).sum() + x.masked_scatter(x > 0, u.reshape(-1)
                                                                         ).sum()
                + dg.hypot(x, x * 0.5).sum() + x.renorm(2, 0, 1.0).sum()
                + dg.narrow_copy(x, 1, 1, 2).pow(2).sum() + dg.expand_copy(x[:1], (2, 4)).sum()
                + dg.gradient(x, edge_order=2)[1].pow(2).sum()
                + (dg.special.i0(x) + dg.special.i0e(x * 30.0) + dg.special.i1(x * 30.0)
                   + dg.special.i1e(x)).sum())

    rng = np.random.default_rng(11)
    arrays = [_M, rng.uniform(0.5, 2.0, (2, 3)), rng.uniform(-0.9, 0.9, (2, 3)),
              rng.standard_normal((3, 4))]

    def run(fn):
        ts = [dg.tensor(a, requires_grad=True) for a in arrays]
        out = fn(*ts)
        out.backward()
        return out.numpy(), [t.grad.numpy() for t in ts]

    compiled = dg.compile(f)
    (e, eg), (c, cg) = run(f), run(compiled)
    assert_close(c, e, rtol=1e-10, atol=1e-10)
    for a, b in zip(cg, eg):
        assert_close(a, b, rtol=1e-9, atol=1e-10)
    assert compiled.stats.traces == 1


def test_special_scalar_kernels_match_scipy():
    """The Numba lowerings' scalar polygamma and erfinv against SciPy, tails included."""
    sp = pytest.importorskip("scipy.special")
    from dualgraph.backend.numba import kernels

    xs = np.concatenate([np.linspace(-7.3, 30.0, 150), [1e-8, 1e-3, 1e5, -2.5]])
    for n in range(4):
        ours = np.array([kernels.polygamma(n, x) for x in xs])
        ref = sp.psi(xs) if n == 0 else sp.polygamma(n, xs)
        assert_close(ours, ref, rtol=1e-12, atol=1e-12)
    assert kernels.polygamma(0, 0.0) == -math.inf and math.isnan(kernels.polygamma(0, -2.0))
    ys = np.concatenate([np.linspace(-1, 1, 2001)[1:-1], [1 - 1e-12, -1 + 1e-15, 1e-300]])
    assert_close(np.array([kernels.erfinv(y) for y in ys]), sp.erfinv(ys), rtol=1e-14,
                 atol=0)
    assert kernels.erfinv(1.0) == math.inf and math.isnan(kernels.erfinv(1.5))
    # Both sides of the switch from the power series to the asymptotic one, and the ends.
    xs = np.concatenate([np.linspace(-60.0, 60.0, 481), [1e-300, 19.999, 20.001, 700.0]])
    for n in (0, 1):
        for scaled in (0, 1):
            ours = np.array([kernels.bessel_i(n, scaled, x) for x in xs])
            ref = getattr(sp, f"i{n}{'e' if scaled else ''}")(xs)
            assert_close(ours, ref, rtol=1e-14, atol=0)
            ends = [kernels.bessel_i(n, scaled, x) for x in (math.inf, -math.inf, math.nan)]
            assert_close(np.array(ends), getattr(sp, f"i{n}{'e' if scaled else ''}")(
                np.array([math.inf, -math.inf, math.nan])), rtol=0, atol=0, equal_nan=True)
    assert kernels.bessel_i(0, 0, 710.0) == math.inf  # e^|x| overflows, as PyTorch's


# --------------------------------------------------------------------- errors


@pytest.mark.parametrize(("fn", "exc", "match"), [
    (lambda: dg.dot(dg.ones(3), dg.ones(4)), RuntimeError, "same number of elements"),
    (lambda: dg.dot(dg.ones(3), dg.ones(3, dtype=dg.float64)), RuntimeError, "same dtype"),
    (lambda: dg.mv(dg.ones(3), dg.ones(3)), ValueError, "2-D"),
    (lambda: dg.tensordot(dg.ones(2, 3), dg.ones(4, 2), 1), RuntimeError, "contracted"),
    (lambda: dg.linalg.inv(dg.ones(2, 3)), RuntimeError, "square"),
    (lambda: dg.linalg.inv(dg.ones(2, 2)), dg.linalg.LinAlgError, "singular"),
    (lambda: dg.linalg.inv(dg.ones(2, 2, dtype=dg.int64)), RuntimeError, "floating point"),
    (lambda: dg.cdist(dg.ones(2, 3), dg.ones(2, 4)), RuntimeError, "same number of columns"),
    (lambda: dg.quantile(dg.ones(3), 1.5), RuntimeError, r"\[0, 1\]"),
    (lambda: dg.quantile(dg.ones(3), 0.5, interpolation="cubic"), RuntimeError, "linear"),
    (lambda: dg.bincount(dg.tensor([1, -1])), RuntimeError, "non-negative"),
    (lambda: dg.linalg.matrix_norm(dg.ones(2, 2), 3), RuntimeError, "not supported"),
    (lambda: dg.set_default_dtype(dg.int64), TypeError, "floating-point"),
    (lambda: dg.finfo(dg.int64), TypeError, "floating"),
    (lambda: dg.ones(3).mT, RuntimeError, "matrices"),
    (lambda: dg.addcdiv(dg.ones(2), dg.tensor([1, 2]), dg.tensor([1, 2])), RuntimeError,
     "Integer division"),
    (lambda: dg.Size([2, 1.5]), TypeError, "ints"),
    (lambda: dg.gradient(dg.ones(2, 3), edge_order=2), RuntimeError, "at least edge_order"),
    (lambda: dg.gradient(dg.ones(3), spacing=[1.0, 2.0]), RuntimeError, "list of length 1"),
    (lambda: dg.gradient(dg.ones(3), edge_order=3), RuntimeError, "edge_order=2"),
    (lambda: dg.ones(2, 3).sum_to_size(2), RuntimeError, "expandable"),
    (lambda: dg.polygamma(-1, dg.ones(2)), RuntimeError, "negative"),
    (lambda: dg.cov(dg.ones(2, 3), fweights=dg.ones(3)), RuntimeError, "integral dtype"),
    (lambda: dg.cov(dg.ones(2, 3), aweights=dg.tensor([1, 2, 3])), RuntimeError,
     "floating point dtype"),
    (lambda: dg.cov(dg.ones(2, 3), fweights=dg.tensor([1, -2, 3])), RuntimeError,
     "fweights cannot be negative"),
    (lambda: dg.cov(dg.ones(2, 3), aweights=dg.ones(2)), RuntimeError, "2 != 3"),
    (lambda: dg.cov(dg.ones(2, 3), aweights=dg.ones(3, 1)), RuntimeError, "one or fewer"),
    (lambda: dg.index_select(dg.tensor(1.0), 0, dg.tensor([0, 0])), RuntimeError,
     "Index to scalar can have only 1 value, got 2"),
    (lambda: dg.gather(dg.ones(2), 0, dg.tensor([0], dtype=dg.int16)), RuntimeError,
     "int32/int64"),
])
def test_bad_input_raises_pytorchs_exception(fn, exc, match):
    with pytest.raises(exc, match=match):
        fn()


@pytest.mark.parametrize("fn", [
    lambda x: dg.mode(x, 0).values, lambda x: dg.bincount(x.long()),
    lambda x: dg.unique(x), lambda x: dg.unique_consecutive(x),
])
def test_data_dependent_names_run_eagerly_or_refuse_a_full_graph(fn):
    # As torch.compile breaks the graph there, and raises with fullgraph=True.
    x = dg.ones(4)
    with pytest.warns(RuntimeWarning, match="depends on the data"):
        got = dg.compile(fn)(x)
    dg.testing.assert_close(got, fn(x))
    with pytest.raises(TraceError, match="depends on the data"):
        dg.compile(fn, fullgraph=True)(x)


def test_poisson_refuses_to_trace():
    with pytest.raises(TraceError):
        dg.compile(lambda x: dg.poisson(x))(dg.ones(4))


# ------------------------------------------------------------- the rest


def test_size_is_a_tuple_of_ints():
    s = dg.ones(2, 3, 4).size()
    assert isinstance(s, dg.Size) and isinstance(s, tuple)
    assert s == (2, 3, 4) and s.numel() == 24 and repr(s) == "dg.Size([2, 3, 4])"
    assert isinstance(s[1:], dg.Size) and s[1:] == (3, 4) and s[-1] == 4
    assert dg.Size([2]) + (3,) == dg.Size([2, 3]) and dg.zeros(s).shape == (2, 3, 4)
    assert dg.ones(2, 3).size(1) == 3


def test_shape_is_a_size_wherever_torch_gives_one():
    import pickle

    from dualgraph.trace.tracer import trace

    x, p = dg.ones(2, 3), dg.nn.Parameter(dg.ones(4))
    z = dg.complex(dg.ones(2, 3), dg.zeros(2, 3))
    for shape in (x.shape, x[0].shape, p.shape, z.shape, dg.view_as_real(z).shape):
        assert type(shape) is dg.Size
    assert x.shape == (2, 3) and hash(x.shape) == hash((2, 3)) and x.shape.numel() == 6
    assert repr(x.shape) == "dg.Size([2, 3])" and type(x.shape[1:]) is dg.Size
    assert pickle.loads(pickle.dumps(x.shape)) == x.shape
    assert dg.zeros(x.shape).shape == (2, 3) and x.reshape(x.shape[::-1]).shape == (3, 2)
    seen = []

    def f(a):
        seen.append((type(a.shape), type(a.size()), type((a * 2).shape)))
        return a.reshape(a.shape[::-1])

    trace(f, x)
    assert seen == [(dg.Size, dg.Size, dg.Size)]


def test_view_copies_own_their_memory():
    x = dg.arange(24.0).reshape(2, 3, 4)
    copies = [dg.narrow_copy(x, 1, 1, 2), x.narrow_copy(2, 0, 2), dg.t_copy(x[0]),
              dg.expand_copy(x[:, :1], [2, 5, 4]), dg.slice_copy(x, 2, 1, None, 2),
              dg.view_copy(x, (6, 4)), dg.alias_copy(x), dg.select_copy(x, 1, 0),
              *dg.split_with_sizes_copy(x, [1, 2], 1), *dg.unbind_copy(x)]
    views = [x.narrow(1, 1, 2), x.narrow(2, 0, 2), x[0].t(), x[:, :1].expand(2, 5, 4),
             x[:, :, 1::2], x.view(6, 4), x, x.select(1, 0), *x.split([1, 2], 1), *x.unbind()]
    for c, v in zip(copies, views, strict=True):
        assert c.shape == v.shape and np.array_equal(c.numpy(), v.numpy())
        c.add_(100.0)
    assert np.array_equal(x.numpy(), np.arange(24.0).reshape(2, 3, 4))
    assert isinstance(dg.split_copy(x, 1), tuple)


def test_gradient_spacing_none_is_unit_spacing():
    x = dg.tensor([[1.0, 2.0, 4.0], [0.0, 3.0, 9.0]])
    for got, want in zip(dg.gradient(x, spacing=None), (dg.tensor([[-1.0, 1.0, 5.0]] * 2),
                                                         dg.tensor([[1.0, 1.5, 2.0],
                                                                    [3.0, 4.5, 6.0]]))):
        assert_close(got, want)


def test_layout_queries_follow_the_array():
    x = dg.zeros(3, 4)
    assert x.stride() == (4, 1) and x.t().stride() == (1, 4) and x.stride(0) == 4
    assert x.element_size() == 4 and x.nelement() == 12 and x.ndimension() == 2
    assert x.storage_offset() == 0 and x.data_ptr() == x.numpy().ctypes.data
    assert x.pin_memory() is x and not x.is_pinned() and x.share_memory_() is x
    assert x.mT.shape == (4, 3) and x.H.shape == (4, 3) and dg.ones(2, 3, 4).mH.shape == (2, 4, 3)
    assert x.byte().dtype == np.uint8 and x.char().dtype == np.int8 and x.short().dtype == np.int16
    assert x.layout is dg.strided


def test_random_fills_and_sampling():
    dg.manual_seed(0)
    x = dg.zeros(2000)
    assert x.bernoulli_(0.25) is x and abs(x.mean().item() - 0.25) < 0.05
    assert set(np.unique(x.numpy())) <= {0.0, 1.0}
    r = dg.zeros(1000, dtype=dg.int64).random_(3, 7)
    assert r.min().item() == 3 and r.max().item() == 6
    assert dg.zeros(100).exponential_(2.0).min().item() > 0
    assert dg.zeros(5).apply_(lambda v: v + 2).tolist() == [2.0] * 5
    assert dg.bernoulli(dg.tensor([0.0, 1.0])).tolist() == [0.0, 1.0]
    n = dg.normal(dg.zeros(4000), 2.0)
    assert abs(n.std().item() - 2.0) < 0.1
    # Inside a compiled function they are random ops: fresh numbers every call.
    f = dg.compile(lambda p: dg.bernoulli(p) + dg.normal(p, 1.0))
    a, b = f(dg.full((64,), 0.5)), f(dg.full((64,), 0.5))
    assert not np.array_equal(a.numpy(), b.numpy()) and f.stats.traces == 1


def test_input_keyword_and_function_forms_of_methods():
    x = dg.tensor([[1.0, -2.0], [3.0, 4.0]])
    assert dg.sum(input=x).item() == 6.0
    assert dg.mean(input=x, dim=0).tolist() == [2.0, 1.0]
    assert dg.maximum(x, other=dg.zeros(2)).tolist() == [[1.0, 0.0], [3.0, 4.0]]
    assert dg.t(x).tolist() == [[1.0, 3.0], [-2.0, 4.0]]
    assert dg.squeeze(x[None]).shape == (2, 2) and dg.unsqueeze(x, 0).shape == (1, 2, 2)
    assert dg.permute(x, (1, 0)).tolist() == dg.t(x).tolist() and dg.numel(x) == 4
    assert dg.equal(x, x.clone()) and not dg.equal(x, x[:1])


def test_legacy_types_jit_and_settings():
    assert dg.LongTensor([1, 2]).dtype == np.int64 and dg.FloatTensor(2, 3).shape == (2, 3)
    assert isinstance(dg.zeros(2), dg.FloatTensor) and not isinstance(dg.zeros(2), dg.LongTensor)
    assert dg.zeros(2).type() == "torch.FloatTensor"
    assert dg.zeros(2).type(dg.LongTensor).dtype == np.int64
    assert dg.zeros(2).type("torch.DoubleTensor").dtype == np.float64

    @dg.jit.script
    def double(v):
        return v * 2

    assert double(dg.tensor(2.0)).item() == 4.0 and not dg.jit.is_scripting()
    assert dg.jit.ignore(double) is double and dg.jit.trace(double, dg.ones(1)) is double
    assert dg.get_num_threads() >= 1
    x = dg.tensor([1.123456, 2.5])
    try:
        dg.set_printoptions(precision=2)
        assert repr(x) == "tensor([1.12, 2.50])"
    finally:
        dg.set_printoptions(profile="default")
    assert repr(x) == "tensor([1.1235, 2.5000])"
    assert dg.finfo(dg.float32).eps == float(np.finfo(np.float32).eps)
    assert dg.iinfo(dg.int8).min == -128 and dg.promote_types(dg.int64, dg.float32) == np.float32
    assert dg.can_cast(dg.int64, dg.float32) and not dg.can_cast(dg.float32, dg.int64)


def test_quantile_of_a_zero_dim_q_adds_no_dim():
    x = dg.tensor([[1.0, 4.0, 2.0], [3.0, 0.0, 5.0]])
    assert dg.quantile(x, dg.tensor(0.5), dim=1).tolist() == [2.0, 3.0]
    assert dg.nanquantile(x, dg.tensor(0.5)).shape == ()
    assert dg.quantile(x, dg.tensor([0.5]), dim=1, keepdim=True).shape == (1, 2, 1)
    scalar = dg.tensor(2.0)
    assert dg.quantile(scalar, 0.5, dim=0, keepdim=True).shape == ()
    assert dg.nanquantile(scalar, dg.tensor([0.2, 0.5]), dim=0, keepdim=True).shape == (2,)


def test_unique_consecutive_of_an_empty_dim():
    x = dg.zeros(5, 0, 5)
    vals, inv, counts = dg.unique_consecutive(x, return_inverse=True, return_counts=True, dim=1)
    assert vals.shape == (5, 0, 5) and inv.shape == (0,) and counts.shape == (0,)
    with pytest.raises(RuntimeError, match="0 sized dimensions"):
        dg.unique_consecutive(x, dim=0)
