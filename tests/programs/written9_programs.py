"""A ninth set of programs written for these tests in the manner of public PyTorch
programs (in ``written9/``): see `harness.ProgramSet`.

- cyclegan: CycleGAN's training step (ResNet generators with ``ReflectionPad2d`` and a
  ``functools.partial`` InstanceNorm2d, PatchGAN discriminators, ``GANLoss`` label buffers
  ``expand_as`` the prediction, ``itertools.chain`` of two models' parameters, a
  linear-decay ``LambdaLR``, ``set_requires_grad``, an ``ImagePool`` appending
  ``image.data`` to a list and drawing from Python's ``random`` once full).
- efficientnet: EfficientNet-PyTorch's MBConv blocks (a memory-efficient Swish as an
  ``autograd.Function``, ``Conv2dStaticSamePadding`` calling ``F.conv2d`` with the
  module's settings, squeeze-and-excitation, ``drop_connect`` by ``torch.rand`` and
  ``floor``, ``set_swish`` to ``nn.SiLU``, RMSprop, label smoothing).
- neural_ode: torchdiffeq's ODE demo with a hand-written fixed-grid RK4 ``odeint``
  (``torch.empty(len(t), *y0.shape)`` filled per step, an ``nfe`` counter on the module).
- graphsage: SAGE layers aggregating by ``scatter_reduce(include_self=False)`` (mean and
  amax) and a GCN multiplying a ``sparse_coo_tensor(...).coalesce()`` adjacency by
  ``torch.sparse.mm``, ``out[train_idx]``, boolean-mask accuracy.
- performer: a Performer LM (FAVOR+ features from ``torch.linalg.qr`` blocks, a redrawn
  projection buffer, causal linear attention by ``cumsum`` and three-operand
  ``einsum``, the ``elu + 1`` feature map) with ``clip_grad_norm_`` and greedy generation.
- mixup_cutmix: mixup and CutMix on a PreAct ResNet (``np.random.beta``, a permutation
  index, ``lam`` passed to the compiled step as a Python float, a box pasted by slice
  assignment, soft one-hot targets).
- t5_relpos: a T5 encoder-decoder (relative position buckets, the position bias handed
  between layers, ``T5LayerNorm`` by ``rsqrt``, ``finfo(dtype).min`` masks,
  ``_shift_right`` with ``masked_fill_``, a tied ``lm_head``, AdamW groups, a warm-up
  ``LambdaLR``, ``model(**batch)``).
- pixelcnn: PixelCNN's ``MaskedConv2d`` (a mask buffer, ``self.weight.data *= self.mask``
  in ``forward``), 4-D cross-entropy, raster-order greedy sampling.
- gp_regression: exact GP regression in float64 (softplus-constrained hyperparameters,
  RBF and Matern kernels, ``linalg.cholesky``, ``cholesky_solve``,
  ``linalg.solve_triangular``), one compiled step per model.
- set_transformer: the Set Transformer (MAB heads by ``split``/``cat``, ISAB inducing
  points, PMA seeds, LayerNorms found by ``getattr``) and a Deep Set, on sets of varying
  size, with a ``torch.save``/``torch.load`` round trip through a buffer.

Compiled, the neural ODE's step traces once: ``self.nfe += 1`` in the ODE function's
``forward`` is written back after each call, from the count as the call began. T5's step
runs eagerly with a warning (it steps its LambdaLR inside the step); the Set Transformer's
step traces once per set size it meets (three; ``torch.compile`` would make the size
dynamic on the second).

Random draws come from NumPy (the two libraries' random streams differ); no linear bias
feeds a batch norm (its gradient is zero up to rounding).

Record torch's side with ``python -m tests.programs.written_sets written9 [NAME ...]``.
"""

from __future__ import annotations

from .harness import ProgramSet

PROGRAMS = ("cyclegan", "efficientnet", "neural_ode", "graphsage", "performer",
            "mixup_cutmix", "t5_relpos", "pixelcnn", "gp_regression", "set_transformer")
# The default run compiles the three cheapest (a write through ``.data`` in ``forward``,
# the Cholesky solves, the sparse and scatter-reduce aggregations) and the two that run
# eagerly or fail early; the others are slow. Cold, from an empty kernel cache on a
# loaded machine: set_transformer 110 s of CPU (six traces), neural_ode about 60 s (its
# step unrolls 16 evaluations of the ODE function, forward and backward; its counter
# written back is checked cheaply in tests/compile/test_number_writes.py), efficientnet
# 49 s, performer 27 s, mixup_cutmix 21 s, gp_regression 19 s, pixelcnn 6 s. Their
# compiled paths (convolutions with batch norm, a custom Function, einsum, cumsum) are
# compiled in the default run by pixelcnn here and the registry-driven op tests.
SLOW = ("efficientnet", "performer", "mixup_cutmix", "set_transformer", "neural_ode")
SET = ProgramSet(
    "written9", PROGRAMS, slow=SLOW, atol=1e-7,
    # cyclegan's step keeps its generated images in a Python list (the image pool), which a
    # compiled call does not repeat, so it runs eagerly.
    traces={"cyclegan": [0], "t5_relpos": [0], "gp_regression": [1, 1],
            "graphsage": [1, 1], "mixup_cutmix": [1, 1], "set_transformer": [3, 3]},
    warns={"cyclegan": r"stores a value it computes in the list or dict ImagePool\.images",
           "t5_relpos": "stepping a learning-rate scheduler inside a compiled function"})
