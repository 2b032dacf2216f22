"""More pytorch/examples programs run unchanged with ``torch`` bound to dualgraph, from
torch's initial weights, against torch's per-step losses (goldens/, recorded by
``record_goldens.py``): mnist_rnn (an LSTM over image rows, BatchNorm1d, Dropout2d on
(N, C) features, Adadelta and StepLR) and gat (a multi-head graph attention network built
from ``torch.Tensor``-era idioms: ``torch.empty(size=...)``, masked softmax, Adam with
weight decay), eagerly and with the model compiled."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

import dualgraph as dg

from . import runners
from .harness import GOLDENS

GOLD = json.loads((GOLDENS / "losses.json").read_text())["programs"]
GRAPHS = ("gat", "gcn")


@pytest.mark.parametrize("name, compiled", [
    ("mnist_rnn", False), ("gat", False), ("gat", True), ("gcn", False), ("gcn", True),
    # An LSTM over 28 image rows, BatchNorm1d and two linear layers, forward and backward:
    # minutes of cold compile on a loaded two-core machine.
    pytest.param("mnist_rnn", True, marks=pytest.mark.slow)])
def test_example_losses_equal_torchs(name: str, compiled: bool) -> None:
    weights = np.load(GOLDENS / f"{name}.npz")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # mnist_rnn's Dropout2d of (N, C)
        out = getattr(runners, name)(dg, weights=weights, compiled=compiled)
    want = GOLD[name]["losses"]
    # gat's and gcn's train_iter compute three losses a step: training, then evaluation on
    # the training and validation masks.
    assert len(out["losses"]) == len(want) == runners.STEPS * (3 if name in GRAPHS else 1)
    dg.testing.assert_close(out["losses"], want, rtol=1e-5, atol=0,
                            equal_nan=True, check_dtype=False)
    if compiled:
        stats = out["compiled"].stats
        # gat's and gcn's models run in training and, under no_grad, in evaluation: two
        # traces.
        assert stats.traces == (2 if name in GRAPHS else 1)
        assert stats.tier1_calls == stats.calls
