"""A lone ``addmm`` whose contraction is short starts its product from the bias (beta 1)
instead of adding the bias after it: the kernel has no pass adding the bias, and each
element is the same float32 sum plus the bias, rounded once, as eager mode's."""

from __future__ import annotations

import re

import numpy as np
import pytest

import dualgraph as dg
import dualgraph.nn.functional as F
from dualgraph.backend.numba import blas

_BETA_ONE = re.compile(r"dgb\.gemm_call\([^)]*, 1\.0, ")
_BIAS_ADDED = re.compile(r"= np\.float32\(mm\d+\[[^\]]*\] \+ ")


def _linear(x, w, b):
    return F.linear(x, w, b)


@pytest.mark.skipif(not blas.HAVE_CBLAS, reason="NumPy's BLAS has no cblas symbols")
def test_bias_is_the_products_starting_value(tmp_path, monkeypatch):
    rng = np.random.default_rng(3)
    monkeypatch.setenv("DUALGRAPH_CACHE_DIR", str(tmp_path))
    f = dg.compile(_linear, tiered=False)
    # (rows, outputs, terms): the step's shape and an odd one; 300 terms is past the
    # length that starts from the bias, so that one adds it after the product.
    for m, n, k in ((1024, 384, 128), (97, 53, 41), (64, 16, 300)):
        x = dg.tensor(rng.standard_normal((m, k)).astype(np.float32))
        w = dg.tensor(rng.standard_normal((n, k)).astype(np.float32))
        b = dg.tensor(rng.standard_normal(n).astype(np.float32))
        got = f(x, w, b).numpy()
        want = _linear(x, w, b).numpy()
        dg.testing.assert_close(got, want, rtol=0, atol=0)
    sources = [p.read_text() for p in sorted(tmp_path.rglob("*.py"))]
    starts = [s for s in sources if _BETA_ONE.search(s)]
    adds = [s for s in sources if _BIAS_ADDED.search(s)]
    # The first two shapes share one kernel (its sizes are read from the arrays).
    assert len(starts) == 1 and len(adds) == 1
    assert not any(_BIAS_ADDED.search(s) for s in starts)
