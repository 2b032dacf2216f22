"""A tenth set of programs written for these tests in the manner of public PyTorch
programs (in ``written10/``): see `harness.ProgramSet`.

- gumbel_vae: a categorical VAE by the Gumbel-softmax trick (hand-written
  ``sample_gumbel``, the straight-through ``hard`` path by ``scatter_`` and ``detach``,
  a KL to the uniform prior, the temperature annealed by NumPy and passed as a float).
- siren: SIREN image and Poisson fits (``SineLayer`` with ``uniform_`` init under
  ``no_grad``, ``meshgrid(indexing='ij')``, gradients and Laplacians by
  ``autograd.grad(create_graph=True)`` inside the step).
- gradcam: a CNN trained with a forward hook keeping features, then Grad-CAM by forward
  hooks, ``register_full_backward_hook``, ``Tensor.register_hook`` in a hook, bilinear
  ``interpolate`` and ``handle.remove()``.
- mae: a masked autoencoder (NumPy sin-cos position embeddings copied into frozen
  parameters, ``argsort``/``gather`` masking, ``einsum`` patchify, ``norm_pix_loss``, AdamW
  groups, a cosine learning rate written into ``param_groups`` every step).
- glow: Glow (``ActNorm`` initialised from data behind a ``uint8`` buffer and ``.item()``,
  ``InvConv2d`` with ``slogdet`` in double and ``inverse`` for the reverse, affine
  couplings, squeeze by ``permute``, reverse sampling and reconstruction).
- shufflenet: torchvision's ShuffleNetV2 (``channel_shuffle``, ``chunk``, stages set by
  ``setattr``, ``mean([2, 3])``) on ``Subset``/``ConcatDataset`` data, Nesterov SGD groups,
  a per-iteration ``LambdaLR``, top-k accuracy under ``inference_mode``.
- protonet: prototypical networks (a batch sampler handed to ``DataLoader(batch_sampler=)``,
  the loss by ``torch.unique``, ``nonzero`` and ``.item()`` as the public code writes it).
- nca: growing neural cellular automata (Sobel filters by a grouped ``conv2d``, alive masks
  by ``max_pool2d``, a boolean ``&``, four updates inside the step, a NumPy sample pool,
  per-parameter gradient normalisation, ``MultiStepLR``).
- poincare: Poincaré embeddings (a custom ``autograd.Function`` with a hand-written
  backward, an ``Optimizer`` subclass with callables in its group, ``step(lr=)``,
  ``narrow``, ``renorm_``).
- nbeats: N-BEATS (blocks in plain lists registered through a ``ParameterList`` assigned to
  ``self.parameters``, weights shared within a stack, trend and seasonality bases from NumPy,
  a ``torch.save``/``torch.load`` checkpoint resumed into a fresh model and optimiser).

Compiled, Grad-CAM's training step keeps one trace while a forward hook stores features in
a dict (written back after each call). The prototypical loss runs its step eagerly with a
warning (``torch.unique`` and ``nonzero`` have data-dependent shapes; ``torch.compile``
breaks its graph there), as does the neural CA's (it steps its ``MultiStepLR`` inside the
step). The Gumbel VAE's temperature and the Poincaré burn-in learning rate are Python
floats that change between calls: graph inputs, so each step traces once.

ShuffleNet trains at lr 0.05: at 0.1 its six steps amplify a one-ulp difference about a
thousandfold (torch's own losses move by 3.7e-4 when its initial weights move by one ulp,
and by 9e-6 between one and two threads), past the 1e-5 tolerance. The difference is
rounding order (convolutions, batch norm, linear layers and the cross-entropy gradient
each differ from torch's oneDNN and MKL kernels by about one ulp): run in float64, with
the same amplification, dualgraph's losses equal torch's to 6e-13.

Random draws come from NumPy (the two libraries' random streams differ).

Record torch's side with ``python -m tests.programs.written_sets written10 [NAME ...]``.
"""

from __future__ import annotations

from .harness import ProgramSet

PROGRAMS = ("gumbel_vae", "siren", "gradcam", "mae", "glow", "shufflenet", "protonet", "nca",
            "poincare", "nbeats")
# The default run compiles Grad-CAM's and SIREN's steps (convolutions, pooling, a hook's
# write-back, double backward), the Poincaré step (a custom Function, an Optimizer
# subclass stepped with a float learning rate that changes, a graph input) and the two
# that run eagerly. Cold, from an empty kernel cache, whole-process CPU with the compile
# helpers on a loaded machine: glow 66 s, shufflenet 65 s, mae 49 s, nbeats 47 s,
# gumbel_vae 33 s, siren 23 s, poincare 16 s, gradcam 12 s, protonet and nca 2 s. The
# slow ones' compiled paths (slogdet, inverse, grouped and 1x1 convolutions with batch
# norm, chunk, argsort, gather, einsum, multi-head attention, mm, softmax with scatter_)
# are compiled in the default run by the registry-driven op tests and the programs above;
# the Gumbel VAE's annealed float temperature is the Poincaré step's float learning rate.
SLOW = ("glow", "shufflenet", "mae", "nbeats", "gumbel_vae")
SET = ProgramSet(
    "written10", PROGRAMS, slow=SLOW, atol=1e-7,
    traces={"protonet": [0], "nca": [0], "siren": [1, 1], "nbeats": [1, 1]},
    warns={"protonet": "unique has a result whose shape or value depends on the data",
           "nca": "stepping a learning-rate scheduler inside a compiled function"})
