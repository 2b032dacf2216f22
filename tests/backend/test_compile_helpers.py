"""A kernel compiles no NumPy helper function beside itself: reshapes, filled work arrays
and batched products are lowered into the kernel or called by symbol,
because a helper Numba compiles is typed once per process and argument types, then linked
into and optimised again with every kernel calling it (``tools/compile_profile.py`` shows
it). These tests count compiles, never time."""

from __future__ import annotations

import numpy as np

import dualgraph as dg
from dualgraph.backend.numba import blas, cache, row_kernels

from .._support.compiled import B3


def _attention_step():
    """An embedding, a layer norm, one attention head pair over a fused q/k/v product and
    an SGD update: reshapes of arguments and of strided slices, batched products over
    transposed views, and the zero-filled gradients of slices and of the embedding."""
    nn = dg.nn
    dg.manual_seed(0)
    emb, ln, qkv = nn.Embedding(11, 16), nn.LayerNorm(16), nn.Linear(16, 48)
    params = [*emb.parameters(), *ln.parameters(), *qkv.parameters()]
    opt = dg.optim.SGD(params, lr=0.1)

    def step(idx):
        opt.zero_grad()
        h = qkv(ln(emb(idx)))
        q, k, v = (h[:, :, 16 * j:16 * (j + 1)].reshape(2, 5, 2, 8).transpose(1, 2)
                   for j in range(3))
        att = (q @ k.transpose(-2, -1) * 0.35).softmax(-1)
        y = (att @ v).transpose(1, 2).reshape(2, 5, 16)
        loss = (y * y).mean()
        loss.backward()
        opt.step()
        return loss

    return step, params


def _helpers_compiled(fn) -> list[str]:
    """The functions Numba compiles while ``fn`` runs, other than generated kernels."""
    from numba.core import event

    seen: list[str] = []

    class Listener(event.Listener):
        def on_start(self, ev) -> None:
            py = ev.data["dispatcher"].py_func
            if not py.__module__.startswith("dualgraph_kernels"):
                seen.append(f"{py.__module__}.{py.__qualname__}")

        def on_end(self, ev) -> None:
            pass

    listener = Listener()
    event.register("numba:compile", listener)
    try:
        fn()
    finally:
        event.unregister("numba:compile", listener)
    return seen


def test_a_cold_training_step_compiles_no_numpy_helper(tmp_path):
    idx = dg.tensor(np.random.default_rng(0).integers(0, 11, (2, 5)))
    step, params = _attention_step()
    want = [step(idx).item() for _ in range(2)]
    want_params = [p.detach().numpy().copy() for p in params]
    step, params = _attention_step()
    # The batched product's and the row kernels' C functions compile once per install
    # (then Numba's disk cache serves them), not with each kernel: on a fresh install they
    # are built here, outside the kernel compiles this test counts.
    blas.need_batched("float32")
    row_kernels.need("float32")
    with cache.isolated(str(tmp_path)):
        f = dg.compile(step, tiered=False)
        got: list = []
        helpers = _helpers_compiled(lambda: got.extend(f(idx).item() for _ in range(2)))
    # NumPy's functions and builtins as Numba implements them, and dualgraph's batched
    # product, each a function of its own: none is compiled.
    banned = ("ascontiguousarray", "np_full", "np_empty", "ol_max", "blas.")
    assert not [h for h in helpers if any(b in h for b in banned)
                and "operand_by_layout" not in h], helpers
    dg.testing.assert_close(np.array(got), np.array(want), **B3[np.dtype(np.float32)])
    for p, w in zip(params, want_params):
        dg.testing.assert_close(p.detach().numpy(), w, **B3[w.dtype])
