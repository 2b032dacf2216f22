"""A fourth set of programs written in the manner of popular public PyTorch programs
(``written4/``), run with ``torch`` bound to dualgraph from torch's initial weights: their
losses (and the figures they print) equal torch's to 1e-5, eagerly and with their steps
under ``dg.compile``.

- yunjey_basics, yunjey_cnn, yunjey_birnn, yunjey_lm, yunjey_gan, yunjey_resnet: the
  yunjey/pytorch-tutorial programs (logistic regression and a feedforward net; a CNN with
  BatchNorm2d and an eval-mode test loop; LSTM and bidirectional LSTM classifiers over
  image rows; an LSTM language model with ``detach`` of its states and
  ``clip_grad_norm_``; a GAN with ``reset_grad``; a residual network with a manual
  ``param_group['lr']`` decay).
- quickstart: "Learn the Basics" (a Dataset subclass, ``nn.Flatten``, the train/test
  loops, ``torch.save``/``torch.load(weights_only=True)``, ``nn.Softmax(dim=1)``, a
  one-hot ``scatter_`` target transform, the autograd tour).
- d2l_scratch: d2l's linear and softmax regression from scratch (a shuffling generator,
  ``sgd`` under ``no_grad`` with ``param.grad.zero_()``, ``y_hat[range(n), y]``).
- packed_rnn: ``pad_sequence``, ``pack_padded_sequence`` (sorted and
  ``enforce_sorted=False``), a bidirectional GRU and a two-layer LSTM,
  ``pad_packed_sequence``, ``h_n[-2]``/``h_n[-1]``.
- mha_seq2seq: an encoder-decoder of ``nn.MultiheadAttention`` with key padding masks, a
  causal boolean mask, LambdaLR warmup and greedy decoding.
- textcnn: Conv1d over permuted embeddings, ``F.max_pool1d(x, x.size(2))``,
  AdaptiveMaxPool1d/AvgPool1d, ``padding='same'``, BatchNorm1d.
- recsys: matrix factorisation (``nn.init.normal_``/``zeros_``, ``topk`` of scores) and
  NCF with ``nn.EmbeddingBag(mode='mean')`` over offsets from ``cumsum``.
- dist_policy: PPO's update with ``Categorical`` and ``Normal`` (``log_prob``,
  ``entropy``, the clipped surrogate, ``orthogonal_`` init), ``kl_divergence`` of both,
  and a VAE with ``Independent(Normal)`` posteriors.
- sn_gan: ``nn.utils.spectral_norm`` critic, ``parametrizations.weight_norm`` generator,
  ``torch.amp.GradScaler``/``autocast`` disabled on CPU, ``random_split``,
  ``WeightedRandomSampler`` (its counts), the spectral norm read after training.

Dropout is 0 and random draws come from NumPy or Python's ``random`` (a test device: the
two libraries' random streams differ). No convolution bias feeds a BatchNorm in a check
after training, and no discriminator loss cancels exactly: those gradients are zero up
to rounding, Adam scales rounding noise to a step of ~lr, and torch's own result is then
one draw of that noise. torch's losses are recorded in ``goldens/written4/`` by
``written_sets.py``.
"""

from __future__ import annotations

from .harness import ProgramSet

PROGRAMS = ("yunjey_basics", "yunjey_cnn", "yunjey_birnn", "yunjey_lm", "yunjey_gan",
            "yunjey_resnet", "quickstart", "d2l_scratch", "packed_rnn",
            "mha_seq2seq", "textcnn", "recsys", "dist_policy", "sn_gan")

SET = ProgramSet(
    "written4", PROGRAMS,
    # The two LSTM classifiers over image rows take a minute and a half of cold compile on
    # a loaded two-core machine, and the packed GRU and LSTM steps compile once per batch
    # (below): eight recurrent steps, about four minutes cold on a loaded two-core machine.
    # sn_gan's and dist_policy's compiled runs take 23-29 s of cold compile each; the
    # default run compiles what they add in tests/nn/test_norm_params.py (a training step
    # through spectral_norm and weight_norm, both as hooks and as parametrizations) and
    # tests/distributions/test_distributions.py (Categorical's log_prob and entropy,
    # Normal's log_prob, their kl_divergence in one step; Independent only sums its base's
    # terms), and GANs' alternating steps in yunjey_gan.
    slow=("yunjey_birnn", "packed_rnn", "sn_gan", "dist_policy"),
    # d2l's steps find .grad unset on their first call and set from then on
    # (``param.grad.zero_()`` keeps it); the NCF batches hold item histories of three total
    # lengths; the packed batches' lengths are an argument whose values decide the graph,
    # so each of the four batches has an entry keyed on them.
    traces={"d2l_scratch": [2, 2], "recsys": [1, 3], "packed_rnn": [4, 4]},
    # PPO's approximate KL and clip fraction start at zero and grow to ~1e-4: compared
    # relatively they would ask for agreement below float32 rounding of the log-ratios.
    atol=1e-7)
