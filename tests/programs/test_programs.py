"""Real PyTorch programs run unchanged with ``torch`` bound to dualgraph: minGPT (its model
and trainer), nanoGPT (model.py and train.py's step), pytorch/examples mnist, vae and
dcgan, and makemore's six character-level language models.

Each starts from torch's initial weights and must reproduce torch's per-step losses (to
1e-5, float32) over ten steps, eagerly and with its training step under ``dg.compile``
(one trace). The torch side is recorded in goldens/ by ``record_goldens.py``; the runs
themselves are in ``runners.py`` and the binding in ``harness.py``.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

import dualgraph as dg

from . import runners
from .harness import GOLDENS

GOLD = json.loads((GOLDENS / "losses.json").read_text())["programs"]

# The makemore models' compiled runs are in the slow set (pytest -m slow): five more
# cold compiles (4-23 s each, 55 s together, on one core) of layers that the named
# programs and the written sets already cover.
SLOW_COMPILE = tuple(f"makemore-{t}" for t in runners.MAKEMORE_TYPES)


def _cases() -> list:
    cases = []
    for name in ("mingpt", "nanogpt", "mnist", "vae", "dcgan",
                 *(f"makemore-{t}" for t in runners.MAKEMORE_TYPES)):
        for compiled in (False, True):
            marks = []
            if compiled and name in SLOW_COMPILE:
                marks.append(pytest.mark.slow)
            cases.append(pytest.param(name, compiled, marks=marks,
                                      id=f"{name}-{'compiled' if compiled else 'eager'}"))
    return cases


def _run(name: str, compiled: bool) -> dict:
    weights = np.load(GOLDENS / f"{name}.npz")
    extra = {}
    if name == "vae":
        extra["draws"] = [weights[f"__draw{i}"] for i in range(runners.STEPS)]
    if name == "dcgan":  # its fixed noise, then one draw per step
        extra["draws"] = [weights[f"__draw{i}"] for i in range(runners.STEPS + 1)]
    program, _, variant = name.partition("-")
    if variant:
        extra["model_type"] = variant
    return getattr(runners, program)(dg, weights=weights, compiled=compiled, **extra)


@pytest.mark.parametrize("name, compiled", _cases())
def test_program_losses_equal_torchs(name: str, compiled: bool) -> None:
    out = _run(name, compiled)
    want = GOLD[name]["losses"]
    # DCGAN has three losses a step: errD_real, errD_fake, errG.
    assert len(out["losses"]) == len(want) == runners.STEPS * (3 if name == "dcgan" else 1)
    dg.testing.assert_close(out["losses"], want, rtol=1e-5, atol=0, equal_nan=True,
                            check_dtype=False)
    if compiled:
        stats = out["compiled"].stats
        assert stats.traces == 1 and stats.kernels >= 1
        assert stats.tier1_calls == stats.calls  # every call ran compiled kernels


def test_the_harness_binds_dualgraph_as_torch() -> None:
    """Inside the programs, ``torch`` is dualgraph (not a silently imported torch)."""
    v = runners.import_program(dg, "mingpt.utils")
    assert v.torch is dg and v.np is np
    m = runners.import_program(dg, "nanogpt.model")
    assert m.torch is dg and m.F is dg.nn.functional and m.nn is dg.nn


def test_nanogpt_state_dict_keeps_the_tied_lm_head() -> None:
    """nanoGPT ties ``lm_head.weight`` to ``transformer.wte.weight``: the state dict has
    both keys, as torch's, so torch's checkpoint (recorded in goldens/) loads strictly."""
    m = runners.import_program(dg, "nanogpt.model")
    model = m.GPT(m.GPTConfig(block_size=8, vocab_size=11, n_layer=1, n_head=2, n_embd=16))
    keys = list(model.state_dict())
    assert "lm_head.weight" in keys and "transformer.wte.weight" in keys
    weights = np.load(GOLDENS / "nanogpt.npz")
    assert "lm_head.weight" in weights.files


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_regression_example_runs_as_a_script_with_torchs_losses(compiled: bool) -> None:
    """pytorch/examples regression runs top to bottom (its model, its random batches from
    torch, its ``param.data.add_`` update) until its own stopping criterion. The first 100
    of its losses equal torch's to 1e-5; hundreds of steps later, float32 rounding makes
    the loss cross the 1e-3 threshold at a slightly different batch, so the end is checked
    for convergence, not for torch's batch count. Compiled, its ``nn.Linear`` is
    ``dg.compile``d (the rest of the script is top-level code)."""
    weights = np.load(GOLDENS / "regression.npz")
    draws = [weights[f"__draw{i}"] for i in range(len(weights.files)) if
             f"__draw{i}" in weights.files]
    out = runners.regression(dg, weights=weights, compiled=compiled, draws=draws)
    want = GOLD["regression"]["losses"]
    dg.testing.assert_close(out["losses"][:100], want[:100], rtol=1e-5, atol=0, equal_nan=True,
                            check_dtype=False)
    assert out["losses"][-1] < 1e-3 <= min(out["losses"][:-1])
    assert out["printed"].startswith(f"Loss: {out['losses'][-1]:.6f} after "
                                     f"{len(out['losses'])} batches\n==> Learned function:\ty = ")
    if compiled:
        stats = out["compiled"].stats
        assert stats.traces == 1 and stats.tier1_calls == stats.calls == len(out["losses"])


@pytest.mark.parametrize("compile_flag", [
    pytest.param(False, id="eager"),
    pytest.param(True, id="compile", marks=pytest.mark.slow),
])
def test_nanogpt_train_script_runs_unchanged(tmp_path, compile_flag: bool) -> None:
    """nanoGPT's train.py as a script (its configurator, its memmap data loader, its
    GradScaler and autocast set-up, evaluation, checkpointing with ``torch.save``): ten
    iterations of a tiny model on the CPU, with ``--compile=True`` too. Its batches come
    from ``torch.randint``, so the losses are not torch's; they are checked for sanity, and
    the checkpoint it wrote loads with ``dg.load`` (no unpickling) into a fresh model."""
    printed = runners.nanogpt_train(dg, tmp_path, compile=compile_flag)
    losses = [float(line.split("loss ")[1].split(",")[0]) for line in printed.splitlines()
              if line.startswith("iter ")]
    assert len(losses) == 11 and all(1.5 < x < 3.5 for x in losses)
    assert printed.count("saving checkpoint to out") == 2
    ckpt = dg.load(tmp_path / "out" / "ckpt.pt")
    assert ckpt["iter_num"] == 10 and ckpt["config"]["compile"] is compile_flag
    m = runners.import_program(dg, "nanogpt.model")
    model = m.GPT(m.GPTConfig(**ckpt["model_args"]))
    assert model.load_state_dict(ckpt["model"]) == ([], [])


@pytest.mark.parametrize("model_type", ["transformer", "gru"])
def test_makemore_script_runs_unchanged(tmp_path, model_type: str) -> None:
    """makemore.py as a script: its data split (``torch.randperm``), its infinite loader
    (``RandomSampler(replacement=True, num_samples=int(1e10))``, ``pin_memory``, four
    workers), its ``SummaryWriter``; eleven training steps. Its batches are random, so the
    printed losses are checked for sanity (a 27-way guess costs about 3.3)."""
    printed = runners.makemore_script(dg, tmp_path, model_type)
    losses = [float(line.split("loss ")[1].split(" ")[0]) for line in printed.splitlines()
              if line.startswith("step ")]
    assert len(losses) == 2 and all(2.0 < x < 4.5 for x in losses)
    assert any(p.name.startswith("events.out.tfevents.") for p in (tmp_path / "out").iterdir())
