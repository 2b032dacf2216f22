"""A twelfth set of programs written for these tests in the manner of public PyTorch
programs (in ``written12/``): see `harness.ProgramSet`.

- fnet: FNet (``torch.fft.fftn(x, dim=(1, 2)).real`` and the two-step ``fft`` variant,
  ``position_ids``/``token_type_ids`` buffers with ``persistent=False``, ``padding_idx``,
  ``nn.Unflatten``, ``CosineAnnealingWarmRestarts`` stepped by fractional epochs).
- capsnet: CapsNet's dynamic routing (5-D ``matmul`` against ``torch.stack([x] * n)``,
  ``squash``, ``u_hat.detach()`` in the inner iterations, one-hot targets from
  ``torch.sparse.torch.eye``, the margin loss, a decoder masked by ``eye().index_select``).
- bayes_backprop: Bayes by Backprop (``log1p(exp(rho))``, a scale-mixture prior of two
  ``distributions.Normal``, log-probabilities accumulated on the layers, samples written by
  index into ``torch.zeros`` buffers, ``kl_divergence``).
- tft_grn: Temporal Fusion Transformer blocks (``F.glu``/``nn.GLU`` gated residual
  networks, a variable selection network, interpretable attention with a ``triu`` mask, a
  quantile loss, ``ReduceLROnPlateau``).
- rotate_kge: RotatE knowledge-graph embeddings (``chunk``, phases through ``cos``/``sin``,
  self-adversarial negative sampling with ``F.logsigmoid``, an L3 regulariser, a ranking
  evaluation by ``argsort``/``nonzero``).
- alexnet_lrn: AlexNet with ``LocalResponseNorm``, overlapping max pooling, biases set by
  index into the Sequential, SGD under ``CyclicLR`` moving the momentum,
  ``cudnn.benchmark``.
- prune_parametrize: ``torch.nn.utils.prune`` (``l1_unstructured``, iterated
  ``ln_structured``, ``global_unstructured``, fine-tuning through the mask, ``remove``) and
  ``parametrize.register_parametrization`` of a symmetric weight, ``parametrize.cached()``.
- nerf_pdf: NeRF's hierarchical sampling (``searchsorted(right=True)``, ``gather`` of an
  expanded CDF, ``sort`` of coarse and fine depths, ``cumprod`` transmittance, coarse and
  fine models trained together).
- vit_fold_jit: a ViT cutting patches by ``nn.Unfold`` and folding a reconstruction back by
  ``F.fold``, ``@torch.jit.script`` helpers (``bias_gelu``, ``bias_dropout_add``),
  ``einsum`` attention, ``RAdam`` with ``PolynomialLR``.
- deep_ensemble: Deep Ensembles (Gaussian MLPs on ``GaussianNLLLoss``, FGSM adversarial
  inputs by ``autograd.grad`` in the step, one Adamax per member, a ``HuberLoss`` metric,
  the mixture's mean and variance).

Compiled, rotate_kge's step returns its log as ``.item()`` values, as the original's
``train_step`` does: the call computes them (``torch.compile`` breaks its graph there), and
deep_ensemble's step traces once per member: each call passes another member and its
optimizer, objects keyed by identity. ``torch.compile`` (2.13) keys the member by its
structure but guards the optimizer by identity, so it too compiles the graphs that
touch the optimizer (``zero_grad``, ``step``) once per member.

Random draws come from NumPy (the two libraries' random streams differ): Bayes by
Backprop's noise is copied into buffers its layers read, NeRF's stratified and importance
uniforms are step inputs.

Record torch's side with ``python -m tests.programs.written_sets written12 [NAME ...]``.
"""

from __future__ import annotations

from .harness import ProgramSet

PROGRAMS = ("fnet", "capsnet", "bayes_backprop", "tft_grn", "rotate_kge", "alexnet_lrn",
            "prune_parametrize", "nerf_pdf", "vit_fold_jit", "deep_ensemble")
# The default run compiles prune_parametrize and deep_ensemble (from an empty kernel cache,
# Numba's routine cache as found, on a loaded machine: 25 and 20 s of CPU) and rotate_kge;
# the others are slow, their ops' compiled paths being in the
# registry-driven tests/backend/test_ops_compiled.py: fnet (41 s; the DFT products in
# tests/compile/test_complex.py), capsnet (38 s; broadcast 5-D matmul), bayes_backprop
# (63 s in the first cold run, two traces then; 8 s from an empty kernel cache after the
# other programs had filled Numba's routine cache; its number-then-tensor attribute in
# tests/compile/test_state_filling_calls.py), tft_grn (78 s), alexnet_lrn (30 s), nerf_pdf
# (45 s; written5's nerf_mlp compiles the cumprod rendering) and vit_fold_jit (29 s).
SLOW = ("fnet", "capsnet", "bayes_backprop", "tft_grn", "alexnet_lrn", "nerf_pdf",
        "vit_fold_jit")
SET = ProgramSet(
    "written12", PROGRAMS, slow=SLOW, atol=1e-7,
    traces={"deep_ensemble": [3]})
