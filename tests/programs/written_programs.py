"""Programs written in the manner of public PyTorch programs (``written/``), run with
``torch`` bound to dualgraph from torch's initial weights: their losses (and the figures
they print) equal torch's to 1e-5, eagerly and with their steps under ``dg.compile``.

- nn_tutorial: "What is torch.nn really?": hand-made weights and ``log_softmax``,
  ``no_grad`` updates, ``TensorDataset``/``DataLoader``, a wrapped loader, a ``Lambda``
  module, ``AdaptiveAvgPool2d``, SGD with momentum.
- lpwe: "Learning PyTorch with Examples": tensors with hand-written gradients, autograd,
  ``nn.Sequential`` with ``Flatten(0, 1)``, ``RMSprop``, a module with scalar
  parameters, and DynamicNet, whose forward draws ``random.randint`` (its compiled
  step runs eagerly, with a warning).
- blitz: the 60-minute blitz (``out=`` products, ``rand_like(dtype=)``, backward of
  non-scalars, the LeNet and the CIFAR-10 classifier, ``torch.save``/``load``).
- reinforce, actor_critic: pytorch/examples' policy gradient programs on a CartPole
  stand-in (``Categorical``, ``torch.tensor`` of a deque and of 0-d tensors, the policy
  keeping its episode's rewards on ``self``, compiled once).
- vit, siamese, transfer: pytorch/examples' vision transformer (``unfold`` patches,
  ``nn.Parameter(...).to(device)``, ``MultiheadAttention``), siamese network and the
  transfer-learning tutorial on a small torchvision-style ResNet (frozen parameters,
  ``StepLR``, ``set_grad_enabled``, ``deepcopy`` of a state dict).
- per_sample: per-sample gradients as the torch.func tutorial and Opacus compute them
  (``vmap(grad(...))`` over ``functional_call``, a dict of parameters in and out of the
  compiled DP-SGD step).
- maml: MAML on sinusoids, the inner loop through ``functional_call`` and
  ``autograd.grad(create_graph=True)``, one compiled meta-step over several tasks.
- checkpointed: ``utils.checkpoint`` (reentrant on an input without grad, which trains
  nothing before it; ``checkpoint_sequential``), ``compiler.disable`` and
  ``random.fork_rng``.
- swa: ``optim.swa_utils`` (``AveragedModel``, an EMA with ``get_ema_multi_avg_fn``,
  ``SWALR`` after ``CosineAnnealingLR``, ``update_bn``) on a regression with batch norm.
- dirichlet_vae: a Dirichlet-latent VAE with ``Beta`` and ``Gamma`` priors and
  ``kl_divergence`` of Dirichlets.
- hogwild: pytorch/examples' mnist_hogwild with one worker: ``share_memory`` and a
  ``multiprocessing.Process`` (forked) whose compiled steps train the parent's model.
- lstm_lm: a word-level LSTM language model with truncated backpropagation through time:
  the hidden state ``(h, c)`` kept on the model (``self.hidden``) across batches and
  detached by a recursive ``repackage_hidden`` in the compiled step, tied weights, a
  hand-written SGD through ``p.data``, a ``no_grad`` perplexity evaluation in the loop.
- sac: soft actor-critic's update: a tanh-squashed Gaussian policy (the log-probability
  corrected by hand), twin Q critics frozen with ``requires_grad = False`` during the
  policy step, Polyak-averaged targets through ``p_targ.data.mul_``/``add_``, a learned
  temperature; three optimizers in one compiled step, which runs eagerly, with a warning:
  freezing the critics' parameters inside the step changes which tensors autograd
  differentiates mid-call.
- accum_resume: gradient accumulation over micro-batches (``loss / k``,
  ``zero_grad(set_to_none=True)``), AdamW with parameter groups under a warmup
  ``LambdaLR``, and a checkpoint dict saved with ``torch.save`` mid-run, loaded into a
  freshly built model, optimizer and scheduler, and resumed.
- bn_resnet: a small residual network with ``BatchNorm2d``, ``kaiming_normal_``, label
  smoothing, Nesterov SGD, and a mid-epoch validation under ``model.eval()`` and
  ``no_grad`` before ``model.train()`` again.
- tagger: a bidirectional GRU tagger over a ``PackedSequence`` built from a padding
  ``collate_fn``'s lengths tensor (its compiled step runs eagerly, with a warning: the
  packed batch sizes depend on the lengths' values).
- realnvp: a RealNVP flow (coupling layers with masks as buffers, a log-determinant
  accumulated in place into ``new_zeros``, a ``MultivariateNormal`` base) trained by
  maximum likelihood, and its inverse under ``no_grad``.

The policy-gradient programs act greedily and without dropout in these runs (a test
device: the two libraries' random streams differ); torch's losses are recorded in
``goldens/written/`` by ``written_sets.py``.
"""

from __future__ import annotations

from .harness import ProgramSet

PROGRAMS = ("nn_tutorial", "lpwe", "blitz", "reinforce", "actor_critic", "vit", "siamese",
            "transfer", "per_sample", "maml", "checkpointed", "swa", "dirichlet_vae", "hogwild",
            "lstm_lm", "sac", "accum_resume", "bn_resnet", "tagger", "realnvp")

# Compiled steps that compile in seconds run by default; the CNNs, the transformer and the
# ResNets take a minute or more of cold compile on a loaded two-core machine, the flow's
# eight couplings, forward and backward, half a minute of CPU, and the tagger's
# bidirectional GRU step compiles once per batch's lengths (below): over three minutes
# cold on a loaded machine.
FAST_COMPILE = ("lpwe", "reinforce", "actor_critic", "swa", "hogwild", "lstm_lm",
                "accum_resume", "sac")

SET = ProgramSet(
    "written", PROGRAMS, slow=tuple(n for n in PROGRAMS if n not in FAST_COMPILE),
    # lpwe's DynamicNet step draws from Python's random module, so it is not traced into a
    # graph (it runs eagerly); the tagger's step packs by a lengths tensor argument, whose
    # values key its entries: one per batch of the six; accum_resume's micro-step traces
    # twice per model (.grad None on the first micro-batch of an update, set on the
    # others), for the model before and after the resume.
    traces={"lpwe": [1, 1, 1, 0], "tagger": [6], "accum_resume": [4]},
    warns={"lpwe": "draws from Python's random module"},
    # The policy-gradient losses are sums of ~30 terms of size ~1 whose normalised returns
    # cancel to ~0.05: float32 rounding of the terms shows at ~2e-6 absolute. The flow's
    # inverse maps base points to coordinates as small as 0.03, computed through eight
    # couplings of exp and products: float32 rounding shows at ~2e-7 absolute there.
    atols={"reinforce": 1e-5, "actor_critic": 1e-5, "realnvp": 1e-6})
