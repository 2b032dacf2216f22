"""A sixth set of programs written for these tests in the manner of public PyTorch
programs (in ``written6/``): see `harness.ProgramSet`.

- d2l_softmax, d2l_cnns, d2l_rnn_scratch, d2l_attention, d2l_bert: d2l.ai's chapters
  (softmax regression and weight decay by hand, LeNet/VGG/NiN/Inception/ResNet/DenseNet
  blocks, GRU and LSTM from scratch with hand-written gradient clipping, masked softmax,
  Bahdanau and multi-head attention, BERT's masked-LM gather and next-sentence head).
- char_rnn_names: the tutorials' name classification and generation RNNs (``nn.LogSoftmax``
  with ``NLLLoss``, ``p.data.add_(p.grad.data, alpha=-lr)``, ``target.unsqueeze_(-1)``).
- optim_zoo: nine optimizers with scheduler chains (SequentialLR, ChainedScheduler,
  ReduceLROnPlateau) and ``clip_grad_norm_``.
- autoencoders: denoising, sparse (KL penalty) and convolutional autoencoders.
- mpnn_graph: GCN/SAGE/GIN message passing with ``scatter_add_``/``index_add_`` and a
  global mean pool.
- seq2seq_tf: the LSTM encoder-decoder with teacher forcing by ``random.random()``.
- lstm_forecast: a ``batch_first`` LSTM forecaster from zero states, and a Conv1d +
  bidirectional GRU framewise classifier with OneCycleLR stepped inside the step.
- detect_triplet: anchor matching by IoU, ``smooth_l1_loss`` + cross-entropy heads, a
  ``TripletMarginLoss`` embedding and a ``torch.save``/``torch.load`` round trip.

Random draws come from NumPy (the two libraries' random streams differ).

Record torch's side with ``python -m tests.programs.written_sets written6 [NAME ...]``.
"""

from __future__ import annotations

from .harness import ProgramSet

PROGRAMS = ("d2l_softmax", "d2l_cnns", "d2l_rnn_scratch", "d2l_attention", "d2l_bert",
            "char_rnn_names", "optim_zoo", "autoencoders", "mpnn_graph", "seq2seq_tf",
            "lstm_forecast", "detect_triplet")
# Traces per compiled function, where not one. d2l's softmax and RNN steps zero ``.grad``
# in place (None on the first call, set from then on); the names differ in length (two
# shapes). Steps that run eagerly, with a warning, where torch.compile breaks its graph:
# ``unsqueeze_`` of an argument, a draw from Python's ``random`` (teacher forcing), a
# scheduler stepped inside the step (OneCycleLR), d2l's masked softmax loss setting its
# ``reduction`` attribute to a string inside ``forward``. A branch on a traced value (d2l's
# hand-written ``grad_clipping``: ``if norm > theta``) compiles, guarded on its outcome.
# Compiled runs that are slow (26-39 s of cold compile each on a two-core runner), with the
# default-run tests that compile the same things. optim_zoo's nine optimizers (SGD with
# momentum and nesterov, centered RMSprop with momentum, Adagrad with lr_decay, Adadelta,
# Adamax, NAdam, RAdam, Adam with amsgrad), each with a scheduler stepped between calls:
# tests/optim/test_compiled.py::test_compiled_step_follows_the_schedule (compiled == eager
# at every step); clip_grad_norm_ inside a compiled step: yunjey_lm of the written4 set and
# tests/compile/test_fidelity.py.
# d2l_cnns' convolutions, batch norms, pools and concatenated branches: yunjey_cnn and
# yunjey_resnet of the written4 set, and the conv, pool and shape rows of
# tests/backend/test_ops_compiled.py. d2l_rnn_scratch (about 137 CPU s cold: GRU and LSTM
# steps unrolled over six steps, forward and backward): its clipping branch, guarded on
# the norm, is tests/compile/test_read_speculation.py's gradient clipping step, its cells'
# ops written3's char_rnn. Their eager runs (default) pin torch's losses.
SLOW = ("optim_zoo", "d2l_cnns", "d2l_rnn_scratch")
SET = ProgramSet(
    "written6", PROGRAMS, slow=SLOW,
    traces={"d2l_softmax": [2, 1], "d2l_rnn_scratch": [2, 2], "d2l_attention": [0, 1],
            "char_rnn_names": [2, 0], "seq2seq_tf": [0], "lstm_forecast": [1, 0]},
    warns={"d2l_attention": "reduction", "char_rnn_names": "unsqueeze_",
           "seq2seq_tf": "random", "lstm_forecast": "scheduler"},
    atol=1e-7)
