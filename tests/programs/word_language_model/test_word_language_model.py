"""pytorch/examples' word language model, run unchanged with ``torch`` bound to dualgraph:
ten training steps (main.py's, on synthetic tokens) from PyTorch's initial weights give
PyTorch's losses (recorded by record.py) to 1e-5, eagerly and with the step compiled."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import dualgraph as dg
from tests.programs.word_language_model.config import VARIANTS, setup

GOLDENS = np.load(Path(__file__).resolve().parent / "goldens.npz")

def _prepare(variant: str) -> tuple:
    """The program's modules, its model holding PyTorch's initial weights, and the data."""
    _, step, _ = setup(dg, variant)
    prefix = f"{variant}/param."
    names = [k[len(prefix):] for k in GOLDENS.files if k.startswith(prefix)]
    assert list(step.model.state_dict()) == names
    step.model.load_state_dict({n: dg.tensor(GOLDENS[prefix + n]) for n in names})
    return step, dg.tensor(GOLDENS[f"{variant}/data"])


def _batches(step, source):
    for i in range(0, step.args.steps * step.args.bptt, step.args.bptt):
        yield step.get_batch(source, i)


@pytest.mark.parametrize("variant", [
    *VARIANTS
])
def test_eager_losses_match_torch(variant: str) -> None:
    step, source = _prepare(variant)
    hidden = None if variant == "Transformer" else step.model.init_hidden(step.args.batch_size)
    losses = []
    for data, targets in _batches(step, source):
        loss, hidden = step.train_step(data, targets, hidden)
        losses.append(loss.item())
    dg.testing.assert_close(losses, GOLDENS[f"{variant}/losses"], rtol=1e-5, atol=0, equal_nan=True,
                            check_dtype=False)


@pytest.mark.parametrize("variant", ["LSTM", "Transformer"])
def test_compiled_losses_match_torch(variant: str) -> None:
    """main.py's step under `dg.compile`: PyTorch's losses for the ten steps."""
    step, source = _prepare(variant)
    if variant == "Transformer":
        compiled = dg.compile(lambda data, targets: step.train_step(data, targets)[0])
    else:
        # A tuple holding tensors is not a compiled argument: (h, c) goes in as two.
        compiled = dg.compile(lambda data, targets, h, c: step.train_step(data, targets, (h, c)))
        hidden = step.model.init_hidden(step.args.batch_size)
    losses = []
    for data, targets in _batches(step, source):
        if variant == "Transformer":
            loss = compiled(data, targets)
        else:
            loss, hidden = compiled(data, targets, *hidden)
        losses.append(loss.item())
    dg.testing.assert_close(losses, GOLDENS[f"{variant}/losses"], rtol=1e-5, atol=0, equal_nan=True,
                            check_dtype=False)
    # The Transformer caches its mask on `self` in the first call, which runs eagerly;
    # the second traces the branch that finds the mask, and every later call reuses it.
    assert compiled.stats.traces == 1
    assert compiled.stats.state_filling_calls == (variant == "Transformer")
