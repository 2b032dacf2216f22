"""Runs of more pytorch/examples programs (vendored in vendor/examples/), in the manner of
``runners.py``: each takes the bound ``torch`` (real torch to record goldens, or
dualgraph), torch's initial weights (``None``: return the model's own, for the recorder)
and ``compiled``, and returns its per-step losses.

- time_sequence: the LSTMCell ``Sequence`` in float64, trained by train.py's own LBFGS
  closure (compiled: the model is ``torch.compile``d; LBFGS's line search is Python).
- super_resolution: the PixelShuffle ``Net`` (orthogonal init), main.py's Adam and MSE.
- fast_neural_style: the ``TransformerNet`` (reflection padding, InstanceNorm2d, nearest
  upsampling, residual blocks), trained towards a fixed image with Adam (neural_style.py's
  perceptual loss needs torchvision's VGG, so a pixel MSE stands in for it).
- forward_forward: the forward-forward ``Net`` of two ``Layer(nn.Linear)``s, each trained
  by its own ``Layer.train`` loop (Adam), on positive and negative data made by the
  program's ``overlay_y_on_x``.
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np

from .harness import import_program, load_arrays, state_arrays

STEPS = 10
PROGRAMS = ("time_sequence", "super_resolution", "fast_neural_style", "forward_forward")


def _compile(torch: Any, fn: Any) -> Any:
    return torch.compile(fn, fullgraph=True)


def _start(torch: Any, model: Any, weights: Any) -> dict:
    out: dict = {}
    if weights is None:
        out["weights"] = state_arrays(model.state_dict())
    else:
        load_arrays(torch, model, weights)
    return out


def _sine_waves(n: int, length: int) -> np.ndarray:
    """time_sequence_prediction/generate_sine_wave.py's data, smaller: ``n`` sine waves of
    ``length`` points with random phase shifts (float64)."""
    rng = np.random.default_rng(0)
    x = np.arange(length) + rng.integers(-4 * 20, 4 * 20, size=(n, 1))
    return np.sin(x / 20.0).astype(np.float64)


def time_sequence(torch: Any, weights: Any = None, compiled: bool = False) -> dict:
    """time_sequence_prediction/train.py: its main block's model, loss and LBFGS(lr=0.8),
    with its closure (zero_grad, forward, MSE, backward), on six short sine waves; one
    loss per closure call (LBFGS calls it several times a step)."""
    ts = import_program(torch, "examples.time_sequence_train")
    torch.manual_seed(0)
    seq = ts.Sequence()
    seq.double()
    out = _start(torch, seq, weights)
    data = _sine_waves(6, 24)
    input = torch.from_numpy(data[3:, :-1])  # noqa: A001 - the program's own name
    target = torch.from_numpy(data[3:, 1:])
    criterion = torch.nn.MSELoss()
    model = _compile(torch, seq) if compiled else seq
    optimizer = torch.optim.LBFGS(seq.parameters(), lr=0.8)
    losses: list[float] = []
    for _ in range(3):
        def closure():  # train.py's closure, its print replaced by recording the loss
            optimizer.zero_grad()
            out = model(input)
            loss = criterion(out, target)
            losses.append(loss.item())
            loss.backward()
            return loss
        optimizer.step(closure)
    with torch.no_grad():  # the main block's prediction of the future, after training
        future = 5
        pred = seq(input[:, :8], future=future)
        losses.append(criterion(pred[:, :-future], target[:, :8]).item())
    out["losses"] = losses
    if compiled:
        out["compiled"] = model
    return out


def super_resolution(torch: Any, weights: Any = None, compiled: bool = False) -> dict:
    """super_resolution: its ``Net(upscale_factor=2)`` trained by main.py's step (Adam
    lr=0.01, MSELoss) on 8x8 inputs and 16x16 targets."""
    sr = import_program(torch, "examples.super_resolution_model")
    torch.manual_seed(0)
    model = sr.Net(upscale_factor=2)
    out = _start(torch, model, weights)
    rng = np.random.default_rng(5)
    images = rng.random((STEPS, 2, 1, 8, 8)).astype(np.float32)
    targets = rng.random((STEPS, 2, 1, 16, 16)).astype(np.float32)
    criterion = torch.nn.MSELoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)

    def step(input, target):  # noqa: A002 - super_resolution/main.py, train(): one batch
        optimizer.zero_grad()
        loss = criterion(model(input), target)
        loss.backward()
        optimizer.step()
        return loss

    run = _compile(torch, step) if compiled else step
    out["losses"] = [run(torch.tensor(x), torch.tensor(y)).item()
                     for x, y in zip(images, targets)]
    if compiled:
        out["compiled"] = run
    return out


def fast_neural_style(torch: Any, weights: Any = None, compiled: bool = False) -> dict:
    """fast_neural_style: its ``TransformerNet`` trained towards a fixed 16x16 image
    with neural_style.py's Adam(lr=1e-3), a pixel MSE in place of the VGG loss."""
    tn = import_program(torch, "examples.transformer_net")
    torch.manual_seed(0)
    model = tn.TransformerNet()
    out = _start(torch, model, weights)
    rng = np.random.default_rng(6)
    images = (rng.random((STEPS, 1, 3, 16, 16)) * 255).astype(np.float32)
    style = torch.tensor(rng.random((1, 3, 16, 16)).astype(np.float32) * 255)
    mse_loss = torch.nn.MSELoss()
    optimizer = torch.optim.Adam(model.parameters(), 1e-3)

    def step(x):  # neural_style.py, train(): one batch, with its content weight 1e5
        optimizer.zero_grad()
        y = model(x)
        loss = 1e5 * mse_loss(y / 255, style / 255) / 1e5
        loss.backward()
        optimizer.step()
        return loss

    run = _compile(torch, step) if compiled else step
    out["losses"] = [run(torch.tensor(x)).item() for x in images]
    if compiled:
        out["compiled"] = run
    return out


def forward_forward(torch: Any, weights: Any = None, compiled: bool = False) -> dict:
    """mnist_forward_forward: its ``Net([24, 16, 16])`` of ``Layer``s (an ``nn.Linear``
    subclass with its own Adam and ``train`` loop), trained by ``Net.train`` on positive
    and negative data built by the program's ``overlay_y_on_x`` (the negative labels are
    the program's ``get_y_neg`` rule, drawn with NumPy here: the two libraries' random
    streams differ); then ``Net.predict``. Compiled, each layer's ``forward`` is
    ``torch.compile``d."""
    ff = import_program(torch, "examples.mnist_forward_forward_main")
    ff.args = argparse.Namespace(lr=0.03, threshold=2.0, epochs=STEPS, log_interval=1)
    ff.device = torch.device("cpu")
    torch.manual_seed(0)
    net = ff.Net([24, 16, 16])
    state = {f"{i}.{k}": v for i, layer in enumerate(net.layers)
             for k, v in layer.state_dict().items()}
    out: dict = {"weights": state_arrays(state)} if weights is None else {}
    if weights is not None:
        for i, layer in enumerate(net.layers):
            load_arrays(torch, layer, {k.partition(".")[2]: np.asarray(weights[k])
                                       for k in weights.files if k.startswith(f"{i}.")})
    rng = np.random.default_rng(7)
    x = torch.tensor(rng.standard_normal((8, 24)).astype(np.float32))
    y = torch.tensor(rng.integers(0, 10, size=8))
    y_neg = torch.tensor((y.numpy() + rng.integers(1, 10, size=8)) % 10)
    x_pos, x_neg = ff.overlay_y_on_x(x, y), ff.overlay_y_on_x(x, y_neg)
    losses: list[float] = []
    printed = []
    ff.print = lambda *a: printed.append(a)
    if compiled:
        for layer in net.layers:
            layer.forward = _compile(torch, layer.forward)
    net.train(x_pos, x_neg)
    losses = [float(a[1]) for a in printed if a and a[0] == "Loss: "]
    losses.append(float(net.predict(x).eq(y).float().mean().item()))
    out["losses"] = losses
    if compiled:
        out["compiled"] = [layer.forward for layer in net.layers]
    return out
