"""``parallel=True`` convolutions: the library's per-sample routines with the batch cut in
two parts over Numba's threads (`blas_parallel.conv_conv2d_split` and the others). Every
sample is computed as the serial routine computes it, so the forward convolution, the input
gradient, im2col and col2im keep the serial bits; the weight gradient is the two parts'
sums added in order. Either way the bits do not depend on the number of threads."""

from __future__ import annotations

import numba
import numpy as np

import dualgraph as dg
from dualgraph import nn
from dualgraph.backend.numba import blas
from dualgraph.backend.numba import blas_parallel as bp
from dualgraph.ops.conv import out_size

TWO = min(2, numba.config.NUMBA_NUM_THREADS)


@numba.njit
def _split(x, w, b, out, g, gw, gx, cols, back, t, t0):
    bp.conv_conv2d_split(x, w, b, out, t)
    bp.conv_wgrad_split(x, g, gw, t)
    bp.conv_dgrad_split(g, w, gx, t)
    bp.conv_im2col_split(x, cols, t0)
    bp.conv_col2im_split(cols, back, t0)


@numba.njit
def _serial(x, w, b, out, g, gw, gx, cols, back, t, t0):
    blas.conv_conv2d(x, w, b, out, t)
    blas.conv_wgrad(x, g, gw, t)
    blas.conv_dgrad(g, w, gx, t)
    blas.conv_im2col(x, cols, t0)
    blas.conv_col2im(cols, back, t0)


def _buffers(x: np.ndarray, o: int, kernel: tuple, attrs: dict) -> tuple:
    n, c, h, w = x.shape
    oh, ow = out_size((h, w), kernel, attrs["dilation"], attrs["padding"], attrs["stride"])
    k = c * kernel[0] * kernel[1]
    dt = x.dtype
    return (np.empty((n, o, oh, ow), dt), np.empty((o, c, *kernel), dt),
            np.empty(x.shape, dt), np.empty((n, k, oh * ow), dt), np.empty(x.shape, dt),
            (oh, ow))


def _run(fn, x, w, b, g, attrs, kernel, threads: int) -> list:
    out, gw, gx, cols, back, hw = _buffers(x, g.shape[1], kernel, attrs)
    a = dict(attrs, kernel_size=kernel)
    t = np.array(blas.conv_table(a, hw, 0, True), np.int64)
    t0 = np.array(blas.conv_table(a, hw, 0), np.int64)
    numba.set_num_threads(threads)
    try:
        fn(x, w, b, out, g, gw, gx, cols, back, t, t0)
    finally:
        numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)
    return [out, gw, gx, cols, back]


def test_split_routines_keep_the_serial_bits_but_the_weight_gradient_sums_two_parts():
    rng = np.random.default_rng(0)
    geometries = [  # padded, stride 1; strided and dilated without padding
        (dict(dilation=(1, 1), stride=(1, 1), padding=((1, 1), (1, 1))), (3, 3)),
        (dict(dilation=(2, 1), stride=(2, 2), padding=((0, 0), (0, 0))), (3, 2)),
    ]
    for dtype in (np.float32, np.float64):
        for attrs, kernel in geometries:
            n, c, o = 9, 8, 16  # an odd batch: parts of 4 and 5 samples
            x = rng.standard_normal((n, c, 28, 28)).astype(dtype)
            w = rng.standard_normal(o * c * kernel[0] * kernel[1]).astype(dtype)
            b = rng.standard_normal(o).astype(dtype)
            oh, ow = out_size((28, 28), kernel, attrs["dilation"], attrs["padding"],
                              attrs["stride"])
            assert n * o * oh * ow * c * kernel[0] * kernel[1] >= bp.SPLIT_FLOPS  # split
            g = rng.standard_normal((n, o, oh * ow)).astype(dtype)
            serial = _run(_serial, x, w, b, g, attrs, kernel, 1)
            one, two = (_run(_split, x, w, b, g, attrs, kernel, k) for k in (1, TWO))
            for p1, p2 in zip(one, two):
                assert p1.tobytes() == p2.tobytes()
            for j in (0, 2, 3, 4):  # conv2d, its input gradient, im2col, col2im
                assert serial[j].tobytes() == one[j].tobytes()
            # The weight gradient: the serial routine's sums of the two halves, added.
            h = n // 2
            first = _run(_serial, x[:h], w, b, g[:h], attrs, kernel, 1)[1]
            second = _run(_serial, x[h:], w, b, g[h:], attrs, kernel, 1)[1]
            assert (first + second).tobytes() == one[1].tobytes()
            tol = 1e-4 if dtype == np.float32 else 1e-10
            dg.testing.assert_close(one[1], serial[1], rtol=tol, atol=tol)


def test_small_convolutions_stay_one_serial_call():
    rng = np.random.default_rng(1)
    attrs = dict(dilation=(1, 1), stride=(1, 1), padding=((0, 0), (0, 0)))
    x = rng.standard_normal((2, 1, 6, 6)).astype(np.float32)
    w = rng.standard_normal(4 * 9).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    g = rng.standard_normal((2, 4, 16)).astype(np.float32)
    serial = _run(_serial, x, w, b, g, attrs, (3, 3), 1)
    for s, p in zip(serial, _run(_split, x, w, b, g, attrs, (3, 3), TWO)):
        assert s.tobytes() == p.tobytes()  # the weight gradient too: not cut


def test_parallel_cnn_step_matches_serial_and_eager_on_one_and_two_threads():
    """One parallel and one serial build of a LeNet-like step, each called on three
    batches; the parallel step's bits on one and two threads equal."""
    dg.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(3, 8, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
                        nn.Conv2d(8, 16, 3), nn.ReLU(), nn.Flatten(),
                        nn.Linear(16 * 6 * 6, 10))
    params = list(net.parameters())

    def loss_and_grads(x):
        for p in params:
            p.grad = None
        loss = (net(x) ** 2).mean()
        loss.backward()
        return (loss, *(p.grad for p in params))

    par = dg.compile(loss_and_grads, tiered=False, parallel=True)
    ser = dg.compile(loss_and_grads, tiered=False)
    rng = np.random.default_rng(2)
    for _ in range(3):
        x = dg.tensor(rng.standard_normal((16, 3, 16, 16)).astype(np.float32))
        runs = []
        for threads in (1, TWO):
            dg.set_num_threads(threads)
            try:
                runs.append([r.numpy().copy() for r in par(x)])
            finally:
                dg.set_num_threads(numba.config.NUMBA_NUM_THREADS)
        serial = [r.numpy().copy() for r in ser(x)]
        eager = [r.numpy().copy() for r in loss_and_grads(x)]
        for a, b, s, e in zip(*runs, serial, eager):
            assert a.tobytes() == b.tobytes()
            dg.testing.assert_close(a, s, rtol=1e-4, atol=1e-5)
            dg.testing.assert_close(a, e, rtol=1e-4, atol=1e-5)
    assert len(par.entries()) == 1 and len(ser.entries()) == 1
