"""A fifth set of programs written in the manner of popular public PyTorch programs
(``written5/``), run with ``torch`` bound to dualgraph from torch's initial weights: their
losses (and the figures they print) equal torch's to 1e-5, eagerly and with their steps
under ``dg.compile``.

- imagenet_resnet: pytorch/examples imagenet's loop around a small ResNet (BasicBlock with
  a downsample branch, zero-initialised last BN gamma, AverageMeter, ``accuracy`` with
  ``topk=(1, 5)``, StepLR, ``cudnn.benchmark``).
- makemore_bn, wavenet: nn-zero-to-hero's makemore parts 3 to 5 (a hand-written batch norm
  with running statistics under ``no_grad``, ``p.data += -lr * p.grad``, part 4's manual
  backward compared with ``torch.allclose``; hand-written layers with FlattenConsecutive).
- annotated_transformer: the Annotated Transformer (``clones``, ``subsequent_mask``,
  LabelSmoothing with ``KLDivLoss(reduction="sum")``, the ``rate`` schedule via LambdaLR,
  ``greedy_decode``).
- nerf_mlp: positional encoding by ``sin``/``cos`` of ``2**i * x``, a skip connection,
  volume rendering with ``cumprod`` and a manual learning-rate decay.
- ddpm_toy: a linear beta schedule, ``extract`` by ``gather``, a sinusoidal time
  embedding, an EMA model updated with ``lerp_`` and ``@no_grad`` sampling.
- moe: top-k gating with ``torch.where`` dispatch, ``index_add_`` and ``scatter_add_``.
- clip_loss: ``F.normalize``, an exponentiated logit scale, symmetric cross-entropy
  against ``arange`` labels, parameter groups without weight decay.
- moduledict: ModuleDict, ParameterList, ParameterDict, an OrderedDict Sequential,
  ``add_module``, a frozen head, RMSprop parameter groups.
- lit_model: a Lightning-style module driven by a hand-written Trainer (configure_optimizers
  with CosineAnnealingLR, ``clip_grad_value_``, early stopping).
- siamese: pytorch/examples siamese_network (BCELoss on a sigmoid, Adadelta, StepLR,
  ``torch.where`` thresholding) and a contrastive loss with ``pairwise_distance``.

Random draws come from NumPy (the two libraries' random streams differ). torch's losses
are recorded in ``goldens/written5/`` by ``written5_programs.py``.
"""

from __future__ import annotations

import pytest

import dualgraph as dg

from .harness import run_like_golden
from .written5_programs import PROGRAMS, SET

SLOW_COMPILE: tuple[str, ...] = ()
TRACES: dict[str, list[int]] = {}
WARNS: dict[str, str] = {}
ATOL = 1e-7


def _run(name: str, compiled: bool) -> tuple[dict, list]:
    return run_like_golden(SET, name, dg, compiled, WARNS)


@pytest.mark.parametrize("name", PROGRAMS)
def test_written5_program_equals_torch_eagerly(name: str) -> None:
    out, want = _run(name, compiled=False)
    assert len(out["losses"]) == len(want)
    dg.testing.assert_close([float(v) for v in out["losses"]], want, rtol=1e-5, atol=ATOL,
                            check_dtype=False)


@pytest.mark.parametrize("name", [
    pytest.param(n, marks=[pytest.mark.slow] if n in SLOW_COMPILE else []) for n in PROGRAMS])
def test_written5_program_equals_torch_compiled(name: str) -> None:
    out, want = _run(name, compiled=True)
    dg.testing.assert_close([float(v) for v in out["losses"]], want, rtol=1e-5, atol=ATOL,
                            check_dtype=False)
    fns = out["fn"] if isinstance(out["fn"], list) else [out["fn"]]
    assert [f.stats.traces for f in fns] == TRACES.get(name, [1] * len(fns))
    for f in fns:
        if f.stats.traces:
            assert f.stats.tier1_calls == f.stats.calls > 0  # compiled kernels ran
