"""The row ops (softmax, log_softmax, layer_norm and their backward ops) as calls of the
library's C functions (`row_kernels`): compiled equal to eager on odd row lengths, rows
along any axis, strided views and float32/float64, and the kernel's source a call line
per op."""

from __future__ import annotations

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.nn import functional as F


def _rows(x, y, w, b):
    """Every row op of the library over rows of 37 and 7 elements: along the last axis,
    the middle and the first, of a strided view (a transpose), and layer_norm over one
    and over two dims, with and without weight and bias."""
    xt = x.transpose(0, 2)  # (37, 7, 5): rows along its first axis are strided
    return (
        F.softmax(x, -1), F.log_softmax(x, 1), F.softmax(xt, 0), F.log_softmax(xt, 2),
        F.layer_norm(x, (37,), w, b), F.layer_norm(x, (7, 37)), F.layer_norm(y, (4,)),
        F.layer_norm(xt.transpose(0, 1), (5,)),
        # x not differentiated here: the weight's gradient is its own call
        F.layer_norm(x.detach(), (37,), w),
    )


def _loss(x, y, w, b):
    # Random cotangents: a sum of squares of a normalised row is nearly constant, and its
    # gradient would be all cancellation.
    rng = np.random.default_rng(11)
    total = None
    for t in _rows(x, y, w, b):
        term = (t * dg.tensor(rng.standard_normal(t.shape).astype(np.float32))).sum()
        total = term if total is None else total + term
    return total


def _run(fn, dtype):
    rng = np.random.default_rng(7)
    base = rng.standard_normal((5, 7, 37)) * 2 + 0.5
    x = dg.tensor(base.astype(dtype), requires_grad=True)
    # y is a transposed input: the kernel's argument is itself a strided view.
    y = dg.tensor(np.ascontiguousarray(base[:, :, :4].transpose(2, 0, 1)).astype(dtype)
                  .transpose(1, 2, 0), requires_grad=True)
    w = dg.tensor(rng.standard_normal(37).astype(dtype), requires_grad=True)
    b = dg.tensor(rng.standard_normal(37).astype(dtype), requires_grad=True)
    loss = fn(x, y, w, b)
    loss.backward()
    return [loss.numpy()] + [t.grad.numpy() for t in (x, y, w, b)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_library_rows_equal_eager(dtype, tmp_path, monkeypatch):
    monkeypatch.setenv("DUALGRAPH_CACHE_DIR", str(tmp_path))
    compiled = dg.compile(_loss, tiered=False)
    got = _run(compiled, dtype)
    want = _run(_loss, dtype)
    assert compiled.stats.kernels >= 1
    tol = 2e-5 if dtype == np.float32 else 1e-11
    for g, e in zip(got, want):
        scale = float(np.abs(e).max())
        dg.testing.assert_close(g, e, rtol=tol, atol=tol * scale)
    sources = "".join(p.read_text() for p in tmp_path.rglob("*.py"))
    name = np.dtype(dtype).name
    for kind in ("softmax", "softmax_backward", "layer_norm", "layer_norm_backward",
                 "layer_norm_grads", "layer_norm_weight_grad"):
        assert f"dgw.row_{kind}_{name}(" in sources
        # layer_norm's input gradient alone runs the routine of all three gradients
        unit = "layer_norm_grads" if kind == "layer_norm_backward" else kind
        assert f"('row', '{unit}', '{name}')" in sources
