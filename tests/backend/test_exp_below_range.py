"""float32 ``exp`` below its range (masked attention scores at -inf): exactly +0, as the
clamped bound gives, and a causal softmax's hidden entries exact zeros."""

from __future__ import annotations

import numpy as np

import dualgraph as dg

_LO = np.float32(-103.97208)  # exp(x) rounds to 0 below this


def test_exp_below_the_range_is_positive_zero_and_above_it_unchanged():
    below = np.array([-np.inf, -1e30, -1e4, -200.0, -104.5, -104.0, -103.98], np.float32)
    near = np.linspace(-103.9, -80.0, 257, dtype=np.float32)  # denormal and normal results
    x = np.concatenate([below, near, [np.nan]]).astype(np.float32)
    def fn(t):
        return dg.exp(t), dg.softmax(dg.where(t > -200.0, t, -np.inf), 0)

    f = dg.compile(fn)
    with dg.no_grad():
        e, s = (o.numpy() for o in f(dg.tensor(x)))
        want = fn(dg.tensor(x))[1].numpy()
    assert f.stats.kernels >= 1
    n = below.size
    assert (e[:n].view(np.int32) == 0).all()  # +0.0, not -0.0 nor a denormal
    ref = np.exp(near.astype(np.float64)).astype(np.float32)
    tiny = float(np.finfo(np.float32).smallest_subnormal)
    dg.testing.assert_close(e[n:-1], ref, rtol=2e-7, atol=tiny)
    assert np.isnan(e[-1])
    # The hidden entries (below -200, and the nan that fails the test) are exact zeros.
    hidden = ~(x > -200.0)
    assert (s[hidden].view(np.int32) == 0).all()
    dg.testing.assert_close(s, want)
