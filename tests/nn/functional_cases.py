"""Cases of `tests/nn/test_functional_surface.py`: functional forms and layers written the
same way for torch and dualgraph (``lib`` is either module). `record_functional_goldens.py`
records torch's values and gradients; the tests compare dualgraph's with them.

A case is ``(name, fn(lib, *args), specs)``; a spec makes one argument from a seeded NumPy
generator: ``("f", shape)`` normal floats, ``("p", shape)`` positive floats, ``("pc", shape)``
the same without grad, ``("u", shape)`` floats in (0.05, 0.95), ``("g", shape)`` sampling-grid
coordinates, ``("s", shape)`` signs ±1, ``("i", shape, high)`` int64 in
[0, high), ``("c", value)`` a constant passed as is. Float arguments require grad (float64).
"""

from __future__ import annotations

import numpy as np


def _F(lib):  # noqa: N802
    return lib.nn.functional



CASES = [
    # losses
    ("margin_ranking", lambda lib, a, b, t: _F(lib).margin_ranking_loss(a, b, t, margin=0.3),
     [("f", (6,)), ("f", (6,)), ("s", (6,))]),
    ("margin_ranking-none", lambda lib, a, b, t: _F(lib).margin_ranking_loss(
        a, b, t, reduction="none"), [("f", (6,)), ("f", (6,)), ("s", (6,))]),
    ("hinge_embedding", lambda lib, x, t: _F(lib).hinge_embedding_loss(x, t, margin=0.8),
     [("f", (4, 5)), ("s", (4, 5))]),
    ("multilabel_soft_margin", lambda lib, x, t, w: _F(lib).multilabel_soft_margin_loss(
        x, t, weight=w), [("f", (3, 4)), ("i01", (3, 4)), ("p", (4,))]),
    ("multilabel_soft_margin-sum", lambda lib, x, t: _F(lib).multilabel_soft_margin_loss(
        x, t, reduction="sum"), [("f", (3, 4)), ("i01", (3, 4))]),
    ("cosine_embedding", lambda lib, a, b, t: _F(lib).cosine_embedding_loss(a, b, t, margin=0.1),
     [("f", (5, 3)), ("f", (5, 3)), ("s", (5,))]),
    ("cosine_embedding-1d", lambda lib, a, b, t: _F(lib).cosine_embedding_loss(
        a, b, t, reduction="none"), [("f", (3,)), ("f", (3,)), ("c", None)]),
    ("poisson_nll", lambda lib, x, t: _F(lib).poisson_nll_loss(x, t),
     [("f", (3, 4)), ("p", (3, 4))]),
    ("poisson_nll-full-rate", lambda lib, x, t: _F(lib).poisson_nll_loss(
        x, t * 3, log_input=False, full=True, reduction="sum"), [("p", (3, 4)), ("p", (3, 4))]),
    ("gaussian_nll", lambda lib, x, t, v: _F(lib).gaussian_nll_loss(x, t, v),
     [("f", (4, 3)), ("f", (4, 3)), ("p", (4, 3))]),
    ("gaussian_nll-homo-full", lambda lib, x, t, v: _F(lib).gaussian_nll_loss(
        x, t, v, full=True, reduction="none"), [("f", (4, 3)), ("f", (4, 3)), ("p", (4,))]),
    ("gaussian_nll-clamped", lambda lib, x, t, v: _F(lib).gaussian_nll_loss(
        x, t, v * 1e-7, eps=1e-6), [("f", (4, 3)), ("f", (4, 3)), ("p", (4, 1))]),
    ("triplet_margin", lambda lib, a, p, n: _F(lib).triplet_margin_loss(a, p, n, margin=1.5),
     [("f", (5, 4)), ("f", (5, 4)), ("f", (5, 4))]),
    ("triplet_margin-p1-swap", lambda lib, a, p, n: _F(lib).triplet_margin_loss(
        a, p, n, p=1, swap=True, reduction="none"), [("f", (5, 4)), ("f", (5, 4)), ("f", (5, 4))]),
    ("triplet_margin_with_distance", lambda lib, a, p, n:
     _F(lib).triplet_margin_with_distance_loss(
         a, p, n, distance_function=lambda x, y: 1.0 - _F(lib).cosine_similarity(x, y),
         margin=0.5, swap=True), [("f", (5, 4)), ("f", (5, 4)), ("f", (5, 4))]),
    ("multi_margin", lambda lib, x, t: _F(lib).multi_margin_loss(x, t),
     [("f", (5, 4)), ("i", (5,), 4)]),
    ("multi_margin-p2-weight", lambda lib, x, t, w: _F(lib).multi_margin_loss(
        x, t, p=2, margin=0.7, weight=w, reduction="none"),
     [("f", (5, 4)), ("i", (5,), 4), ("pc", (4,))]),
    ("multilabel_margin", lambda lib, x: _F(lib).multilabel_margin_loss(
        x, lib.tensor([[3, 0, -1, 1], [1, 2, 3, 0], [-1, 1, 2, 3]])),
     [("f", (3, 4))]),
    ("ctc", lambda lib, lp, t: _F(lib).ctc_loss(_F(lib).log_softmax(lp, 2), t + 1, [7, 6, 7],
                                                [4, 2, 3]),
     [("f", (7, 3, 5)), ("i", (3, 4), 4)]),
    ("ctc-sum-repeats", lambda lib, lp: _F(lib).ctc_loss(
        _F(lib).log_softmax(lp, 2), lib.tensor([[1, 1, 2], [2, 0, 0]]), lib.tensor([6, 5]),
        lib.tensor([3, 1]), reduction="sum"), [("f", (6, 2, 3))]),
    ("ctc-none-zero_inf", lambda lib, lp: _F(lib).ctc_loss(
        _F(lib).log_softmax(lp, 2), lib.tensor([[1, 1, 1], [2, 1, 2]]), [3, 4], [3, 2],
        reduction="none", zero_infinity=True), [("f", (4, 2, 3))]),
    # layers and activations
    ("bilinear", lambda lib, a, b, w, bias: _F(lib).bilinear(a, b, w, bias),
     [("f", (2, 3, 4)), ("f", (2, 3, 5)), ("f", (6, 4, 5)), ("f", (6,))]),
    ("rms_norm", lambda lib, x, w: _F(lib).rms_norm(x, (4,), w), [("f", (3, 4)), ("f", (4,))]),
    ("rms_norm-2d-eps", lambda lib, x: _F(lib).rms_norm(x, (3, 4), eps=1e-3),
     [("f", (2, 3, 4))]),
    ("local_response_norm", lambda lib, x: _F(lib).local_response_norm(x, 3, alpha=0.1),
     [("f", (2, 5, 4))]),
    ("local_response_norm-4d", lambda lib, x: _F(lib).local_response_norm(x, 2, 0.2, 0.5, 2.0),
     [("f", (2, 4, 3, 3))]),
    ("channel_shuffle", lambda lib, x: _F(lib).channel_shuffle(x, 3), [("f", (2, 6, 2, 2))]),
    ("softmax2d", lambda lib, x: lib.nn.Softmax2d()(x), [("f", (2, 3, 2, 2))]),
    ("pdist", lambda lib, x: _F(lib).pdist(x), [("f", (5, 3))]),
    ("pdist-p1", lambda lib, x: _F(lib).pdist(x, p=1.0), [("f", (4, 3))]),
    ("pdist-p3", lambda lib, x: _F(lib).pdist(x, p=3.0), [("f", (4, 3))]),
    ("lp_pool1d", lambda lib, x: _F(lib).lp_pool1d(x, 2.0, 3, stride=2), [("p", (2, 3, 8))]),
    ("lp_pool2d", lambda lib, x: _F(lib).lp_pool2d(x, 3, 2), [("p", (1, 2, 5, 5))]),
    ("adaptive_avg_pool3d", lambda lib, x: _F(lib).adaptive_avg_pool3d(x, (2, 3, 2)),
     [("f", (1, 2, 5, 4, 3))]),
    ("adaptive_max_pool3d", lambda lib, x: _F(lib).adaptive_max_pool3d(x, 2),
     [("f", (2, 2, 5, 3, 4))]),
    ("upsample_nearest", lambda lib, x: lib.nn.UpsamplingNearest2d(scale_factor=2)(x),
     [("f", (1, 2, 3, 3))]),
    ("upsample_bilinear", lambda lib, x: lib.nn.UpsamplingBilinear2d(size=(5, 4))(x),
     [("f", (1, 2, 3, 3))]),
    ("affine_grid", lambda lib, th: _F(lib).affine_grid(th, [2, 1, 3, 4], align_corners=False),
     [("f", (2, 2, 3))]),
    ("affine_grid-corners", lambda lib, th: _F(lib).affine_grid(th, [1, 1, 4, 3],
                                                                align_corners=True),
     [("f", (1, 2, 3))]),
    ("grid_sample", lambda lib, x, g: _F(lib).grid_sample(x, g * 0.9, align_corners=False),
     [("f", (2, 2, 4, 5)), ("g", (2, 3, 3, 2))]),
    ("grid_sample-border-corners", lambda lib, x, g: _F(lib).grid_sample(
        x, g * 1.3, padding_mode="border", align_corners=True),
     [("f", (1, 2, 4, 5)), ("g", (1, 3, 4, 2))]),
    ("grid_sample-zeros-outside", lambda lib, x, g: _F(lib).grid_sample(x, g * 1.4),
     [("f", (1, 1, 3, 4)), ("g", (1, 4, 4, 2))]),
    ("mha_forward", lambda lib, q, k, v, w, b, ow, ob: _F(lib).multi_head_attention_forward(
        q, k, v, 6, 2, w, b, None, None, False, 0.0, ow, ob,
        key_padding_mask=lib.tensor([[False, False, True, False], [False] * 4]),
        attn_mask=lib.tensor(np.triu(np.ones((3, 4)), 2) > 0))[0],
     [("f", (3, 2, 6)), ("f", (4, 2, 6)), ("f", (4, 2, 6)), ("f", (18, 6)), ("f", (18,)),
      ("f", (6, 6)), ("f", (6,))]),
    ("mha_forward-weights-separate", lambda lib, q, wq, wk, wv, ow: _F(lib)
     .multi_head_attention_forward(q, q, q, 4, 2, None, None, None, None, False, 0.0, ow, None,
                                   use_separate_proj_weight=True, q_proj_weight=wq,
                                   k_proj_weight=wk, v_proj_weight=wv,
                                   average_attn_weights=False)[1],
     [("f", (3, 4)), ("f", (4, 4)), ("f", (4, 4)), ("f", (4, 4)), ("f", (4, 4))]),
    ("grid_sample-nearest", lambda lib, x, g: _F(lib).grid_sample(x, g, mode="nearest"),
     [("f", (1, 2, 4, 5)), ("g", (1, 3, 3, 2))]),
    ("soft_margin", lambda lib, x, t: lib.nn.SoftMarginLoss()(x, t),
     [("f", (3, 4)), ("s", (3, 4))]),
    ("soft_margin-none", lambda lib, x, t: _F(lib).soft_margin_loss(x, t, reduction="none"),
     [("f", (3, 4)), ("s", (3, 4))]),
    ("mha_forward-bias-kv-zero-attn", lambda lib, q, k, w, b, bk, bv, ow: lib.cat([
        r.flatten() for r in _F(lib).multi_head_attention_forward(
            q, k, k, 4, 2, w, b, bk, bv, True, 0.0, ow, None,
            key_padding_mask=lib.tensor([[False, True, False], [False] * 3]),
            attn_mask=lib.tensor(np.triu(np.ones((2, 3)), 1) > 0),
            average_attn_weights=False)]),
     [("f", (2, 2, 4)), ("f", (3, 2, 4)), ("f", (12, 4)), ("f", (12,)), ("f", (4,)),
      ("f", (4,)), ("f", (4, 4))]),
    ("mha_forward-static-kv", lambda lib, q, w, sk, sv, ow, m: _F(lib)
     .multi_head_attention_forward(q, q, q, 4, 2, w, None, None, None, False, 0.0, ow, None,
                                   static_k=sk, static_v=sv, attn_mask=m)[0],
     [("f", (3, 4)), ("f", (12, 4)), ("f", (2, 3, 2)), ("f", (2, 3, 2)), ("f", (4, 4)),
      ("f", (3, 3))]),
]


def _arg(lib, spec: tuple, rng: np.random.Generator):
    kind = spec[0]
    if kind == "c":
        return spec[1]
    shape = spec[1]
    if kind == "f":
        a = rng.standard_normal(shape)
    elif kind == "p":
        a = rng.uniform(0.3, 2.0, shape)
    elif kind == "u":
        a = rng.uniform(0.05, 0.95, shape)
    elif kind == "g":  # grid coordinates away from the cell edges (the kinks)
        a = (rng.integers(-6, 6, shape) + rng.uniform(0.2, 0.8, shape)) / 6.0
    elif kind == "pc":  # positive, no gradient
        return lib.tensor(rng.uniform(0.3, 2.0, shape))
    elif kind == "s":
        return lib.tensor(rng.choice([-1.0, 1.0], shape))
    elif kind == "i01":
        return lib.tensor(rng.integers(0, 2, shape).astype(np.float64))
    elif kind == "i":
        return lib.tensor(rng.integers(0, spec[2], shape))
    else:
        raise ValueError(kind)
    return lib.tensor(a, requires_grad=True)


def arguments(lib, i: int) -> list:
    rng = np.random.default_rng(1000 + i)
    args = [_arg(lib, s, rng) for s in CASES[i][2]]
    if CASES[i][0] == "cosine_embedding-1d":
        args[2] = lib.tensor(-1.0)
    return args


def run(lib, i: int) -> dict:
    """Case ``i``'s output and the gradients of its float arguments under a fixed
    cotangent."""
    return outputs_and_grads(lib, CASES[i][1], arguments(lib, i), 2000 + i)


def outputs_and_grads(lib, fn, args: list, seed: int) -> dict:
    """``fn(lib, *args)`` as ``{"y": ...}`` and the gradients of its arguments that require
    grad (``grad{k}``), under a cotangent drawn from ``seed``: one case table's run."""
    y = fn(lib, *args)
    cot = np.random.default_rng(seed).standard_normal(tuple(y.shape))
    (y * lib.tensor(cot)).sum().backward()
    out = {"y": y.detach().numpy()}
    for k, a in enumerate(args):
        if getattr(a, "requires_grad", False):
            # No path from the output (nearest sampling's grid) is a zero gradient.
            out[f"grad{k}"] = (np.zeros(tuple(a.shape)) if a.grad is None
                               else a.grad.numpy())
    return out
