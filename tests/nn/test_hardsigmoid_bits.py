"""hardsigmoid's bits, as PyTorch's kernels give them: ``relu6(x + 3) / 6`` forward, and a
backward that multiplies by 1/6 rounded to float32 in every dtype (the golden tolerance
for float64 is looser than that rounding, so the bits are pinned here, eager and compiled).
The expected values were recorded from PyTorch 2.13."""

from __future__ import annotations

import numpy as np

import dualgraph as dg

X = [-3.0, -2.9, 0.0, 1.0, 2.9999999, 3.0, 1e-17, np.nan, np.inf]
# torch.nn.functional.hardsigmoid on float64, and its gradient for ones.
VALUES = [0.0, 0.01666666666666668, 0.5, 0.6666666666666666, 0.9999999833333334, 1.0, 0.5,
          np.nan, 1.0]
GRADS = [0.0, 0.1666666716337204, 0.1666666716337204, 0.1666666716337204,
         0.1666666716337204, 0.0, 0.1666666716337204, 0.0, 0.0]


def _run(fn):
    x = dg.tensor(X, dtype=dg.float64, requires_grad=True)
    y = fn(x)
    y.backward(dg.ones(len(X), dtype=dg.float64))
    return y.detach().numpy(), x.grad.numpy()


def test_hardsigmoid_float64_bits_eager_and_compiled():
    f = dg.nn.functional.hardsigmoid
    for fn in (f, dg.compile(lambda x: f(x))):
        y, g = _run(fn)
        np.testing.assert_array_equal(y, VALUES)
        np.testing.assert_array_equal(g, GRADS)
