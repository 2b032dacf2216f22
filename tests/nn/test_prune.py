"""``dg.nn.utils.prune``: torch's reparametrisation (``<name>_orig`` parameter,
``<name>_mask`` buffer, forward pre-hook), masks and results against goldens recorded from
PyTorch (tests/nn/record_prune_goldens.py), removal, compiled use and bad input."""

from __future__ import annotations

import pathlib

import numpy as np
import pytest

import dualgraph as dg
from dualgraph.nn.utils import prune
from tests.nn.prune_cases import build, prune_globally, prune_locally, record

GOLDENS = np.load(pathlib.Path(__file__).with_name("prune_goldens.npz"))


@pytest.mark.parametrize("tag,how", [("local", prune_locally), ("global", prune_globally)])
def test_masks_outputs_and_gradients_match_torch(tag, how):
    m = build(dg)
    how(m, prune)
    got = record(m, dg)
    for k, v in got.items():
        dg.testing.assert_close(v, GOLDENS[f"{tag}_{k}"], rtol=1e-12, atol=1e-12, msg=k)


def test_reparametrisation_and_remove():
    m = build(dg)
    prune_locally(m, prune)
    assert sorted(m[0].state_dict()) == ["bias_mask", "bias_orig", "weight_mask", "weight_orig"]
    assert isinstance(m[0].weight_orig, dg.nn.Parameter) and prune.is_pruned(m)
    assert "weight_orig" in dict(m[0].named_parameters())
    assert "weight_mask" in dict(m[0].named_buffers())
    # A change to weight_orig reaches the next forward through the pre-hook.
    with dg.no_grad():
        m[0].weight_orig.mul_(2.0)
    m(dg.tensor(np.ones((1, 5))))
    dg.testing.assert_close(m[0].weight.numpy(),
                               m[0].weight_orig.numpy() * m[0].weight_mask.numpy(), rtol=1e-7,
                               atol=0, check_dtype=False)
    pruned = m[0].weight.numpy().copy()
    prune.remove(m[0], "weight")
    prune.remove(m[0], "bias")
    assert sorted(m[0].state_dict()) == ["bias", "weight"]
    np.testing.assert_array_equal(m[0].weight.numpy(), pruned)
    assert isinstance(m[0].weight, dg.nn.Parameter)
    prune.remove(m[2], "weight")
    assert not prune.is_pruned(m)


def test_random_identity_and_custom_mask():
    lin = dg.nn.Linear(10, 4)
    prune.random_unstructured(lin, "weight", amount=0.25)
    assert int(lin.weight_mask.sum()) == 30
    assert (lin.weight.numpy()[lin.weight_mask.numpy() == 0] == 0).all()
    prune.identity(lin, "bias")
    assert lin.bias_mask.numpy().tolist() == [1.0] * 4
    mask = np.zeros((4, 10), dtype=np.float32)
    mask[:, :2] = 1
    prune.custom_from_mask(lin, "weight", mask)
    assert int(lin.weight_mask.sum()) <= 8 and lin.weight_mask.numpy()[:, 2:].sum() == 0


def test_pruned_module_in_a_compiled_step_matches_eager():
    m = build(dg)
    prune_locally(m, prune)
    x = dg.tensor(np.linspace(-1, 1, 10).reshape(2, 5))
    step = dg.compile(lambda t: m(t).sum())
    dg.testing.assert_close(float(step(x)), float(m(x).sum()), rtol=1e-12, atol=0,
                            check_dtype=False)
    with dg.no_grad():
        m[0].weight_orig.add_(0.5)
    dg.testing.assert_close(float(step(x)), float(m(x).sum()), rtol=1e-12, atol=0,
                            check_dtype=False)


def test_pruned_module_in_a_compiled_training_step_traces_once():
    runs = []
    for compiled in (False, True):
        lin = dg.nn.Linear(3, 2)
        with dg.no_grad():
            lin.weight.copy_(dg.tensor([[0.5, -0.1, 0.3], [0.05, -0.7, 0.2]]))
            lin.bias.fill_(0.1)
        prune.l1_unstructured(lin, "weight", amount=2)
        opt = dg.optim.SGD(lin.parameters(), lr=0.1)

        def step(t, lin=lin, opt=opt):
            opt.zero_grad()
            loss = lin(t).pow(2).sum()
            loss.backward()
            opt.step()
            return loss

        f = dg.compile(step) if compiled else step
        x = dg.tensor(np.linspace(-1, 1, 6).reshape(2, 3).astype(np.float32))
        runs.append(([float(f(x)) for _ in range(3)], lin.weight.detach().clone()))
    dg.testing.assert_close(runs[1], runs[0], rtol=1e-6, atol=0)
    assert f.stats.traces == 1
    assert (runs[1][1].numpy()[lin.weight_mask.numpy() == 0] == 0).all()


def test_bad_input():
    lin = dg.nn.Linear(3, 2)
    with pytest.raises(ValueError, match="range"):
        prune.l1_unstructured(lin, "weight", amount=1.5)
    with pytest.raises(ValueError, match="smaller than"):
        prune.l1_unstructured(lin, "weight", amount=7)
    with pytest.raises(ValueError, match="does not exist"):
        prune.l1_unstructured(lin, "nothing", amount=1)
    with pytest.raises(ValueError, match="pruned before"):
        prune.remove(lin, "weight")
    with pytest.raises(TypeError, match="unstructured"):
        prune.global_unstructured([(lin, "weight")], prune.LnStructured, amount=1, n=2, dim=0)
