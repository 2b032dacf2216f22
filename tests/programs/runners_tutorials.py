"""Runs of pytorch/tutorials programs (vendored in vendor/tutorials/), in the manner of
``runners.py``: each takes the bound ``torch`` (real torch to record goldens, or
dualgraph), torch's initial weights (``None``: return the model's own) and ``compiled``,
and returns its losses.

- polynomial_custom_function: the script as it is (a custom ``autograd.Function``, the
  Legendre polynomial P3, fitted to sin by hand-written gradient descent under
  ``no_grad``), its printed losses; compiled, the script's loop body is one compiled
  step that applies the program's ``LegendrePolynomial3``.
- seq2seq: the translation tutorial's GRU encoder and attention decoder trained by its own
  ``train()`` (token by token, the encoder outputs written into a zeros tensor by index,
  teacher forcing chosen by ``random.random()``) with SGD; compiled, the encoder and the
  decoder are ``torch.compile``d (the training loop around them is Python).
"""

from __future__ import annotations

import contextlib
import io
import random
from typing import Any

import numpy as np

from .harness import import_program, load_arrays, state_arrays

STEPS = 10
PROGRAMS = ("polynomial_custom_function-script", "polynomial_custom_function-steps",
            "seq2seq", "text_classification", "spatial_transformer")


def polynomial_custom_function(torch: Any, weights: Any = None, compiled: bool = False,
                               model_type: str = "script") -> dict:
    """``model_type="script"``: the script run at import, its printed losses (every 100th
    of 2000 steps) and its printed result. ``"steps"``: the script's definitions, then
    200 steps of its loop body as one function of (a, b, c, d), compiled or not, its loss
    recorded every step."""
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        mod = import_program(torch, "tutorials.polynomial_custom_function")
    out: dict = {"weights": {}}
    if model_type == "script":
        lines = printed.getvalue().splitlines()
        out["losses"] = [float(line.split()[1]) for line in lines[:-1]]
        out["printed"] = lines[-1]
        return out
    x, y, learning_rate = mod.x, mod.y, mod.learning_rate
    params = [torch.full((), v, dtype=torch.float, requires_grad=True)
              for v in (0.0, -1.0, 0.0, 0.3)]

    def step(a, b, c, d):  # the script's loop body
        P3 = mod.LegendrePolynomial3.apply
        y_pred = a + b * P3(c + d * x)
        loss = (y_pred - y).pow(2).sum()
        loss.backward()
        with torch.no_grad():
            a -= learning_rate * a.grad
            b -= learning_rate * b.grad
            c -= learning_rate * c.grad
            d -= learning_rate * d.grad
            a.grad = None
            b.grad = None
            c.grad = None
            d.grad = None
        return loss

    run = torch.compile(step, fullgraph=True) if compiled else step
    out["losses"] = [run(*params).item() for _ in range(200)]
    if compiled:
        out["compiled"] = run
    return out


def _seq2seq_pairs() -> list[tuple[np.ndarray, np.ndarray]]:
    """Ten (input, target) sentences of word indices ending in EOS (1), as the tutorial's
    ``tensorsFromPair`` makes them: (length, 1) int64 columns, at most MAX_LENGTH long."""
    rng = np.random.default_rng(8)
    pairs = []
    for _ in range(STEPS):
        n, m = rng.integers(3, 9), rng.integers(3, 9)
        pairs.append((np.append(rng.integers(2, 12, size=n), 1).reshape(-1, 1),
                      np.append(rng.integers(2, 14, size=m), 1).reshape(-1, 1)))
    return pairs


def seq2seq(torch: Any, weights: Any = None, compiled: bool = False) -> dict:
    """The tutorial's ``EncoderRNN(12, 16)`` and ``AttnDecoderRNN(16, 14)`` (dropout
    off: the two libraries' random streams differ) trained by its ``train()`` on ten
    sentence pairs with its ``trainIters``' SGD(lr=0.01) and NLLLoss. ``random`` is seeded
    so both libraries take the same teacher-forcing choices; the choices that do not force
    feed back the decoder's own ``topk`` guess."""
    s2s = import_program(torch, "tutorials.seq2seq_translation")
    torch.manual_seed(0)
    encoder = s2s.EncoderRNN(12, 16)
    decoder = s2s.AttnDecoderRNN(16, 14, dropout_p=0.0)
    state = {**{f"encoder.{k}": v for k, v in encoder.state_dict().items()},
             **{f"decoder.{k}": v for k, v in decoder.state_dict().items()}}
    out: dict = {"weights": state_arrays(state)} if weights is None else {}
    if weights is not None:
        for name, module in (("encoder", encoder), ("decoder", decoder)):
            load_arrays(torch, module, {k.partition(".")[2]: np.asarray(weights[k])
                                        for k in weights.files if k.startswith(name + ".")})
    encoder_optimizer = torch.optim.SGD(encoder.parameters(), lr=0.01)
    decoder_optimizer = torch.optim.SGD(decoder.parameters(), lr=0.01)
    criterion = torch.nn.NLLLoss()
    enc, dec = encoder, decoder
    if compiled:
        enc, dec = torch.compile(encoder), torch.compile(decoder)
        enc.hidden_size, enc.initHidden = encoder.hidden_size, encoder.initHidden
    random.seed(0)
    losses = [s2s.train(torch.tensor(x), torch.tensor(y), enc, dec, encoder_optimizer,
                        decoder_optimizer, criterion) for x, y in _seq2seq_pairs()]
    out["losses"] = losses
    if compiled:
        out["compiled"] = [enc, dec]
    return out


class _Criterion:
    """A loss module that records ``float`` of each loss it computes."""

    def __init__(self, criterion: Any, sink: list) -> None:
        self._criterion, self._sink = criterion, sink

    def __call__(self, *args: Any) -> Any:
        value = self._criterion(*args)
        self._sink.append(value.item())
        return value


def text_classification(torch: Any, weights: Any = None, compiled: bool = False) -> dict:
    """The text classification tutorial's ``TextClassificationModel`` (an
    ``nn.EmbeddingBag`` of 20 words, 8 wide, into 4 classes) trained by its ``train()``
    over a ``DataLoader`` of 40 token lists with its ``collate_batch`` (texts
    concatenated, offsets by ``cumsum``), then ``evaluate()``, for two epochs with its
    SGD(lr=5), ``clip_grad_norm_`` and ``StepLR(optimizer, 1.0, gamma=0.1)`` stepped when
    validation accuracy drops. The texts' lengths repeat (3, 5, 2, 6) in every batch of
    four, so a compiled model sees one shape."""
    tc = import_program(torch, "tutorials.text_sentiment_ngrams")
    torch.manual_seed(0)
    model = tc.TextClassificationModel(20, 8, 4)
    out: dict = {}
    if weights is None:
        out["weights"] = state_arrays(model.state_dict())
    else:
        load_arrays(torch, model, weights)
    rng = np.random.default_rng(9)
    samples = [(int(rng.integers(1, 5)), [int(t) for t in rng.integers(0, 20, size=n)])
               for n in [3, 5, 2, 6] * 10]
    tc.text_pipeline = lambda x: x
    tc.label_pipeline = lambda x: int(x) - 1
    losses: list[float] = []
    tc.criterion = _Criterion(torch.nn.CrossEntropyLoss(), losses)
    tc.optimizer = torch.optim.SGD(model.parameters(), lr=5)
    scheduler = torch.optim.lr_scheduler.StepLR(tc.optimizer, 1.0, gamma=0.1)
    tc.model = torch.compile(model) if compiled else model
    loader = torch.utils.data.DataLoader(samples, batch_size=4, shuffle=False,
                                         collate_fn=tc.collate_batch)
    total_accu = None
    for epoch in (1, 2):  # the tutorial's epoch loop
        tc.epoch = epoch
        tc.train(loader)
        accu_val = tc.evaluate(loader)
        losses.append(accu_val)
        if total_accu is not None and total_accu > accu_val:
            scheduler.step()
        else:
            total_accu = accu_val
    out["losses"] = losses
    if compiled:
        out["compiled"] = tc.model
    return out


def spatial_transformer(torch: Any, weights: Any = None, compiled: bool = False) -> dict:
    """The spatial transformer tutorial's ``Net`` (a localisation CNN regressing an affine
    matrix, ``F.affine_grid`` and ``F.grid_sample``, then a CNN classifier ending in
    ``F.log_softmax`` without ``dim``) trained by the tutorial's step (SGD(lr=0.01),
    ``F.nll_loss``) on ten batches of four synthetic 28x28 images; its dropouts are
    switched off by evaluation mode (the two libraries' random streams differ), and the
    localisation's last layer is perturbed from the tutorial's identity start so that
    the sampling grid falls between pixels."""
    st = import_program(torch, "tutorials.spatial_transformer")
    torch.manual_seed(0)
    model = st.Net()
    with torch.no_grad():
        model.fc_loc[2].weight.add_(torch.tensor(
            np.random.default_rng(10).normal(0, 0.05, size=(6, 32)).astype(np.float32)))
    out: dict = {}
    if weights is None:
        out["weights"] = state_arrays(model.state_dict())
    else:
        load_arrays(torch, model, weights)
    model.eval()
    rng = np.random.default_rng(11)
    images = rng.standard_normal((STEPS, 4, 1, 28, 28)).astype(np.float32)
    labels = rng.integers(0, 10, size=(STEPS, 4))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

    def step(data, target):  # the tutorial's train(): one batch
        optimizer.zero_grad()
        output = model(data)
        loss = torch.nn.functional.nll_loss(output, target)
        loss.backward()
        optimizer.step()
        return loss

    run = torch.compile(step, fullgraph=True) if compiled else step
    out["losses"] = [run(torch.tensor(x), torch.tensor(y)).item()
                     for x, y in zip(images, labels)]
    if compiled:
        out["compiled"] = run
    return out
