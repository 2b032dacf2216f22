"""The library's units as a fresh installation builds them: the batched product is a
unit of its own family, the convolution's window copies (gather, scatter) are units the
convolution routines call by symbol and register first, and the routines' scratch
buffers are raw memory; the answers are NumPy's and eager's."""

from __future__ import annotations

import os
import subprocess
import sys

import numba
import numpy as np
import pytest

import dualgraph as dg
from dualgraph.backend.numba import blas, library


def test_a_kernel_header_registers_the_batched_product_as_a_unit():
    body = "def k(x, y, c):\n    dgb.gemm_batched_float32(x, y, c)\n"
    assert library.needed_by(body) == [("gemm", "batched", "float32")]
    lines = library.needed_lines(body, "from dualgraph.backend.numba import blas as dgb\n")
    assert "dglib.need_units([('gemm', 'batched', 'float32')])" in lines
    assert blas.GEMM_ROUTINES.symbol("batched", "float64") == "dualgraph_gemm_batched_float64"


# A fresh process: what one convolution routine builds, and what the shared compile's
# queue lists for another.
_ONE_ROUTINE = """
from dualgraph.backend.numba import blas, library
print(library.missing([("conv", "dgrad", "float64"), ("gemm", "batched", "float64")]))
blas.need_conv("float32", "wgrad")
print(sorted(blas.ROUTINES.built()), sorted(blas.GEMM_ROUTINES.built()))
"""


def test_a_convolution_routine_builds_its_window_copy_and_nothing_else(tmp_path):
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", _ONE_ROUTINE], env=env, check=True,
                         capture_output=True, text=True).stdout.splitlines()
    # The window copy goes ahead of the routine calling it, so one process can build it
    # while another builds the rest.
    assert out[-2] == ("[('conv', 'scatter', 'float64'), ('conv', 'dgrad', 'float64'), "
                       "('gemm', 'batched', 'float64')]")
    assert out[-1] == "[('gather', 'float32'), ('wgrad', 'float32')] []"


# A convolution's step, compiled in one process and loaded from both disk caches in the
# next: the routines' machine code calls the window copies by symbol, which the loading
# process registers first.
_CONV_STEP = """
import numpy as np
import dualgraph as dg
from dualgraph import nn
from dualgraph.backend.numba import blas

rng = np.random.default_rng(0)
conv = nn.Conv2d(2, 3, 3, padding=1)

def step(x):
    conv.zero_grad()
    y = conv(x).relu().sum()
    y.backward()
    return y, conv.weight.grad, conv.bias.grad

x = dg.tensor(rng.standard_normal((2, 2, 6, 5)).astype(np.float32), requires_grad=True)
want = [t.numpy().copy() for t in step(x)] + [x.grad.numpy().copy()]
x.grad = None
got = [t.numpy().copy() for t in dg.compile(step, tiered=False)(x)] + [x.grad.numpy()]
for g, w in zip(got, want):
    dg.testing.assert_close(g, w, rtol=1e-5, atol=1e-5)
hits = sum(blas.ROUTINES._built[u].cache_hits for u in blas.ROUTINES.built())
print(sorted(blas.ROUTINES.built()), hits > 0)
"""


@pytest.mark.skipif(not blas.HAVE_CBLAS, reason="NumPy's BLAS has no cblas symbols")
def test_a_cached_convolution_routine_loads_with_its_window_copy(tmp_path):
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "numba"),
               DUALGRAPH_CACHE_DIR=str(tmp_path / "kernels"))
    runs = [subprocess.run([sys.executable, "-c", _CONV_STEP], env=env, check=True,
                           capture_output=True, text=True).stdout.splitlines()[-1]
            for _ in range(2)]
    units = "[('conv2d', 'float32'), ('dgrad', 'float32'), ('gather', 'float32'), " \
            "('scatter', 'float32'), ('wgrad', 'float32')]"
    assert runs == [f"{units} False", f"{units} True"]


@numba.njit
def _into(x, y, c):
    blas.gemm_batched(x, y, c)


@pytest.mark.skipif(not blas.HAVE_CBLAS, reason="NumPy's BLAS has no cblas symbols")
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_batched_operands_blas_cannot_read_go_through_raw_copies(dtype):
    rng = np.random.default_rng(1)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    # Neither rows nor columns of these items are contiguous: each operand is copied
    # C-ordered first, the result written through a copy of its own.
    xs = rng.standard_normal((3, 2, 10, 8)).astype(dtype)
    ys = rng.standard_normal((1, 2, 8, 12)).astype(dtype)
    x, y = xs[:, :, ::2, ::2], ys[:, :, ::2, ::2]  # y's batch axis of 1 is broadcast
    c = np.full((3, 2, 10, 12), np.nan, dtype)
    for out in (c[:, :, ::2, ::2], np.empty((3, 2, 5, 6), dtype)):
        _into(x, y, out)
        dg.testing.assert_close(out, x @ y, rtol=tol, atol=tol)
    assert np.isnan(c[:, :, 1::2]).all()
    # One operand copied, the other read in place with a transpose flag.
    yt = np.ascontiguousarray(np.swapaxes(y, -1, -2)).swapaxes(-1, -2)
    out = np.empty((3, 2, 5, 6), dtype)
    _into(x, yt, out)
    dg.testing.assert_close(out, x @ y, rtol=tol, atol=tol)
