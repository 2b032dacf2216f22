"""The program runs the tests compare: each runs a vendored program (or its training step)
on small synthetic data with ``torch`` bound to real torch (to record goldens) or to
dualgraph, and returns its losses. With ``weights=None`` a run first returns the model's
initial weights (the recorder saves torch's); given weights, they are loaded first.

Dropout probabilities are set to 0 in the configurations (the programs' own config
fields), so losses are deterministic: the two libraries' random streams differ.
"""

from __future__ import annotations

import argparse
import math
from typing import Any

import numpy as np

from .harness import (
    MNIST,
    Sequence,
    import_program,
    load_arrays,
    state_arrays,
    token_batches,
)

STEPS = 10


def _compile(torch: Any, fn: Any) -> Any:
    return torch.compile(fn, fullgraph=True)


# ------------------------------------------------------------------------ minGPT


def mingpt(torch: Any, weights: Any = None, compiled: bool = False) -> dict:
    """minGPT's GPT trained by its own ``Trainer.run`` (eager), or by the trainer's step
    (the body of ``Trainer.run``'s loop) as one compiled function."""
    model_mod, trainer_mod = import_program(torch, "mingpt.model", "mingpt.trainer")
    cfg = model_mod.GPT.get_default_config()
    cfg.model_type = None
    cfg.n_layer, cfg.n_head, cfg.n_embd = 2, 2, 16
    cfg.vocab_size, cfg.block_size = 11, 8
    cfg.embd_pdrop = cfg.resid_pdrop = cfg.attn_pdrop = 0.0
    torch.manual_seed(0)
    model = model_mod.GPT(cfg)
    out: dict = {}
    if weights is None:
        out["weights"] = state_arrays(model.state_dict())
    else:
        load_arrays(torch, model, weights)
    tcfg = trainer_mod.Trainer.get_default_config()
    tcfg.max_iters, tcfg.batch_size, tcfg.learning_rate, tcfg.num_workers = STEPS, 4, 1e-2, 0
    batches = token_batches(0, STEPS, 4, 8, 11)
    losses: list[float] = []
    if not compiled:
        samples = [(torch.tensor(x[i]), torch.tensor(y[i])) for x, y in batches
                   for i in range(len(x))]
        trainer = trainer_mod.Trainer(tcfg, model, Sequence(torch, samples))
        trainer.set_callback("on_batch_end", lambda tr: losses.append(tr.loss.item()))
        trainer.run()
    else:
        optimizer = model.configure_optimizers(tcfg)

        def step(x, y):  # mingpt/trainer.py, Trainer.run: one iteration of its loop
            logits, loss = model(x, y)
            model.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), tcfg.grad_norm_clip)
            optimizer.step()
            return loss

        run = _compile(torch, step)
        model.train()
        losses = [run(torch.tensor(x), torch.tensor(y)).item() for x, y in batches]
        out["compiled"] = run
    out["losses"] = losses
    return out


# ----------------------------------------------------------------------- nanoGPT

# train.py's learning-rate schedule, with small iteration counts (train.py, get_lr).
LEARNING_RATE, WARMUP_ITERS, LR_DECAY_ITERS, MIN_LR = 1e-2, 3, 10, 1e-3


def _nanogpt_lr(it: int) -> float:
    if it < WARMUP_ITERS:
        return LEARNING_RATE * (it + 1) / (WARMUP_ITERS + 1)
    if it > LR_DECAY_ITERS:
        return MIN_LR
    ratio = (it - WARMUP_ITERS) / (LR_DECAY_ITERS - WARMUP_ITERS)
    coeff = 0.5 * (1.0 + math.cos(math.pi * ratio))
    return MIN_LR + coeff * (LEARNING_RATE - MIN_LR)


def nanogpt(torch: Any, weights: Any = None, compiled: bool = False) -> dict:
    """nanoGPT's model.py trained by train.py's step: the learning rate set on every
    parameter group, two micro-steps of gradient accumulation, ``clip_grad_norm_``,
    ``optimizer.step()``, ``zero_grad(set_to_none=True)``. train.py is a script that reads
    its data from disk, so its loop body is reproduced here (on the CPU its GradScaler
    is disabled and its autocast context is a nullcontext, so both are left out)."""
    m = import_program(torch, "nanogpt.model")
    conf = m.GPTConfig(block_size=8, vocab_size=11, n_layer=2, n_head=2, n_embd=16,
                       dropout=0.0, bias=True)
    torch.manual_seed(0)
    model = m.GPT(conf)
    out: dict = {}
    if weights is None:
        out["weights"] = state_arrays(model.state_dict())
    else:
        load_arrays(torch, model, weights)
    optimizer = model.configure_optimizers(1e-1, LEARNING_RATE, (0.9, 0.95), "cpu")
    accumulation, grad_clip = 2, 1.0
    batches = token_batches(1, STEPS * accumulation, 4, 8, 11)

    def step(xs, ys):  # xs, ys: the micro-batches stacked, (accumulation, batch, block)
        for micro_step in range(accumulation):
            logits, loss = model(xs[micro_step], ys[micro_step])
            loss = loss / accumulation
            loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss * accumulation

    run = _compile(torch, step) if compiled else step
    model.train()
    losses = []
    for it in range(STEPS):
        for param_group in optimizer.param_groups:
            param_group["lr"] = _nanogpt_lr(it)
        pair = batches[it * accumulation:(it + 1) * accumulation]
        xs = torch.tensor(np.stack([x for x, _ in pair]))
        ys = torch.tensor(np.stack([y for _, y in pair]))
        losses.append(run(xs, ys).item())
    out["losses"] = losses
    if compiled:
        out["compiled"] = run
    return out


# ------------------------------------------------------------------ pytorch/examples


def _images(seed: int, n: int, sigmoid: bool = False) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 1, 28, 28)).astype(np.float32)
    if sigmoid:
        x = 1.0 / (1.0 + np.exp(-x))
    return x, rng.integers(0, 10, size=n)


class _Recorder:
    """Stands in for a module (a program's ``F``) and records ``float`` of what one of its
    functions returns, outside compiled code."""

    def __init__(self, module: Any, name: str, sink: list) -> None:
        self._module, self._name, self._sink = module, name, sink

    def __getattr__(self, attr: str) -> Any:
        fn = getattr(self._module, attr)
        if attr != self._name:
            return fn

        def recorded(*args: Any, **kwargs: Any) -> Any:
            value = fn(*args, **kwargs)
            self._sink.append(value.item())
            return value

        return recorded


def mnist(torch: Any, weights: Any = None, compiled: bool = False) -> dict:
    """pytorch/examples mnist: its ``Net`` trained by its own ``train()`` for two epochs of
    five batches, with the optimizer and schedule its ``main()`` makes (Adadelta,
    lr=1.0, StepLR(step_size=1, gamma=0.7)); compiled, the model is ``torch.compile``d."""
    return _mnist_training(torch, "examples.mnist_main", 2, 1.0, weights, compiled)


def _mnist_training(torch: Any, program: str, seed: int, lr: float, weights: Any,
                    compiled: bool) -> dict:
    """The pytorch/examples MNIST programs' own ``train()``: two epochs of five batches
    of synthetic images (drawn with ``seed``), Adadelta(``lr``) and StepLR(gamma=0.7) as
    their ``main()`` makes them, dropout off (torch's and dualgraph's random streams
    differ); compiled, the model is ``torch.compile``d."""
    mn = import_program(torch, program)
    torch.manual_seed(0)
    model = mn.Net()
    model.dropout1.p = model.dropout2.p = 0.0
    out: dict = {}
    if weights is None:
        out["weights"] = state_arrays(model.state_dict())
    else:
        load_arrays(torch, model, weights)
    x, y = _images(seed, 20)
    loader = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(torch.tensor(x), torch.tensor(y)), batch_size=4)
    optimizer = torch.optim.Adadelta(model.parameters(), lr=lr)
    scheduler = mn.StepLR(optimizer, step_size=1, gamma=0.7)
    losses: list[float] = []
    mn.F = _Recorder(mn.F, "nll_loss", losses)
    net = _compile(torch, model) if compiled else model
    args = argparse.Namespace(log_interval=10 ** 6, dry_run=False)
    for epoch in (1, 2):
        mn.train(args, net, torch.device("cpu"), loader, optimizer, epoch)
        scheduler.step()
    out["losses"] = losses
    if compiled:
        out["compiled"] = net
    return out


class Replay:
    """Stands in for a program's ``torch`` and serves ``randn_like`` from numbers recorded
    from torch, through one tensor refilled before each step (see the harness docstring):
    `next_step` loads the next draw, and runs when the program calls
    ``optimizer.zero_grad()`` (after the previous step's backward, which reads the noise).
    With ``draws=None`` it draws with the real ``randn_like`` and records the draws."""

    def __init__(self, torch: Any, draws: Any) -> None:
        self._torch, self.draws, self.recorded = torch, draws, []
        self.buffer = None if draws is None else torch.tensor(np.asarray(draws[0]))
        self.step = -1

    def __getattr__(self, name: str) -> Any:
        return getattr(self._torch, name)

    def randn_like(self, x: Any) -> Any:
        if self.draws is None:
            eps = self._torch.randn_like(x)
            self.recorded.append(eps.detach().numpy().copy())
            return eps
        return self.buffer

    def next_step(self) -> None:
        self.step += 1
        if self.draws is not None and self.step < len(self.draws):
            with self._torch.no_grad():
                self.buffer.copy_(self._torch.tensor(np.asarray(self.draws[self.step])))


class _StepHook:
    """Stands in for the program's optimizer: ``zero_grad`` first advances `Replay`."""

    def __init__(self, optimizer: Any, replay: Replay) -> None:
        self._optimizer, self._replay = optimizer, replay

    def __getattr__(self, name: str) -> Any:
        return getattr(self._optimizer, name)

    def zero_grad(self, *args: Any, **kwargs: Any) -> None:
        self._replay.next_step()
        self._optimizer.zero_grad(*args, **kwargs)


def vae(torch: Any, weights: Any = None, compiled: bool = False, draws: Any = None) -> dict:
    """pytorch/examples vae: the script imported as it is (``--batch-size 4``; its
    loaders read the stub MNIST, a `Sequence` of 40 synthetic images), its model given
    torch's initial weights, then its own ``train(1)``: ten steps of Adam. The
    reparameterisation noise is torch's (`Replay`)."""
    x, y = _images(3, 40, sigmoid=True)
    MNIST["dataset"] = Sequence(torch, [(torch.tensor(x[i]), int(y[i])) for i in range(40)])
    v = import_program(torch, "examples.vae_main",
                       argv=["--batch-size", "4", "--epochs", "1", "--log-interval", "1000"])
    out: dict = {}
    if weights is None:
        out["weights"] = state_arrays(v.model.state_dict())
    else:
        load_arrays(torch, v.model, weights)
    replay = Replay(torch, draws)
    v.torch = replay
    v.optimizer = _StepHook(v.optimizer, replay)
    losses: list[float] = []
    loss_function = v.loss_function

    def recorded_loss(*args: Any) -> Any:
        loss = loss_function(*args)
        losses.append(loss.item())
        return loss

    v.loss_function = recorded_loss
    if compiled:
        v.model = out["compiled"] = _compile(torch, v.model)
    v.train(1)
    out["losses"] = losses
    out["draws"] = replay.recorded
    return out


# ---------------------------------------------------------------------- regression


class _RegressionTorch:
    """The ``torch`` the regression script imports: the bound library, except that
    ``randn`` replays torch's recorded draws (the target polynomial and every batch) and
    ``nn.Linear`` starts from torch's recorded weights (compiled: it is ``dg.compile``d);
    with nothing recorded yet it draws and records. The script builds and trains its model
    at import time, so these are the only places to give it torch's numbers."""

    def __init__(self, torch: Any, draws: Any, weights: Any, compiled: bool) -> None:
        self._torch, self._draws, self.recorded = torch, draws, []
        self.losses: list[float] = []
        self.compiled = None
        parent = self

        class _NN:
            functional = _Recorder(torch.nn.functional, "smooth_l1_loss", self.losses)

            def __getattr__(self, name: str) -> Any:
                return getattr(torch.nn, name)

            @staticmethod
            def Linear(*args: Any, **kwargs: Any) -> Any:  # noqa: N802 - torch's name
                layer = torch.nn.Linear(*args, **kwargs)
                if weights is None:
                    parent.weights = state_arrays(layer.state_dict())
                else:
                    load_arrays(torch, layer, weights)
                if compiled:
                    layer = parent.compiled = _compile(torch, layer)
                return layer

        self.nn = _NN()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._torch, name)

    def randn(self, *shape: Any) -> Any:
        if self._draws is None:
            x = self._torch.randn(*shape)
            self.recorded.append(x.numpy().copy())
            return x
        self._next = getattr(self, "_next", 0) + 1
        return self._torch.tensor(np.asarray(self._draws[self._next - 1]))


def regression(torch: Any, weights: Any = None, compiled: bool = False, draws: Any = None,
               ) -> dict:
    """pytorch/examples regression, run as the script it is (it fits a random degree-4
    polynomial until the loss is below 1e-3 and prints the result)."""
    import contextlib
    import importlib
    import io
    import sys

    from .harness import bound_torch

    proxy = _RegressionTorch(torch, draws, weights, compiled)
    printed = io.StringIO()
    with bound_torch(torch, ("examples",)):
        sys.modules["torch"] = proxy  # type: ignore[assignment]
        with contextlib.redirect_stdout(printed):
            importlib.import_module("examples.regression_main")
    out = {"losses": proxy.losses, "printed": printed.getvalue(), "draws": proxy.recorded,
           "compiled": proxy.compiled}
    if weights is None:
        out["weights"] = proxy.weights
    return out


# ------------------------------------------------------------- nanoGPT's train.py


def nanogpt_train(torch: Any, workdir: Any, compile: bool = False) -> str:  # noqa: A002
    """nanoGPT's train.py run as the script it is, in ``workdir`` (which gets its
    configurator.py, a tiny dataset ``data/tiny/{train,val}.bin`` and ``meta.pkl``), with
    command-line overrides for a tiny CPU run of 10 iterations that evaluates and saves a
    checkpoint every 5. Returns what it printed."""
    import contextlib
    import io
    import os
    import pickle
    import runpy
    import shutil
    import sys
    from pathlib import Path

    from .harness import VENDOR, bound_torch

    work = Path(workdir)
    shutil.copy(VENDOR / "nanogpt" / "configurator.py", work / "configurator.py")
    data = work / "data" / "tiny"
    data.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(4)
    for split in ("train", "val"):
        rng.integers(0, 11, size=2000).astype(np.uint16).tofile(data / f"{split}.bin")
    with open(data / "meta.pkl", "wb") as f:
        pickle.dump({"vocab_size": 11}, f)
    argv = ["train.py", "--dataset=tiny", "--device=cpu", f"--compile={compile}",
            "--max_iters=10", "--eval_interval=5", "--eval_iters=2", "--log_interval=1",
            "--block_size=8", "--batch_size=4", "--n_layer=2", "--n_head=2", "--n_embd=16",
            "--dropout=0.0", "--bias=True", "--gradient_accumulation_steps=2",
            "--learning_rate=0.01", "--warmup_iters=2", "--lr_decay_iters=10",
            "--min_lr=0.001"]
    printed = io.StringIO()
    old_cwd, old_argv = os.getcwd(), sys.argv
    sys.path.insert(0, str(VENDOR / "nanogpt"))
    try:
        os.chdir(work)
        sys.argv = argv
        with bound_torch(torch, ("model",)), contextlib.redirect_stdout(printed):
            runpy.run_path(str(VENDOR / "nanogpt" / "train.py"), run_name="__main__")
    finally:
        os.chdir(old_cwd)
        sys.argv = old_argv
        sys.path.remove(str(VENDOR / "nanogpt"))
    return printed.getvalue()


# -------------------------------------------------------------------------- DCGAN

# The DCGAN example's command line for a tiny CPU run: its fake dataset (the stub's
# `Sequence` of 40 synthetic 64x64 images, the size its layers are built for), batches of
# 4 (ten steps in its one epoch), small latent and filter counts, no worker processes.
def _dcgan_argv(niter: int) -> list[str]:
    return ["--dataset", "fake", "--batchSize", "4", "--nz", "8", "--ngf", "4", "--ndf", "4",
            "--niter", str(niter), "--workers", "0", "--manualSeed", "1"]


DCGAN_IMAGES = 40


class _DcganTorch:
    """The ``torch`` the DCGAN script imports: the bound library, except that ``randn``
    replays torch's recorded draws (its fixed noise, then each step's noise; with nothing
    recorded it draws and records) and ``nn.BCELoss`` records every loss it returns."""

    def __init__(self, torch: Any, draws: Any) -> None:
        self._torch, self._draws, self.recorded = torch, draws, []
        self.losses: list[float] = []
        losses = self.losses

        class _NN:
            def __getattr__(self, name: str) -> Any:
                return getattr(torch.nn, name)

            @staticmethod
            def BCELoss(*args: Any, **kwargs: Any) -> Any:  # noqa: N802 - torch's name
                criterion = torch.nn.BCELoss(*args, **kwargs)

                def recorded(output: Any, target: Any) -> Any:
                    loss = criterion(output, target)
                    losses.append(loss.item())
                    return loss

                return recorded

        self.nn = _NN()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._torch, name)

    def randn(self, *shape: Any, **kwargs: Any) -> Any:
        if self._draws is None:
            x = self._torch.randn(*shape, **kwargs)
            self.recorded.append(x.numpy().copy())
            return x
        self._next = getattr(self, "_next", 0) + 1
        return self._torch.tensor(np.asarray(self._draws[self._next - 1]))


def _dcgan_images() -> np.ndarray:
    rng = np.random.default_rng(5)
    return np.tanh(rng.standard_normal((DCGAN_IMAGES, 3, 64, 64))).astype(np.float32)


def _dcgan_import(torch: Any, proxy: Any, workdir: Any, argv: list) -> Any:
    """Run the DCGAN script (it trains at import) with ``torch`` bound to ``proxy``."""
    import contextlib
    import importlib
    import io
    import sys

    from .harness import FAKE, bound_torch

    if torch.__name__ == "torch":
        # torch's optimizers import torch._dynamo lazily, which must not see the proxy.
        importlib.import_module("torch._dynamo")
    x = _dcgan_images()
    FAKE["dataset"] = Sequence(torch, [(torch.tensor(x[i]), i % 10) for i in range(len(x))])
    old_argv = sys.argv
    sys.argv = ["main.py", *argv, "--outf", str(workdir)]
    try:
        with bound_torch(torch, ("examples",)):
            sys.modules["torch"] = proxy  # type: ignore[assignment]
            with contextlib.redirect_stdout(io.StringIO()):
                return importlib.import_module("examples.dcgan_main")
    finally:
        sys.argv = old_argv


def dcgan(torch: Any, weights: Any = None, compiled: bool = False, draws: Any = None) -> dict:
    """pytorch/examples dcgan, run as the script it is for one epoch of ten steps: both
    networks start from torch's initial weights through the script's own ``--netG`` /
    ``--netD`` options (files written with the bound library's ``save``), its noise is
    torch's (`_DcganTorch`). The losses are each step's ``errD_real``, ``errD_fake`` and
    ``errG``. Compiled, the script is imported with ``--niter 0`` (it builds its networks,
    criterion and optimizers and trains nothing) and the body of its training loop, as a
    function of the real batch and the noise, runs under ``torch.compile``."""
    import tempfile
    from pathlib import Path

    out: dict = {"losses": []}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        if weights is None:
            proxy = _DcganTorch(torch, None)
            d = _dcgan_import(torch, proxy, work, _dcgan_argv(0))
            out["weights"] = {f"G.{k}": v for k, v in state_arrays(d.netG.state_dict()).items()}
            out["weights"].update({f"D.{k}": v
                                   for k, v in state_arrays(d.netD.state_dict()).items()})
        else:
            out["weights"] = {k: np.asarray(weights[k]) for k in weights.files
                              if not k.startswith("__")}
        for net in ("G", "D"):
            torch.save({k[2:]: torch.tensor(v) for k, v in out["weights"].items()
                        if k.startswith(net + ".")}, work / f"net{net}.pth")
        nets = ["--netG", str(work / "netG.pth"), "--netD", str(work / "netD.pth")]
        proxy = _DcganTorch(torch, draws)
        if not compiled:
            _dcgan_import(torch, proxy, work, _dcgan_argv(1) + nets)
            out["losses"], out["draws"] = proxy.losses, proxy.recorded
            return out
        d = _dcgan_import(torch, proxy, work, _dcgan_argv(0) + nets)
        # The script's criterion, unwrapped: the recording one reads .item() of each loss.
        netD, netG, criterion = d.netD, d.netG, torch.nn.BCELoss()
        optimizerD, optimizerG, device = d.optimizerD, d.optimizerG, d.device
        real_label, fake_label = d.real_label, d.fake_label

        def step(real_cpu, noise):  # dcgan/main.py: the body of its training loop
            netD.zero_grad()
            batch_size = real_cpu.size(0)
            label = torch.full((batch_size,), real_label,
                               dtype=real_cpu.dtype, device=device)

            output = netD(real_cpu)
            errD_real = criterion(output, label)
            errD_real.backward()

            fake = netG(noise)
            label.fill_(fake_label)
            output = netD(fake.detach())
            errD_fake = criterion(output, label)
            errD_fake.backward()
            optimizerD.step()

            netG.zero_grad()
            label.fill_(real_label)
            output = netD(fake)
            errG = criterion(output, label)
            errG.backward()
            optimizerG.step()
            return errD_real, errD_fake, errG

        run = out["compiled"] = _compile(torch, step)
        images = _dcgan_images()
        for i in range(DCGAN_IMAGES // 4):
            noise = torch.tensor(np.asarray(draws[1 + i]))
            for loss in run(torch.tensor(images[4 * i:4 * i + 4]), noise):
                out["losses"].append(loss.item())
    return out


# ------------------------------------------------------------------------ makemore

MAKEMORE_TYPES = ("bigram", "mlp", "rnn", "gru", "bow", "transformer")
# Short words, so that the recurrent models' unrolled loops are short (block size 6).
MAKEMORE_WORDS = ["emma", "olivia", "ava", "mia", "luna", "ella", "zoe", "ivy", "nora", "lily",
                  "aria", "mila", "leo", "max", "noah", "liam", "jack", "owen", "eli", "ezra"]


def _makemore_module(torch: Any) -> Any:
    if torch.__name__ == "torch":
        import importlib
        import sys

        try:
            importlib.import_module("torch.utils.tensorboard")
        except ImportError:  # torch's writer needs the tensorboard package; unused here
            import types

            stub = types.ModuleType("torch.utils.tensorboard")
            stub.SummaryWriter = None
            sys.modules["torch.utils.tensorboard"] = stub
    return import_program(torch, "makemore.makemore")


def makemore(torch: Any, weights: Any = None, compiled: bool = False,
             model_type: str = "transformer") -> dict:
    """Karpathy's makemore: its ``CharDataset`` over a fixed word list, the model
    ``--type model_type`` builds (tiny sizes), its AdamW, and the body of its training
    loop (``model(X, Y)``, ``zero_grad(set_to_none=True)``, ``backward``, ``step``) for ten
    batches of four words in order (the script samples batches with replacement)."""
    mm = _makemore_module(torch)
    chars = sorted(set("".join(MAKEMORE_WORDS)))
    longest = max(len(w) for w in MAKEMORE_WORDS)
    dataset = mm.CharDataset(MAKEMORE_WORDS, chars, longest)
    config = mm.ModelConfig(vocab_size=dataset.get_vocab_size(),
                            block_size=dataset.get_output_length(), n_layer=1, n_head=2,
                            n_embd=16, n_embd2=16)
    torch.manual_seed(0)
    model = {"transformer": lambda: mm.Transformer(config), "bigram": lambda: mm.Bigram(config),
             "mlp": lambda: mm.MLP(config), "rnn": lambda: mm.RNN(config, cell_type="rnn"),
             "gru": lambda: mm.RNN(config, cell_type="gru"),
             "bow": lambda: mm.BoW(config)}[model_type]()
    out: dict = {}
    if weights is None:
        out["weights"] = state_arrays(model.state_dict())
    else:
        load_arrays(torch, model, weights)
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-3, weight_decay=0.01,
                                  betas=(0.9, 0.99), eps=1e-8)

    def step(X, Y):  # makemore.py: the body of its training loop
        logits, loss = model(X, Y)
        model.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        return loss

    run = _compile(torch, step) if compiled else step
    loader = torch.utils.data.DataLoader(dataset, batch_size=4)
    batches = [batch for _, batch in zip(range(STEPS // 2), loader)] * 2
    out["losses"] = [run(*batch).item() for batch in batches]
    if compiled:
        out["compiled"] = run
    return out


def makemore_script(torch: Any, workdir: Any, model_type: str, steps: int = 11) -> str:
    """makemore.py run as the script it is (its argument parser, its dataset split, its
    infinite loader over ``RandomSampler(replacement=True)``, its TensorBoard writer) in
    ``workdir`` with a small word list; returns what it printed."""
    import contextlib
    import io
    import runpy
    import sys
    from pathlib import Path

    from .harness import VENDOR, bound_torch

    work = Path(workdir)
    (work / "names.txt").write_text("\n".join(MAKEMORE_WORDS * 3) + "\n")
    argv = ["makemore.py", "-i", str(work / "names.txt"), "-o", str(work / "out"),
            "--type", model_type, "--max-steps", str(steps), "--n-layer", "1",
            "--n-head", "2", "--n-embd", "16", "--n-embd2", "16", "-b", "4"]
    printed = io.StringIO()
    old_argv = sys.argv
    try:
        sys.argv = argv
        with bound_torch(torch, ("makemore",)), contextlib.redirect_stdout(printed):
            runpy.run_path(str(VENDOR / "makemore" / "makemore.py"), run_name="__main__")
    finally:
        sys.argv = old_argv
    return printed.getvalue()


def mnist_rnn(torch: Any, weights: Any = None, compiled: bool = False) -> dict:
    """pytorch/examples mnist_rnn: its LSTM ``Net`` (BatchNorm1d, Dropout2d on (N, C)
    features) trained by its own ``train()`` for two epochs of five batches with its
    ``main()``'s Adadelta(lr=0.1) and StepLR(gamma=0.7); dropout off (torch's and
    dualgraph's random streams differ)."""
    return _mnist_training(torch, "examples.mnist_rnn_main", 3, 0.1, weights, compiled)


class _Criterion:
    """A loss module that records ``float`` of each loss it computes."""

    def __init__(self, criterion: Any, sink: list) -> None:
        self._criterion, self._sink = criterion, sink

    def __call__(self, *args: Any) -> Any:
        value = self._criterion(*args)
        self._sink.append(value.item())
        return value


def _graph_training(torch: Any, program: str, make_model: Any, seed: int, adjacency: Any,
                    lr: float, weights: Any, compiled: bool) -> dict:
    """Train a pytorch/examples graph model on a random 12-node graph with its own
    ``train_iter`` (a training loss, then evaluation on the training and validation
    masks: three losses a step) and Adam(lr, weight_decay=5e-4). ``adjacency(rng)`` makes
    the graph's adjacency tensor; compiled, the model is ``torch.compile``d (traced once
    for training and once for evaluation under ``no_grad``)."""
    module = import_program(torch, program)
    torch.manual_seed(0)
    model = make_model(module)
    out: dict = {}
    if weights is None:
        out["weights"] = state_arrays(model.state_dict())
    else:
        load_arrays(torch, model, weights)
    rng = np.random.default_rng(seed)
    features = torch.tensor(rng.standard_normal((12, 10)).astype(np.float32))
    adj = adjacency(rng)
    labels = torch.tensor(rng.integers(0, 3, size=12))
    mask_train, mask_val = torch.arange(0, 8), torch.arange(8, 12)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=5e-4)
    losses: list[float] = []
    criterion = _Criterion(torch.nn.NLLLoss(), losses)
    net = _compile(torch, model) if compiled else model
    for epoch in range(1, STEPS + 1):
        module.train_iter(epoch, net, optimizer, criterion, (features, adj), labels,
                          mask_train, mask_val, print_every=10 ** 6)
    out["losses"] = losses
    if compiled:
        out["compiled"] = net
    return out


def gat(torch: Any, weights: Any = None, compiled: bool = False) -> dict:
    """pytorch/examples gat: its two-layer, multi-head ``GAT`` on a random 12-node graph
    (a 0/1 adjacency with self-loops), trained by its own ``train_iter`` with its
    ``main()``'s Adam(lr=0.005, weight_decay=5e-4); attention dropout off."""

    def adjacency(rng: Any) -> Any:
        a = (np.eye(12) + (rng.random((12, 12)) < 0.3)).clip(0, 1)
        return torch.tensor(a.astype(np.int64))

    return _graph_training(
        torch, "examples.gat_main",
        lambda ga: ga.GAT(in_features=10, n_hidden=8, n_heads=2, num_classes=3, dropout=0.0),
        4, adjacency, 0.005, weights, compiled)


def gcn(torch: Any, weights: Any = None, compiled: bool = False) -> dict:
    """pytorch/examples gcn: its two-layer ``GCN`` (``torch.Tensor(n_in, n_out)`` then
    Xavier init, ``torch.spmm`` of a dense normalised adjacency) on a random 12-node
    graph, trained by its own ``train_iter`` with Adam(lr=0.01, weight_decay=5e-4);
    dropout off."""

    def adjacency(rng: Any) -> Any:
        a = (np.eye(12) + (rng.random((12, 12)) < 0.3)).clip(0, 1)
        a = np.maximum(a, a.T)
        d = 1.0 / np.sqrt(a.sum(1))
        return torch.tensor((a * d[:, None] * d[None, :]).astype(np.float32))

    return _graph_training(
        torch, "examples.gcn_main",
        lambda gc: gc.GCN(10, 8, 3, use_bias=True, dropout_p=0.0),
        5, adjacency, 0.01, weights, compiled)
