"""An eleventh set of programs written for these tests in the manner of public PyTorch
programs (in ``written11/``): see `harness.ProgramSet`.

- timm_train: timm's training loop around a ResMLP (``model.apply(_init_weights)`` with
  ``trunc_normal_``, ``ModelEmaV2`` by ``deepcopy`` and a ``no_grad`` update over
  ``state_dict().values()`` inside the compiled step, ``param_groups_weight_decay``,
  ``CrossEntropyLoss(label_smoothing=)``, ``LinearLR`` then ``CosineAnnealingLR`` in
  ``SequentialLR``, the norm ``clip_grad_norm_`` returns logged, top-1/top-5 accuracy).
- hifigan: HiFi-GAN (``weight_norm`` Conv1d/ConvTranspose1d generator, multi-period and
  multi-scale discriminators with ``spectral_norm``, reflect padding, a mel loss through
  ``torch.stft(return_complex=True)`` and ``view_as_real``, feature-matching and LSGAN
  losses, ``remove_weight_norm`` before inference).
- focal_det: a tiny FCOS-style detector trained with the copied ``FocalLoss`` (``gather``,
  ``Variable(logpt.data.exp())``, ``alpha.type()``) and torchvision's
  ``sigmoid_focal_loss`` and ``generalized_box_iou_loss`` (``intsctk[mask] = ...``).
- lm_decoding: a two-layer LSTM language model, then ``top_k_top_p_filtering`` sampling
  under ``@torch.inference_mode()`` and beam search with ``topk`` over flattened scores,
  ``torch.div(rounding_mode="floor")`` and ``index_select`` of the LSTM state.
- swav: SwAV's multi-crop forward (``unique_consecutive`` over crop sizes), the
  ``@torch.no_grad()`` Sinkhorn-Knopp, prototypes renormalised and frozen by ``p.grad =
  None``, a learning-rate array written into the param groups, a queue in the last epoch.
- rope_llama: Meta's Llama (``torch.polar``/``view_as_complex`` rotary embeddings kept on
  the module, ``repeat_kv``, RMSNorm, SwiGLU), trained, then generated with a key/value
  cache written by slice assignment.
- data_pipes: ``torch.utils.data`` (``IterableDataset`` with ``get_worker_info``,
  ``ChainDataset``, ``Subset``, ``ConcatDataset`` and ``+``, ``BatchSampler`` as
  ``batch_sampler=``, ``batch_size=None``, ``default_collate`` of dicts and namedtuples, a
  ``pad_sequence`` collate), ``model(**batch)`` in the compiled step.
- dlrm: DLRM (``EmbeddingBag(mode="sum", sparse=True)`` over offsets, weights set through
  ``.data = torch.tensor(W, requires_grad=True)``, the dot interaction by ``bmm`` and
  ``Z[:, li, lj]``, ``BCELoss``, SGD on sparse gradients, an ``_LRScheduler`` subclass).
- bilstm_crf: a BiLSTM-CRF tagger with pytorch-crf's ``CRF`` (``logsumexp`` forward
  algorithm with ``torch.where`` on the mask, gold scores by advanced indexing, Viterbi
  decoding walked back with ``.item()``).
- trpo: TRPO (a Gaussian policy, GAE into ``torch.Tensor(n, 1)`` buffers, the
  Fisher-vector product by ``autograd.grad(create_graph=True)`` compiled, conjugate
  gradients, flat parameters copied through ``param.data``, a line search, the value
  network fitted by ``LBFGS``, ``parameters_to_vector``/``vector_to_parameters``).

Compiled, hifigan's step compiles with one trace (``discriminator_loss`` logs each scale's
``.item()`` in a list it returns: numbers the compiled call computes). focal_det's step runs
eagerly with a warning: it selects the foreground boxes with a boolean mask (a shape that
depends on the data), and then normalises by ``max(1, num_foreground)``, a number read
with ``.item()`` that Python compares; so does swav's (``unique_consecutive`` of the crop
sizes): ``torch.compile`` breaks its graph at each of these too. dlrm's step traces once per
batch (its index vectors differ in length; ``torch.compile`` would make the size dynamic
on the second), and trpo compiles a new ``Fvp`` closure per update, as the original
defines it inside ``update_params``.

Random draws come from NumPy (the two libraries' random streams differ); lm_decoding
samples by the cumulative distribution against NumPy uniforms. swav's evaluation figures
carry a wider absolute tolerance: its Sinkhorn ``exp(out / 0.05)`` amplifies rounding
(torch's own figures move by 3e-5 relative when its initial weights are perturbed by 1e-7
relative; dualgraph's are 4.5e-6 apart for values of 0.03-0.05, its losses within 2e-6).

Record torch's side with ``python -m tests.programs.written_sets written11 [NAME ...]``.
"""

from __future__ import annotations

from .harness import ProgramSet

PROGRAMS = ("timm_train", "hifigan", "focal_det", "lm_decoding", "swav", "rope_llama",
            "data_pipes", "dlrm", "bilstm_crf", "trpo")
# The default run compiles timm_train, data_pipes and trpo (from an empty kernel cache,
# Numba's routine cache as found, on a loaded machine: 14, 9.5 and 7.4 s of CPU) and the
# two that run eagerly; the others are slow. Their compiled paths are compiled in the
# default run elsewhere: dlrm (18.5 s, three traces) by written4's recsys (EmbeddingBag
# over offsets) and the registry-driven op tests; lm_decoding (7.9 s; 49 s in the run that
# first compiled the LSTM routines) by written's lstm_lm and written6's lstm_forecast;
# rope_llama (18.5 s) by tests/compile/test_complex.py (Llama's rotary block, a polar
# table kept on the module); bilstm_crf (27.6 s) by tests/nn/test_rnn.py and
# tests/ops/test_recurrent_c.py (bidirectional LSTMs) and written3's mdn (logsumexp).
# hifigan's compiled step (one trace: the generator and both discriminators, forward and
# backward, 46 s of CPU cold on the same loaded machine) is slow too; the numbers its
# ``discriminator_loss`` reads with ``.item()`` are compiled in the default run by
# tests/compile/test_item_reads.py and written3's char_rnn (6.8 s cold).
SLOW = ("dlrm", "lm_decoding", "rope_llama", "bilstm_crf", "hifigan")
SET = ProgramSet(
    "written11", PROGRAMS, slow=SLOW, atol=1e-7, atols={"swav": 1e-5},
    traces={"focal_det": [0], "swav": [0], "data_pipes": [1, 1], "dlrm": [3],
            "trpo": [1, 1, 1]},
    warns={"focal_det": r"focal_det\.py:\d+: indexing with a boolean mask tensor",
           "swav": "unique_consecutive has a result whose shape or value depends on the data"})
