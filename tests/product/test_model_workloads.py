"""The cnn and transformer workloads: they train, eager equals compiled, and
their gradients equal the hand-written NumPy references that the benchmarks time.

The NumPy references (``benchmarks/models_numpy.py``) were checked against PyTorch to 1e-16
in float64 when written; here they pin dualgraph's conv, pooling, embedding, LayerNorm,
attention and GELU gradients end to end, on the quick sizes (one whole-step compile each).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.testing import assert_close
from dualgraph.workloads import TRANSFORMER_SIZES, WORKLOADS, model_step

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import models_numpy  # noqa: E402

MODELS = ("cnn", "transformer")


def _reference(name: str, net: dg.nn.Module, x: dg.Tensor, t: dg.Tensor) -> tuple:
    params = {k: v.numpy().astype(np.float64) for k, v in net.named_parameters()}
    if name == "cnn":
        return models_numpy.cnn_loss_and_grads(params, x.numpy().astype(np.float64),
                                               t.numpy())
    heads = TRANSFORMER_SIZES[f"{name}-quick"]["heads"]
    return models_numpy.transformer_loss_and_grads(params, heads, x.numpy(), t.numpy())


@pytest.mark.parametrize("name", MODELS)
def test_eager_gradients_equal_hand_written_numpy(name):
    loss_fn, (x, t) = WORKLOADS[name].build(True)
    net = _module_of(loss_fn)
    loss = loss_fn(x, t)
    loss.backward()
    ref_loss, ref_grads = _reference(name, net, x, t)
    params = dict(net.named_parameters())
    assert params.keys() == ref_grads.keys()
    assert abs(loss.item() - ref_loss) < 1e-5 * max(1.0, abs(ref_loss))
    for k, p in params.items():
        assert_close(p.grad.numpy().astype(np.float64), ref_grads[k], rtol=2e-4, atol=2e-5,
                     msg=f"{name} gradient of {k}")


def _module_of(fn) -> dg.nn.Module:
    """The module a workload's loss closes over."""
    for cell in fn.__closure__ or ():
        if isinstance(cell.cell_contents, dg.nn.Module):
            return cell.cell_contents
    raise LookupError("no module in the closure")


@pytest.mark.parametrize("name", MODELS)
def test_whole_step_trains_and_compiled_equals_eager(name):
    eager_step, args, eager_net = model_step(name, lr=1e-2, quick=True)
    comp_step, cargs, comp_net = model_step(name, lr=1e-2, quick=True)
    compiled = dg.compile(comp_step)
    losses = []
    for _ in range(4):
        le = eager_step(*args)
        lc = compiled(*cargs)
        assert_close(lc.numpy(), le.numpy(), rtol=1e-4, atol=1e-5)
        losses.append(le.item())
    assert losses[-1] < losses[0], f"{name}: loss did not fall: {losses}"
    assert compiled.stats.traces == 1
    for (k, pe), (_, pc) in zip(eager_net.named_parameters(), comp_net.named_parameters()):
        e, c = pe.numpy(), pc.numpy()
        if k == "qkv.bias":
            # The key bias has an exactly zero gradient (softmax ignores a constant added
            # to every score of a row), so both modes compute rounding noise there, and
            # Adam's m / sqrt(v) turns noise of either sign into lr-sized steps.
            width = e.shape[0] // 3
            e, c = np.delete(e, np.s_[width:2 * width]), np.delete(c, np.s_[width:2 * width])
        assert_close(c, e, rtol=1e-3, atol=1e-4, msg=f"{name} param {k}")


def test_quick_compare_skips_the_model_workloads():
    assert not WORKLOADS["cnn"].quick and not WORKLOADS["transformer"].quick
