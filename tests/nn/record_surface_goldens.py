"""Record torch's numbers for tests/nn/test_init.py and tests/nn/test_clip_grad.py.

Run from the repository root with a Python that has torch:
``python -m tests.nn.record_surface_goldens`` (writes tests/nn/surface_goldens.json).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

OUT = Path(__file__).with_name("surface_goldens.json")
SHAPE = (200, 300)
GAINS = [("linear", None), ("conv2d", None), ("sigmoid", None), ("tanh", None),
         ("relu", None), ("leaky_relu", None), ("leaky_relu", 0.2), ("selu", None)]
# (name, kwargs): each drawn on a SHAPE tensor; the sample's moments and range are kept.
INITS = [
    ("uniform_", {"a": -0.5, "b": 2.0}), ("normal_", {"mean": 1.0, "std": 0.02}),
    ("trunc_normal_", {"std": 1.0, "a": -1.0, "b": 2.0}),
    ("trunc_normal_", {"mean": 0.0, "std": 0.02}),
    ("xavier_uniform_", {}), ("xavier_uniform_", {"gain": 2.0}), ("xavier_normal_", {}),
    ("kaiming_uniform_", {}), ("kaiming_uniform_", {"a": math.sqrt(5)}),
    ("kaiming_uniform_", {"mode": "fan_out", "nonlinearity": "relu"}),
    ("kaiming_normal_", {}), ("kaiming_normal_", {"mode": "fan_out", "nonlinearity": "relu"}),
    ("orthogonal_", {}), ("orthogonal_", {"gain": 3.0}),
]


def main() -> None:
    import torch

    torch.manual_seed(0)
    out: dict = {"torch": torch.__version__, "gains": [], "inits": [], "clip": []}
    for name, param in GAINS:
        out["gains"].append([name, param, torch.nn.init.calculate_gain(name, param)])
    for name, kwargs in INITS:
        for shape in (SHAPE, (30, 4, 3, 3)):
            t = getattr(torch.nn.init, name)(torch.empty(shape), **kwargs)
            a = t.double().numpy()
            out["inits"].append({"name": name, "kwargs": kwargs, "shape": list(shape),
                                 "mean": a.mean(), "std": a.std(), "min": a.min(),
                                 "max": a.max()})
    rng = np.random.default_rng(0)
    for max_norm, norm_type in [(0.5, 2.0), (100.0, 2.0), (0.3, 1.0), (0.1, math.inf),
                                (1.0, 3.0)]:
        grads = [rng.standard_normal(s).astype(np.float32) for s in [(3, 4), (4,), (2, 2, 2)]]
        ps = [torch.zeros(g.shape, requires_grad=True) for g in grads]
        for p, g in zip(ps, grads):
            p.grad = torch.tensor(g)
        total = torch.nn.utils.clip_grad_norm_(ps, max_norm, norm_type)
        clipped = [p.grad.numpy().tolist() for p in ps]
        out["clip"].append({"max_norm": max_norm, "norm_type": str(norm_type),
                            "grads": [g.tolist() for g in grads], "total": float(total),
                            "clipped": clipped})
    grads = [rng.standard_normal(s).astype(np.float32) for s in [(3, 4), (5,)]]
    ps = [torch.zeros(g.shape, requires_grad=True) for g in grads]
    for p, g in zip(ps, grads):
        p.grad = torch.tensor(g)
    torch.nn.utils.clip_grad_value_(ps, 0.5)
    out["clip_value"] = {"grads": [g.tolist() for g in grads],
                         "clipped": [p.grad.numpy().tolist() for p in ps]}
    OUT.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
