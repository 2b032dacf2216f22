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
- einsum_pool: attention pooling with a learned query and capsule routing written with
  ``einsum``, ``masked_fill`` of padded positions with ``-inf``, a margin loss.
- siamese: pytorch/examples siamese_network (BCELoss on a sigmoid, Adadelta, StepLR,
  ``torch.where`` thresholding) and a contrastive loss with ``pairwise_distance``.

Random draws come from NumPy (the two libraries' random streams differ). torch's losses
are recorded in ``goldens/written5/`` by ``written_sets.py``.
"""

from __future__ import annotations

from .harness import ProgramSet

PROGRAMS = ("imagenet_resnet", "makemore_bn", "wavenet", "annotated_transformer",
            "nerf_mlp", "ddpm_toy", "moe", "clip_loss", "moduledict", "lit_model",
            "siamese", "einsum_pool")

SET = ProgramSet(
    "written5", PROGRAMS,
    # makemore's steps (parts 3 and 5) take their learning rate as a Python float of two
    # values, a graph input: one trace each; the Lightning-style step takes
    # ``batch_idx``, an int it never uses: its second value traces again with the int as an
    # input (torch.compile's automatic dynamic). The Annotated Transformer's label
    # smoothing (``torch.nonzero``) and the mixture of experts' dispatch
    # (``torch.where(mask)``) have shapes that depend on the data: their steps run eagerly,
    # with a warning, where torch.compile breaks the graph.
    traces={"lit_model": [2],
            "annotated_transformer": [0], "moe": [0]},
    warns={"annotated_transformer": "depends on the data", "moe": "depends on the data"},
    atol=1e-7)
