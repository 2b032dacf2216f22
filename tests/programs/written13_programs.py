"""A thirteenth set of programs written for these tests in the manner of public PyTorch
programs (in ``written13/``): see `harness.ProgramSet`.

- yolo_ciou: YOLOv5's ``ComputeLoss`` (anchor matching by width/height ratio and boolean
  indexing inside the loss, complete IoU with ``torch.atan``, objectness targets written by
  four index tensors, ``BCEWithLogitsLoss(pos_weight=)``, ``smooth_BCE``, SGD with an
  ``add_param_group`` of biases).
- wavenet_mulaw: WaveNet (mu-law companding and quantisation, ``F.one_hot`` inputs, causal
  convolutions by ``F.pad(x, (pad, 0))``, gated residual layers with skip sums, greedy
  sample-by-sample generation, the inverse mu-law).
- dino: DINO (a ``weight_norm`` last layer with a frozen ``weight_g``, ``MultiCropWrapper``
  by ``unique_consecutive(return_counts=True)`` and ``torch.cat`` onto ``torch.empty(0)``, a
  ``center`` buffer, per-iteration lr and weight decay from NumPy cosine schedules,
  ``cancel_gradients_last_layer``, the momentum teacher).
- stylegan2_r1: StyleGAN2 (equalised learning rate, ``fused_leaky_relu``, modulated and
  demodulated convolution by ``groups=batch``, lazy R1 regularisation by ``autograd.grad(
  create_graph=True)`` on ``real_img.requires_grad = True``, ``requires_grad(model, flag)``,
  the EMA generator by ``accumulate``).
- deeplab_aspp: torchvision's DeepLabV3 (an ``OrderedDict`` of features, ASPP with dilated
  branches and bilinear ``interpolate``, ``cross_entropy(ignore_index=255)`` on ``out`` and
  ``aux`` heads, a polynomial ``LambdaLR`` stepped in the step, a ``bincount`` confusion
  matrix under ``inference_mode``).
- memn2n: end-to-end memory networks (position encoding, temporal encoding parameters,
  adjacent weight tying by shared ``nn.Embedding``s, ``padding_idx=0``, attention over
  memories across hops, ``clip_grad_norm_``, the learning rate halved through
  ``param_groups``).
- ptr_net: a pointer network sorting numbers (LSTM encoder, ``LSTMCell`` decoder, additive
  pointer attention with ``masked_fill(-inf)``, the mask grown by ``scatter``, teacher forcing
  by ``gather``, ``torch.FloatTensor(n)`` with ``nn.init.uniform_``, greedy decoding).
- score_sde: score-based generative modelling (Gaussian Fourier features frozen by
  ``requires_grad=False``, ``functools.partial`` noise scales through ``torch.tensor(t)`` of a
  tensor, the denoising score-matching loss, an EMA of the weights, Euler-Maruyama sampling).
- muon_nsgpt: the modded-nanogpt speedrun's Muon (``@torch.compile``-decorated Newton-Schulz
  and ``rms_norm`` helpers called from the model and from an ``Optimizer`` subclass,
  momentum buffers in ``self.state``, Muon and Adam together, ``F.scaled_dot_product_attention
  (is_causal=True)``, a logit soft-cap, a schedule through ``group["initial_lr"]``).
- conformer: Conformer blocks (macaron half-step feed-forwards, a GLU and depthwise
  ``Conv1d`` convolution module, ``nn.MultiheadAttention`` with a key padding mask from
  lengths, ``Conv2dSubampling`` with ``lengths >> 2``, SpecAugment time masks by
  ``masked_fill``, ``CTCLoss(zero_infinity=True)``, a Noam ``LambdaLR``).

Compiled, four steps run eagerly with a RuntimeWarning where ``torch.compile`` breaks its
graph too: yolo_ciou's loss selects targets by a boolean mask (a shape from the data),
dino's crop grouping calls ``unique_consecutive`` (its gradient clipping also branches on
``clip_coef < 1``), deeplab_aspp steps its scheduler inside the step and stylegan2_r1's R1
step sets ``requires_grad`` on its argument (its other two steps trace once each).
muon_nsgpt's eager run already compiles: its ``@torch.compile`` helpers are ``dg.compile``.

Random draws come from NumPy (the two libraries' random streams differ): the noise and
latents of StyleGAN2 and of the score model are step inputs.

Record torch's side with ``python -m tests.programs.written_sets written13 [NAME ...]``.
"""

from __future__ import annotations

from .harness import ProgramSet

PROGRAMS = ("yolo_ciou", "wavenet_mulaw", "dino", "stylegan2_r1", "deeplab_aspp", "memn2n",
            "ptr_net", "score_sde", "muon_nsgpt", "conformer")
# The default run compiles yolo_ciou, dino and deeplab_aspp (their steps run eagerly, under
# a second), memn2n and score_sde (from an empty kernel cache, Numba's routine cache as
# found, on a loaded machine: 15 and 11 s of CPU) and muon_nsgpt (31 s, a compiled step
# calling compiled helpers, whose kernels its eager test has compiled already); the others
# are slow, every op they use having its compiled row in the registry-driven
# tests/backend/test_ops_compiled.py: wavenet_mulaw (30 s; dilated conv1d), stylegan2_r1
# (28 s; its R1 step's eager fallback in tests/compile/test_traced_leaf.py), ptr_net (77 s;
# the LSTM step in tests/nn/test_rnn.py) and conformer (41 s).
SLOW = ("wavenet_mulaw", "stylegan2_r1", "ptr_net", "conformer")
SET = ProgramSet(
    "written13", PROGRAMS, slow=SLOW, atol=1e-7,
    traces={"yolo_ciou": [0], "dino": [0], "deeplab_aspp": [0], "stylegan2_r1": [1, 0, 1]},
    warns={"yolo_ciou": "boolean mask", "dino": "unique_consecutive",
           "deeplab_aspp": "learning-rate scheduler", "stylegan2_r1": "requires_grad_"})
