"""A third set of programs written in the manner of popular public PyTorch programs
(``written3/``), run with ``torch`` bound to dualgraph from torch's initial weights: their
losses (and the figures they print) equal torch's to 1e-5, eagerly and with their steps
under ``dg.compile``.

- dqn: the DQN tutorial: a replay memory of namedtuple transitions, epsilon-greedy actions
  from Python's ``random``, ``gather`` and ``max(1).values``, a boolean-mask write of the
  target network's values (``next_state_values[non_final_mask] = ...``), SmoothL1Loss,
  ``clip_grad_value_``, AdamW(amsgrad), a soft target update through a state-dict loop.
- transformer_lm: the nn.TransformerEncoder language-model tutorial (PositionalEncoding
  buffer, ``generate_square_subsequent_mask``, batchify/get_batch, ``clip_grad_norm_``,
  StepLR, ``deepcopy`` of the best model).
- char_rnn: the names classifier with a hand-written RNN cell over one-hot letters
  (``LogSoftmax``, NLLLoss, SGD by ``p.data.add_``, ``topk``, a confusion matrix).
- fgsm: the adversarial-example tutorial (``data.requires_grad = True`` inside the attack,
  ``data.grad.data.sign()``, ``clamp``).
- wgan_gp: a gradient penalty through ``autograd.grad(create_graph=True,
  only_inputs=True)``, several critic steps per generator step.
- simclr: NT-Xent with ``masked_fill(eye, -inf)`` and InfoNCE with a mask indexing the
  similarity matrix (``cos_sim[pos_mask]``, the mask built from ``eye().roll()``), then a
  linear probe on frozen features.
- distill: knowledge distillation (``label_smoothing``, ``KLDivLoss(log_target=True)``,
  temperature-softened targets, the teacher in ``eval()`` under ``no_grad``).
- vqvae: a vector quantiser (argmin of distances, one-hot ``scatter_``, the
  straight-through estimator, codebook and commitment losses with ``detach``).
- unet: a small U-Net (ConvTranspose2d, ``F.pad`` of the skip, ``cat``, BCEWithLogits and
  Dice, channels_last, RMSprop with ``foreach``).
- lora: LoRA adapters injected into a frozen model through ``named_children``/``setattr``,
  AdamW over two parameter groups, merging under ``no_grad``.
- word2vec: skip-gram with negative sampling (``Embedding(sparse=True)``, ``SparseAdam``,
  ``bmm``, ``logsigmoid``).
- tabular: categorical embeddings and BatchNorm1d, OneCycleLR per batch, an EMA of the
  weights with ``lerp_``/``copy_``.
- mdn: a mixture density network (``Normal.log_prob`` with ``logsumexp``, and
  ``MixtureSameFamily``).
- translation_transformer: the nn.Transformer translation tutorial (``create_mask``,
  padding masks, ``pad_sequence`` collate, ``ignore_index``, greedy decoding).
- style_transfer: neural style transfer (loss modules storing ``self.loss``, gram
  matrices, LBFGS over the input image with a closure that clamps it in place).

Dropout is 0 and random draws come from NumPy or Python's ``random`` in these runs (a test
device: the two libraries' random streams differ). torch's losses are recorded in
``goldens/written3/`` by ``written_sets.py``.
"""

from __future__ import annotations

from .harness import ProgramSet

PROGRAMS = ("dqn", "transformer_lm", "char_rnn", "fgsm", "wgan_gp", "simclr", "distill",
            "vqvae", "unet", "lora", "word2vec", "tabular", "mdn", "translation_transformer",
            "style_transfer")

SET = ProgramSet(
    "written3", PROGRAMS,
    # The U-Net's convolutions and the encoder-decoder transformer take a minute or more of
    # cold compile on a loaded two-core machine, and the style transfer's closure,
    # evaluated by L-BFGS, half a minute.
    slow=("unet", "translation_transformer", "style_transfer"),
    # The DQN batch holds 14 to 16 non-final next states (a new input shape each); the
    # critic step of WGAN-GP also fills the generator's .grad (its loss is not detached
    # from the generator), so from the second critic step on those gradients accumulate (a
    # second entry); the FGSM attack turns its argument into a leaf (``data.requires_grad
    # = True``), so it runs eagerly, with a warning; the char-RNN step unrolls over each
    # name's letters (a trace per name length: three) and returns ``loss.item()``, which
    # the compiled call computes; the translation batches are padded to three lengths.
    traces={"dqn": [3], "wgan_gp": [2, 1], "simclr": [1, 1], "distill": [1, 1],
            "fgsm": [1, 0], "char_rnn": [3], "translation_transformer": [3]},
    warns={"fgsm": "requires_grad_\\(True\\) on an argument"},
    # WGAN-GP compiled: the fused kernels round the critic's gradients differently from
    # eager (they agree to float32 rounding), and Adam's first steps scale each gradient
    # element by its own magnitude, so elements near rounding level move the critic by up
    # to ~lr; the generator's loss, a difference of two means of size ~1 that comes to
    # ~0.08, then shows it at ~1e-5 absolute.
    compiled_atols={"wgan_gp": 2e-5})
