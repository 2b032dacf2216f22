"""The pruning scenario shared by the torch recorder and the test: a two-layer MLP from fixed
weights, pruned by every deterministic method, iteratively and globally."""

from __future__ import annotations

import numpy as np

_rng = np.random.default_rng(0)
W0 = _rng.standard_normal((6, 5))
B0 = _rng.standard_normal(6)
W2 = _rng.standard_normal((3, 6))
B2 = _rng.standard_normal(3)
X = _rng.standard_normal((2, 5))


def build(lib):
    m = lib.nn.Sequential(lib.nn.Linear(5, 6), lib.nn.Tanh(), lib.nn.Linear(6, 3)).double()
    with lib.no_grad():
        for p, v in zip(m.parameters(), (W0, B0, W2, B2)):
            p.copy_(lib.tensor(v))
    return m


def prune_locally(m, prune) -> None:
    prune.l1_unstructured(m[0], "weight", amount=0.3)
    prune.l1_unstructured(m[0], "weight", amount=3)
    prune.ln_structured(m[2], "weight", amount=0.34, n=2, dim=0)
    prune.ln_structured(m[2], "weight", amount=1, n=1, dim=1)
    prune.l1_unstructured(m[0], "bias", amount=2)


def prune_globally(m, prune) -> None:
    prune.global_unstructured([(m[0], "weight"), (m[2], "weight")],
                              pruning_method=prune.L1Unstructured, amount=0.4)


def record(m, lib) -> dict:
    """Masks, forward output and the gradient reaching ``weight_orig`` of the first layer."""
    y = m(lib.tensor(X))
    y.sum().backward()
    return {"mask0": m[0].weight_mask.numpy().copy(), "mask2": m[2].weight_mask.numpy().copy(),
            "y": y.detach().numpy(), "g0": m[0].weight_orig.grad.numpy().copy()}
