"""nn.functional's ops that torch also exports at its top level are dualgraph's too, with
the same signature (torch.bilinear, torch.pdist, torch.rrelu)."""

from __future__ import annotations

import numpy as np

import dualgraph as dg
from dualgraph.nn import functional as F


def test_top_level_names_are_the_functional_ops():
    rng = np.random.default_rng(0)
    a, b = dg.tensor(rng.normal(size=(3, 2))), dg.tensor(rng.normal(size=(3, 4)))
    w, bias = dg.tensor(rng.normal(size=(5, 2, 4))), dg.tensor(rng.normal(size=5))
    dg.testing.assert_close(dg.bilinear(a, b, w, bias), F.bilinear(a, b, w, bias))
    dg.testing.assert_close(dg.pdist(b, 1.0), F.pdist(b, p=1.0))
    x = dg.tensor(np.array([-2.0, -0.5, 0.0, 3.0]))
    # torch.rrelu(x, lower, upper, training=False): the mean slope on the negative side
    dg.testing.assert_close(dg.rrelu(x, 0.1, 0.3), dg.tensor(np.array([-0.4, -0.1, 0.0, 3.0])))
