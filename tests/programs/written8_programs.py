"""An eighth set of programs written for these tests in the manner of public PyTorch
programs (in ``written8/``): see `harness.ProgramSet`.

- hf_gpt2: Hugging Face's GPT-2 (``Conv1D`` by ``addmm`` with transposed weights, a boolean
  causal-mask buffer and ``torch.finfo(dtype).min``, the tanh GELU written out and as
  ``GELU(approximate="tanh")``, tied embeddings, ``-100`` labels, ``model =
  torch.compile(model)`` in the program and ``model._orig_mod`` for top-k generation with
  a key/value cache).
- hf_bert_finetune: BERT sequence classification fine-tuned as ``run_glue_no_trainer``
  does (a dict-returning Dataset, a padding ``collate_fn``, ``DataLoader(generator=)``,
  ``model(**batch)``, ``no_decay`` parameter groups, ``LinearLR`` warm-up in
  ``SequentialLR``, gradient accumulation, ``clip_grad_norm_(error_if_nonfinite=True)``).
- diffusion_unet: improved-diffusion's U-Net (GroupNorm32, SiLU, scale-shift norm,
  ``einsum`` attention, ``F.interpolate`` nearest, ``zero_module``) and a cosine schedule,
  with an EMA by ``torch._foreach_mul_``/``_foreach_add_``.
- moco_simsiam: MoCo v2's momentum encoder and queue buffer (``int(self.queue_ptr)``,
  ``param_k.data = ...``) and SimSiam (``CosineSimilarity``, a ``fix_lr`` group key).
- barlow_lars: Barlow Twins (``off_diagonal``, ``torch.diagonal(c).add_(-1).pow_(2)``)
  and VICReg trained by LARS written as an ``Optimizer`` subclass with function settings.
- custom_optim: Lion, SAM (a base optimizer sharing ``param_groups``, ``first_step``/
  ``second_step``, BatchNorm momentum switched off by ``model.apply``) and a Lookahead
  wrapper that skips ``Optimizer.__init__``.
- chatbot: the chatbot tutorial (a packed bidirectional GRU encoder, Luong attention,
  ``maskNLLLoss`` by ``gather`` and ``masked_select``, teacher forcing, greedy search).
- speech_ctc: a DeepSpeech2-like model (CNN layer norm by ``transpose``, bidirectional GRUs,
  ``nn.CTCLoss(zero_infinity=True)``, ``F.ctc_loss`` with concatenated targets, OneCycleLR).
- transe: TransE (entity rows renormalised through ``weight.data[:-1, :].div_`` before the
  forward, ``MarginRankingLoss``), DistMult with ``Embedding(max_norm=)`` and Adagrad,
  hits@k and MRR.
- tabnet: TabNet (sparsemax and entmax-1.5 as ``autograd.Function``s whose forward writes
  into its input, ghost batch norm by ``chunk``, GLU blocks, a sparsity loss).

Random draws come from NumPy (the two libraries' random streams differ). No linear bias
feeds a batch norm where Lion's sign or Adam's scaling follows (its gradient is zero up
to rounding). Compiled, MoCo's ``param_k.data = ...``, SAM's ``p.data = old_p`` and the
chatbot's ``masked_select`` run their steps eagerly with a warning (by the compile
contract), as does Lookahead's step (it counts steps in a parameter group), and the
fine-tuning step traces twice (it starts with and without gradients, as accumulation
alternates).

Record torch's side with ``python -m tests.programs.written_sets written8 [NAME ...]``.
"""

from __future__ import annotations

from .harness import ProgramSet

PROGRAMS = ("hf_gpt2", "hf_bert_finetune", "diffusion_unet", "moco_simsiam", "barlow_lars",
            "custom_optim", "chatbot", "speech_ctc", "transe", "tabnet")
# The default run compiles two that cover the most new surface (writes through ``.data``
# before the forward, dict arguments) and the chatbot (which runs eagerly); the rest are
# slow. Cold, from an empty kernel cache on a loaded machine, the four compiled runs with
# barlow_lars took about 200 s of CPU together (tabnet and barlow_lars the most). tabnet's
# custom Functions writing into their input compile in the default run in
# test_written8_programs.py (a Function's in-place forward with its own backward, in a
# training step after ``.data`` writes), its sort, cumsum and gather in the rows of
# tests/backend/test_ops_compiled.py; its eager run (default) pins torch's losses.
SLOW = ("hf_gpt2", "diffusion_unet", "moco_simsiam", "custom_optim", "speech_ctc",
        "barlow_lars", "tabnet")
SET = ProgramSet(
    "written8", PROGRAMS, slow=SLOW, atol=1e-7,
    traces={"hf_bert_finetune": [2], "moco_simsiam": [0, 1], "chatbot": [0],
            "custom_optim": [1, 0, 0, 0]},
    warns={"moco_simsiam": "swaps the tensor's data", "chatbot": "masked_select",
           "custom_optim": "swaps the tensor's data"})
