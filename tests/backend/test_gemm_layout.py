"""Matrix products by operand layout: ``x @ W.T`` with few rows of x is
computed as its transpose, so OpenBLAS packs the weight along its rows (a slow pack of W
across its rows cost the MLP step at batch 16 a quarter of its time); everything that
reads the product then reads an F-ordered view, and must still see the same numbers.
"""

from __future__ import annotations

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.optim import SGD


def _linear_relu(rows: int, inp: int, out: int, bias: bool):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((rows, inp)).astype(np.float32)
    w = rng.standard_normal((out, inp)).astype(np.float32)
    b = rng.standard_normal(out).astype(np.float32)

    def f(x, w, b):
        y = x @ w.T
        if bias:
            y = y + b
        return (dg.relu(y) * 1.5).sum(axis=0)

    return f, (x, w, b)


@pytest.mark.parametrize("rows,out", [(8, 96), (96, 8)])
@pytest.mark.parametrize("bias", [True, False])
def test_x_at_w_t_matches_numpy_and_is_transposed_only_for_few_rows(rows, out, bias):
    f, arrays = _linear_relu(rows, 80, out, bias)
    compiled = dg.compile(f, tiered=False)
    got = compiled(*(dg.tensor(a) for a in arrays)).numpy()
    want = f(*(dg.tensor(a) for a in arrays)).numpy()
    dg.testing.assert_close(got, want, rtol=1e-4, atol=1e-4, equal_nan=True, check_dtype=False)
    src = compiled.entries()[0].kernel.source
    swapped = any(line.strip().endswith("t.T") for line in src.splitlines())
    assert swapped == (rows < out), src


def test_mlp_step_with_transposed_first_layer_matches_eager():
    def make():
        dg.manual_seed(0)
        net = dg.nn.Sequential(dg.nn.Linear(100, 64), dg.nn.ReLU(), dg.nn.Linear(64, 7))
        opt = SGD(net.parameters(), lr=0.1)

        def step(x, t):
            opt.zero_grad()
            loss = dg.nn.CrossEntropyLoss()(net(x), t)
            loss.backward()
            opt.step()
            return loss

        return net, step

    rng = np.random.default_rng(1)
    x = dg.tensor(rng.standard_normal((12, 100)).astype(np.float32))
    t = dg.tensor(rng.integers(0, 7, 12))
    net_c, step_c = make()
    net_e, step_e = make()
    compiled = dg.compile(step_c, tiered=False)
    for _ in range(3):
        lc, le = float(compiled(x, t).numpy()), float(step_e(x, t).numpy())
        assert abs(lc - le) < 1e-5
    src = compiled.entries()[0].kernel.source
    # The first layer's product, and the hidden gradient's (a 7-long sum), whose ReLU mask
    # epilogue reads the first's transposed result: in that array's order, no copy.
    swapped = [line for line in src.splitlines() if line.strip().endswith("t.T")]
    assert len(swapped) == 2, src
    assert "dgk.flat(" not in src.split("# threshold_backward")[0].rsplit("dgb.gemm", 1)[1]
    for pc, pe in zip(net_c.parameters(), net_e.parameters()):
        dg.testing.assert_close(pc.numpy(), pe.numpy(), rtol=1e-5, atol=1e-6, equal_nan=True,
                                check_dtype=False)
        dg.testing.assert_close(pc.grad.numpy(), pe.grad.numpy(), rtol=1e-4, atol=1e-6,
                                equal_nan=True, check_dtype=False)
