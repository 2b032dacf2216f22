"""Eager fast paths that must give the same bits as the general code they shortcut: the
Adam update on the arrays (against the same update written with tensor ops), and the
convolution and pooling kernels (against direct loops over the definition); and the row
sums of softmax and layer norm, a BLAS product with a ones vector where it applies."""

from __future__ import annotations

import itertools
import sys

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.eager import internal
from dualgraph.eager.internal import array_of, version_of
from dualgraph.ops import conv as C
from dualgraph.ops import norm as NORM
from dualgraph.ops import pool as P
from dualgraph.ops import reduce as R
from dualgraph.ops import softmax as SM

_INT = {2: np.int16, 4: np.int32, 8: np.int64}


def _bits(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a)
    return a.view(_INT[a.dtype.itemsize])


def _adam_run(fast: bool, dtype, steps: int, monkeypatch, **kw) -> tuple:
    dg.manual_seed(0)
    params = [dg.tensor(np.random.default_rng(i).standard_normal(s).astype(dtype),
                        requires_grad=True) for i, s in enumerate([(3, 4), (5,), ()])]
    opt = dg.optim.Adam(params, **kw)
    calls = []
    real = internal.adam_update_

    def spy(*a, **k):
        done = real(*a, **k) if fast else False
        calls.append(done)
        return done

    monkeypatch.setattr("dualgraph.optim.adam.adam_update_", spy)
    for k in range(steps):
        opt.zero_grad()
        loss = sum(((p * (k + 1.5)) ** 2).sum() + p.sum() for p in params)
        loss.backward()
        opt.step()
    state = [[array_of(v) for _, v in sorted(opt.state[p].items())] for p in params]
    return ([array_of(p).copy() for p in params], state,
            [version_of(p) for p in params], calls)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kw", [
    {},
    {"lr": 0.01, "amsgrad": True},
    {"maximize": True, "weight_decay": 0.1},
    {"weight_decay": 0.1, "decoupled_weight_decay": True, "eps": 1e-6},
    {"betas": (0.3, 0.5), "lr": 1},  # lerp from the other end; an int lr
])
def test_adam_array_update_gives_the_bits_of_the_tensor_ops(dtype, kw, monkeypatch):
    fast = _adam_run(True, dtype, 4, monkeypatch, **kw)
    slow = _adam_run(False, dtype, 4, monkeypatch, **kw)
    assert all(fast[3]) and len(fast[3]) == 12  # the array path ran for every update
    for a, b in zip(fast[0], slow[0]):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(_bits(a), _bits(b))
    for sa, sb in zip(fast[1], slow[1]):
        for a, b in zip(sa, sb):
            assert a.dtype == b.dtype
            np.testing.assert_array_equal(_bits(a), _bits(b))
    assert fast[2] == slow[2]  # the same version bumps


def test_adam_array_update_declines_what_it_cannot_do_exactly():
    p = dg.tensor([1.0, 2.0], requires_grad=True)
    g = dg.tensor([0.5, 0.5])
    state = {"step": dg.tensor(0.0), "exp_avg": dg.zeros(2), "exp_avg_sq": dg.zeros(2)}
    args = (0.1, (0.9, 0.999), 1e-8, 0, False, False, False)
    assert not internal.adam_update_(p, g, state, *args)  # grad mode on
    with dg.no_grad():
        assert not internal.adam_update_(p, g, state, np.float64(0.1), *args[1:])
        assert not internal.adam_update_(p, g.double(), state, *args)
        assert not internal.adam_update_(p, g, state, dg.tensor(0.1), *args[1:])
        assert array_of(state["step"]) == 0 and version_of(p) == 0
        assert internal.adam_update_(p, g, state, *args)
    assert array_of(state["step"]) == 1 and version_of(p) == 1


def _conv_reference(x, w, b, stride, padding, dilation, groups):
    """The convolution by its definition, one window at a time, in float64."""
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    (pt, pb), (pl, pr) = padding
    xp = np.zeros((n, c, h + pt + pb, wd + pl + pr))
    xp[:, :, pt:pt + h, pl:pl + wd] = x
    oh, ow = C.out_size((h, wd), (kh, kw), dilation, padding, stride)
    out = np.zeros((n, o, oh, ow))
    og = o // groups
    for i, j in itertools.product(range(oh), range(ow)):
        win = xp[:, :, i * stride[0]:i * stride[0] + dilation[0] * (kh - 1) + 1:dilation[0],
                 j * stride[1]:j * stride[1] + dilation[1] * (kw - 1) + 1:dilation[1]]
        for gi in range(groups):
            part = win[:, gi * cg:(gi + 1) * cg]
            out[:, gi * og:(gi + 1) * og, i, j] = np.einsum(
                "nckl,ockl->no", part, w[gi * og:(gi + 1) * og])
    return out + b.reshape(1, o, 1, 1)


_GEOMETRIES = [
    # (input shape, out channels, kernel, stride, padding, dilation, groups)
    ((2, 1, 8, 8), 3, (3, 3), (1, 1), ((1, 1), (1, 1)), (1, 1), 1),
    ((3, 4, 7, 9), 6, (2, 3), (2, 1), ((0, 1), (2, 0)), (1, 2), 2),
    ((1, 2, 6, 5), 2, (3, 2), (1, 3), ((0, 0), (0, 0)), (2, 1), 1),
]


@pytest.mark.parametrize("shape,o,k,stride,padding,dilation,groups", _GEOMETRIES)
def test_conv2d_kernel_matches_the_definition(shape, o, k, stride, padding, dilation,
                                              groups):
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape)
    w = rng.standard_normal((o, shape[1] // groups) + k)
    b = rng.standard_normal(o)
    got = C._conv2d_impl(x, w, b, stride=stride, padding=padding, dilation=dilation,
                         groups=groups)
    assert got.flags.c_contiguous
    dg.testing.assert_close(got, _conv_reference(x, w, b, stride, padding, dilation,
                                                    groups),
                            rtol=1e-12, atol=1e-12, equal_nan=True, check_dtype=False)


@pytest.mark.parametrize("shape,o,k,stride,padding,dilation,groups", _GEOMETRIES)
def test_col2im_is_the_transpose_of_im2col(shape, o, k, stride, padding, dilation,
                                           groups):
    # <im2col(x), c> == <x, col2im(c)> for every x, c: col2im is im2col's adjoint.
    rng = np.random.default_rng(1)
    x = rng.standard_normal(shape)
    cols = C._im2col_impl(x, k, dilation, padding, stride)
    c = rng.standard_normal(cols.shape)
    back = C._col2im_impl(c, shape[2:], k, dilation, padding, stride)
    assert back.shape == shape and back.flags.c_contiguous
    dg.testing.assert_close((cols * c).sum(), (x * back).sum(), rtol=1e-12, atol=0, equal_nan=True,
                            check_dtype=False)
    # and each column is its window, in (C, kH, kW) order
    n, _, length = cols.shape
    view = C._windows_view(x, k, dilation, padding, stride)
    np.testing.assert_array_equal(
        cols, view.transpose(0, 1, 4, 5, 2, 3).reshape(n, -1, length))


@pytest.mark.parametrize("shape,k", [((4, 3, 8, 8), (2, 2)), ((2, 5, 9, 7), (2, 3)),
                                     ((6, 6, 3), (3, 3)), ((2, 1, 4, 4), (1, 2))])
def test_tiled_max_pool_indices_match_the_general_path(shape, k):
    rng = np.random.default_rng(2)
    x = rng.standard_normal(shape).astype(np.float32)
    x[..., 0, :] = 1.0  # ties: the first maximum wins
    x.flat[::7] = -0.0
    oh, ow = shape[-2] // k[0], shape[-1] // k[1]
    attrs = {"kernel_size": k, "stride": k, "padding": (0, 0), "dilation": (1, 1),
             "ceil_mode": False}
    got = P._max_indices_impl(x, **attrs)
    h, w = P.pool_windows(attrs, shape[-2:])
    # the general path: an argmax over every window's positions
    flat = x.reshape(shape[:-2] + (-1,))
    want = np.empty(shape[:-2] + (oh, ow), np.int64)
    for i, j in itertools.product(range(oh), range(ow)):
        pos = np.array([(h.start[i] + a) * shape[-1] + w.start[j] + b
                        for a in range(k[0]) for b in range(k[1])])
        want[..., i, j] = pos[np.argmax(flat[..., pos], axis=-1)]
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("rows,n,v_shape,tail", [
    ((16, 64), 256, (16, 64, 128), (128,)),   # an embedding's gradient
    ((1000,), 5, (1000, 3, 4), (3, 4)),        # rows repeated many times
    ((7,), 3, (4,), (4,)),                     # values broadcast over the rows
    ((2, 3), 4, (1, 3, 2), (2,)),
    ((50,), 2, (50,), ()),                     # past the rounds' limit: np.add.at itself
])
@pytest.mark.parametrize("loop", [False, True])
def test_row_scatter_add_gives_the_bits_of_np_add_at(rows, n, v_shape, tail, loop,
                                                     monkeypatch):
    # ``loop``: the eager routines' compiled loop from the smallest size, else never.
    from dualgraph.eager import routines as eager_routines
    from dualgraph.ops import routines
    from dualgraph.ops.gather import _put_impl

    monkeypatch.setattr(routines, "INSTALLED", [eager_routines] if loop else [])
    monkeypatch.setattr(routines, "FROM", 1)
    rng = np.random.default_rng(3)
    idx = rng.integers(-n, n, (1,) + rows)
    v = rng.standard_normal(v_shape).astype(np.float32)
    v.flat[::5] = -0.0
    got = _put_impl(0.0, v, idx, (0,), accumulate=True, shape=(n,) + tail)
    want = np.zeros((n,) + tail, np.float32)
    np.add.at(want, (idx[0],), v)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(_bits(got), _bits(want))
    assert ("dualgraph.backend.numba.eager_routines" in sys.modules) >= loop
    with pytest.raises(IndexError, match="out of bounds"):
        _put_impl(0.0, v, idx + 3 * n, (0,), accumulate=True, shape=(n,) + tail)


@pytest.mark.parametrize("c_shape", [(2, 3, 4, 1), (1, 5), (5,)])
@pytest.mark.parametrize("fill", [False, True])
def test_where_with_a_uniform_broadcast_condition_matches_np_where(c_shape, fill):
    from dualgraph.ops.elementwise import _where_impl

    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    x.flat[::3] = -0.0
    x.flat[1] = np.nan
    c = np.full(c_shape, fill)
    for args in ((c, 0.0, x), (c, x, 0.0), (c, x, x * 2), (c, 1, x),
                 (c, x.astype(np.float64), x)):
        got, want = _where_impl(*args), np.where(*args)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(_bits(got), _bits(want))


def test_adam_step_on_module_parameters_binds_no_ops():
    # Eagerly the whole update runs on the arrays: no tensor op, no tape, per parameter.
    from dualgraph import modes
    from dualgraph.eager.tensor import eager_process

    dg.manual_seed(0)
    lin = dg.nn.Linear(5, 3)
    opt = dg.optim.Adam(lin.parameters(), lr=0.1, amsgrad=True, weight_decay=0.01)
    seen: list[str] = []

    def record(op, args, attrs):
        seen.append(op.name)
        return eager_process(op, args, attrs)

    for _ in range(2):
        opt.zero_grad()
        lin(dg.randn(4, 5)).sum().backward()
        modes.push_mode(record)
        try:
            opt.step()
        finally:
            modes.pop_mode()
    assert seen == []
    assert all(float(opt.state[p]["step"]) == 2.0 for p in lin.parameters())


def _conv_grads(shape, o, k, stride, padding, dilation, groups, bias, create_graph,
                needs=(True, True)):
    rng = np.random.default_rng(2)
    x = dg.tensor(rng.standard_normal(shape).astype(np.float32), requires_grad=needs[0])
    w = dg.tensor(rng.standard_normal((o, shape[1] // groups) + k).astype(np.float32),
                  requires_grad=needs[1])
    b = dg.tensor(rng.standard_normal(o).astype(np.float32), requires_grad=True) if bias \
        else None
    y = C.conv2d(x, w, b, stride, padding, dilation, groups)
    g = dg.tensor(rng.standard_normal(tuple(y.shape)).astype(np.float32))
    node = y.grad_fn
    assert node.name() == "ConvolutionBackward0"
    kept = node._kept
    y.backward(g, create_graph=create_graph)
    grads = [None if t is None or t.grad is None else array_of(t.grad).copy()
             for t in (x, w, b)]
    return grads, kept, node


@pytest.mark.parametrize("shape,o,k,stride,padding,dilation,groups", _GEOMETRIES)
@pytest.mark.parametrize("bias", [True, False])
def test_conv2d_array_backward_gives_the_bits_of_the_recorded_one(
        shape, o, k, stride, padding, dilation, groups, bias):
    # The array-form VJP (nothing recording) against the tensor-op VJP a create_graph
    # backward runs: the weight's and bias's gradients are the same kernels in the same
    # layouts, so the same bits; the input's is the same sums from columns laid out with
    # the batch innermost (BLAS may round those products differently).
    fast, kept, node = _conv_grads(shape, o, k, stride, padding, dilation, groups, bias,
                                   False)
    slow, _, _ = _conv_grads(shape, o, k, stride, padding, dilation, groups, bias, True)
    for i, (f, s) in enumerate(zip(fast, slow)):
        assert (f is None) == (s is None)
        if f is None:
            continue
        assert f.flags.c_contiguous
        if i == 0:
            dg.testing.assert_close(f, s, rtol=1e-6, atol=1e-6)
        else:
            np.testing.assert_array_equal(_bits(f), _bits(s))
    # The node kept the forward's columns for the weight gradient, and dropped them with
    # its other saved values after the backward.
    assert kept is not None and kept.shape[0] == shape[1] * k[0] * k[1]
    assert node._kept is None


def test_conv2d_backward_reads_the_kept_columns_instead_of_recomputing(monkeypatch):
    shape, o, k, stride, padding, dilation, groups = _GEOMETRIES[1]
    calls = []
    real = C._columns

    def spy(*a, **kw):
        calls.append(1)
        return real(*a, **kw)

    monkeypatch.setattr(C, "_columns", spy)
    (gx, gw, gb), kept, _ = _conv_grads(shape, o, k, stride, padding, dilation, groups,
                                        True, False)
    assert len(calls) == 1 and gw is not None  # the forward's, none in the backward
    # Without a weight that needs a gradient, nothing is kept (the columns serve only it).
    calls.clear()
    (gx, gw, _), kept, _ = _conv_grads(shape, o, k, stride, padding, dilation, groups,
                                       False, False, needs=(True, False))
    assert kept is None and gw is None and gx is not None and len(calls) == 1


@pytest.mark.parametrize("shape,o,k,stride,padding,dilation,groups", _GEOMETRIES + [
    ((2, 3, 5, 6), 1, (2, 2), (1, 2), ((1, -1), (0, 1)), (1, 1), 1),  # a short end
])
def test_col2im_with_the_batch_innermost_gives_the_bits_of_col2im(
        shape, o, k, stride, padding, dilation, groups):
    rng = np.random.default_rng(3)
    oh, ow = C.out_size(shape[2:], k, dilation, padding, stride)
    n, c = shape[:2]
    cols = rng.standard_normal((n, c * k[0] * k[1], oh * ow)).astype(np.float32)
    want = C._col2im_impl(cols, shape[2:], k, dilation, padding, stride)
    src = cols.reshape(n, c, k[0], k[1], oh, ow).transpose(1, 2, 3, 4, 5, 0).copy()
    got = C._col2im_batch_inner(src, shape[2:], dilation, padding, stride)
    assert got.flags.c_contiguous
    np.testing.assert_array_equal(_bits(got), _bits(want))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize("affine", [(True, True), (False, True), (False, False)])
def test_layer_norm_backward_from_the_kept_xhat_gives_the_bits_of_the_recorded_one(
        dtype, affine):
    # Eagerly the forward keeps xhat and rstd (float32 and float64) for the array-form
    # backward; the tensor-op VJP (create_graph) recomputes them. Both, and a second
    # array-form backward through the same graph (the kept arrays are read, not
    # overwritten), agree bit for bit; the output is never the kept xhat itself.
    F = dg.nn.functional
    rng = np.random.default_rng(4)
    a = (rng.standard_normal((3, 5, 16)) * 2 + 1).astype(dtype)
    g = dg.tensor(rng.standard_normal((3, 5, 16)).astype(dtype))
    w = dg.tensor(rng.standard_normal(16).astype(dtype), requires_grad=True) \
        if affine[0] else None
    b = dg.tensor(rng.standard_normal(16).astype(dtype), requires_grad=True) \
        if affine[1] else None
    x = dg.tensor(a, requires_grad=True)
    y = F.layer_norm(x, (16,), w, b)
    kept = y.grad_fn._kept
    assert (kept is None) == (dtype == np.float16)
    if kept is not None:
        assert kept[0].shape == a.shape and not np.shares_memory(array_of(y), kept[0])
    wrt = [t for t in (x, w, b) if t is not None]
    fast = dg.autograd.grad(y, wrt, g, retain_graph=True)
    again = dg.autograd.grad(y, wrt, g, retain_graph=True)
    slow = dg.autograd.grad(y, wrt, g, create_graph=True)
    for f, f2, s in zip(fast, again, slow):
        assert f.dtype == s.dtype
        np.testing.assert_array_equal(_bits(array_of(f)), _bits(array_of(s)))
        np.testing.assert_array_equal(_bits(array_of(f2)), _bits(array_of(s)))
    with dg.no_grad():  # the forward without keeping: the same bits
        np.testing.assert_array_equal(_bits(array_of(F.layer_norm(x, (16,), w, b))),
                                      _bits(array_of(y)))


# ------------------------------------------------------------------ row sums through BLAS
def _ones_product(x: np.ndarray, k: int) -> np.ndarray:
    n = int(np.prod(x.shape[x.ndim - k:]))
    return (x.reshape(-1, n) @ np.ones(n, x.dtype)).reshape(x.shape[:x.ndim - k] + (1,) * k)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape,k", [((64, 128), 1), ((8, 16, 32), 2), ((4, 4, 4, 64), 1)])
def test_row_sums_are_a_gemv_on_contiguous_rows(dtype, shape, k):
    x = np.random.default_rng(0).standard_normal(shape).astype(dtype)
    got = R.row_sums(x, k)
    assert got.shape == x.shape[:x.ndim - k] + (1,) * k and got.dtype == x.dtype
    assert got.tobytes() == _ones_product(x, k).tobytes()
    axes = tuple(range(x.ndim - k, x.ndim))
    want = np.add.reduce(x.astype(np.float64), axes, keepdims=True)
    scale = np.add.reduce(np.abs(x.astype(np.float64)), axes, keepdims=True)
    assert (np.abs(got - want) <= 4 * np.finfo(dtype).eps * scale).all()


@pytest.mark.parametrize("x", [
    np.ones((4, 8), np.float32),                               # too small to pay
    np.ones((2, 4096), np.float32),                            # rows past the width bound
    np.ones((64, 128), np.float16),                            # no BLAS product
    np.ones((128, 64), np.float32).T,                          # not C-ordered
    np.arange(64 * 128, dtype=np.int64).reshape(64, 128),      # integers
])
def test_row_sums_reduce_where_blas_does_not_apply(x):
    got = R.row_sums(x)
    want = np.add.reduce(x, axis=-1, keepdims=True)
    assert got.dtype == want.dtype and got.tobytes() == want.tobytes()


def test_softmax_and_layer_norm_sum_their_rows_through_blas():
    x = np.random.default_rng(1).standard_normal((32, 128)).astype(np.float32)
    e = np.exp(x - x.max(-1, keepdims=True))
    assert SM.SOFTMAX.impl(x, axis=1).tobytes() == (e / _ones_product(e, 1)).tobytes()
    mean = _ones_product(x, 1) / 128
    xc = x - mean
    rstd = 1.0 / np.sqrt(_ones_product(xc * xc, 1) / 128 + np.float32(1e-5))
    got = NORM.LAYER_NORM.impl(x, 1.0, 0.0, ndim=1, eps=1e-5)
    assert got.tobytes() == (xc * rstd).tobytes()
