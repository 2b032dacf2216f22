"""TransformedDistribution cases shared by the torch recorder and the test: a Normal base
pushed through each transform, log_prob at fixed points."""

from __future__ import annotations

from typing import Any

import numpy as np

LOC = np.array([0.1, -0.3, 0.5, 0.0])
SCALE = np.array([1.0, 2.0, 0.5, 1.5])
VALUE = np.array([0.2, 0.5, 0.9, 0.3])


def transforms(D: Any, loc: Any, scale: Any) -> dict:
    T = D.transforms
    return {
        "exp": ([T.ExpTransform()], VALUE),
        "affine_sigmoid": ([T.AffineTransform(0.5, -2.0), T.SigmoidTransform()], VALUE),
        "tanh": ([T.TanhTransform()], VALUE * 0.9),
        "compose": ([T.ComposeTransform([T.AffineTransform(1.0, 3.0), T.ExpTransform()])],
                    VALUE + 5.0),
        "affine_tensor": ([T.AffineTransform(loc, scale)], VALUE),
        "affine_event": ([T.AffineTransform(loc, scale, event_dim=1)], VALUE),
        "inverse_exp": ([T.ExpTransform().inv], VALUE),
    }


def run(lib: Any, D: Any, loc: Any = None, scale: Any = None) -> dict:
    """``name -> log_prob`` for every case (float64)."""
    loc = lib.tensor(LOC, dtype=lib.float64) if loc is None else loc
    scale = lib.tensor(SCALE, dtype=lib.float64) if scale is None else scale
    out = {}
    for name, (ts, value) in transforms(D, loc, scale).items():
        d = D.TransformedDistribution(D.Normal(loc, scale), ts)
        out[name] = d.log_prob(lib.tensor(value, dtype=lib.float64))
    return out
