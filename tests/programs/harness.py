"""Run vendored PyTorch programs unchanged with ``torch`` bound to a chosen module.

`bound_torch` puts a module under the name ``torch`` (and each of its submodules under
``torch.<name>``) in ``sys.modules`` while a program is imported, so the program's own
``import torch`` / ``import torch.nn as nn`` / ``from torch.utils.data import ...`` lines
find dualgraph. It also puts the vendored sources on ``sys.path`` and stubs
``torchvision`` (datasets the tests replace with synthetic data). The same functions run
the programs under real torch to record the goldens (tests/programs/record_goldens.py),
so both sides execute the same program text and the same harness code.

Two test devices, both documented where used:
- `Sequence` datasets ignore the index they are asked for and return their samples in a
  fixed order, so a program that shuffles (``DataLoader(shuffle=True)``, minGPT's
  ``RandomSampler``) sees the same batches under torch and dualgraph, whose random
  streams differ.
- `Replay` hands out random numbers recorded from torch (the VAE's ``randn_like``), through
  one tensor whose value changes between steps, so a compiled step reads the next draw
  as an input instead of baking it in.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import json
import pkgutil
import sys
import types
import warnings
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
VENDOR = HERE / "vendor"
GOLDENS = HERE / "goldens"

# Submodules a program may import as torch.<name>: imported before binding so that
# ``import torch.X`` finds them in sys.modules.
_SUBMODULES = ("nn", "nn.functional", "nn.init", "nn.utils", "nn.utils.rnn", "nn.parallel",
               "optim", "optim.lr_scheduler", "utils", "utils.data", "utils.data.dataloader",
               "utils.data.dataset", "utils.data.sampler", "utils.tensorboard", "cuda",
               "cuda.amp", "backends", "backends.cudnn", "backends.cuda", "backends.mps",
               "autograd", "accelerator", "amp", "distributed", "serialization",
               "utils.checkpoint", "func", "compiler", "multiprocessing", "random",
               "optim.swa_utils", "distributions")


# What the stub ``torchvision.datasets.MNIST(...)`` returns: set by a runner before it
# imports a program that builds its loaders at import time (the VAE example).
MNIST: dict[str, Any] = {"dataset": None}
# What the stub ``torchvision.datasets.FakeData(...)`` returns (the DCGAN example's
# ``--dataset fake``).
FAKE: dict[str, Any] = {"dataset": None}


def _torchvision() -> dict[str, types.ModuleType]:
    """A stand-in ``torchvision``: the tests build their own datasets, so only the names
    the programs import at module level exist."""
    tv = types.ModuleType("torchvision")
    datasets = types.ModuleType("torchvision.datasets")
    transforms = types.ModuleType("torchvision.transforms")
    utils = types.ModuleType("torchvision.utils")
    datasets.MNIST = lambda *a, **k: MNIST["dataset"]
    datasets.FakeData = lambda *a, **k: FAKE["dataset"]
    transforms.Compose = lambda steps: None
    transforms.ToTensor = lambda: None
    transforms.Normalize = lambda *a, **k: None
    transforms.Lambda = lambda fn: None
    utils.save_image = lambda *a, **k: None
    tv.datasets, tv.transforms, tv.utils = datasets, transforms, utils
    # pytorch/examples gat imports requests (to download Cora) at module level; the tests
    # build their own graph, and requests need not be installed.
    requests = types.ModuleType("torchvision.requests")
    return {"torchvision": tv, "torchvision.datasets": datasets,
            "torchvision.transforms": transforms, "torchvision.utils": utils,
            "requests": requests}


@contextlib.contextmanager
def bound_torch(module: Any, vendored: tuple[str, ...] = ()) -> Iterator[None]:
    """While the block runs: ``sys.modules["torch"]`` is ``module`` (dualgraph or torch),
    ``torchvision`` is a stub, and the vendored top-level modules ``vendored`` (e.g.
    ``"mingpt"``) are imported afresh from tests/programs/vendor."""
    base = module.__name__
    if base != "torch":
        for sub in _SUBMODULES:
            with contextlib.suppress(ImportError):
                importlib.import_module(f"{base}.{sub}")
    saved = {k: v for k, v in list(sys.modules.items())
             if k == "torch" or k.startswith("torch.") or k.startswith("torchvision")
             or k == "requests"
             or any(k == v_ or k.startswith(v_ + ".") for v_ in vendored)}
    for k in saved:
        del sys.modules[k]
    if base != "torch":
        for name, mod in list(sys.modules.items()):
            if name == base or name.startswith(base + "."):
                sys.modules["torch" + name[len(base):]] = mod
    else:
        sys.modules.update({k: v for k, v in saved.items()
                            if k == "torch" or k.startswith("torch.")})
    sys.modules.update(_torchvision())
    sys.path.insert(0, str(VENDOR))
    try:
        yield
    finally:
        sys.path.remove(str(VENDOR))
        for k in [k for k in list(sys.modules) if k == "torch" or k.startswith("torch.")
                  or k.startswith("torchvision") or k == "requests"
                  or any(k == v_ or k.startswith(v_ + ".") for v_ in vendored)]:
            del sys.modules[k]
        sys.modules.update(saved)


def import_program(module: Any, *names: str, argv: list[str] | None = None) -> Any:
    """Import vendored modules ``names`` (``"mingpt.model"``, ``"examples.vae_main"``)
    with ``torch`` bound to ``module``, in one binding (so they share their imports);
    ``argv`` is what a script's argparse sees. One name gives one module, else a list."""
    tops = tuple({n.split(".")[0] for n in names})
    old_argv = sys.argv
    sys.argv = ["program"] + list(argv or [])
    try:
        with bound_torch(module, tops):
            mods = [importlib.import_module(n) for n in names]
    finally:
        sys.argv = old_argv
    return mods[0] if len(mods) == 1 else mods


class Sequence:
    """A map-style dataset whose ``i``-th request returns sample ``i`` of ``samples``
    whatever index is asked for (see the module docstring); it restarts after the last
    sample. Subclasses the bound module's ``Dataset`` at construction time."""

    def __new__(cls, torch: Any, samples: list) -> Any:
        base = torch.utils.data.Dataset

        class _Sequence(base):  # type: ignore[misc, valid-type]
            def __init__(self) -> None:
                self.samples = samples
                self.calls = 0

            def __len__(self) -> int:
                return len(samples)

            def __getitem__(self, index: Any) -> Any:
                sample = samples[self.calls % len(samples)]
                self.calls += 1
                return sample

        return _Sequence()


def token_batches(seed: int, n: int, batch: int, block: int, vocab: int) -> list:
    """``n`` (x, y) pairs of int64 token arrays (y is x shifted, as language models use)."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        seq = rng.integers(0, vocab, size=(batch, block + 1))
        out.append((seq[:, :-1].copy(), seq[:, 1:].copy()))
    return out


def state_arrays(state_dict: Any) -> dict[str, np.ndarray]:
    """A state dict as NumPy arrays (the golden files hold these)."""
    return {k: np.array(v.detach().cpu().numpy() if hasattr(v, "detach") else v)
            for k, v in state_dict.items()}


def load_arrays(torch: Any, model: Any, arrays: Any) -> None:
    """Copy recorded arrays into ``model`` with its own ``load_state_dict`` (strict)."""
    model.load_state_dict({k: torch.tensor(np.asarray(arrays[k])) for k in arrays.files
                           if not k.startswith("__")} if hasattr(arrays, "files") else
                          {k: torch.tensor(v) for k, v in arrays.items()})


def vendored_names() -> list[str]:
    return [m.name for m in pkgutil.iter_modules([str(VENDOR)])]


_TORCH_NAMES = ("torch", "torch.nn", "torch.nn.functional")


def import_program_file(path: Path, torch: Any, name: str) -> ModuleType:
    """Execute the file ``path`` as a fresh module called ``name``, with ``import torch``
    (and ``torch.nn``, ``torch.nn.functional``) resolving to ``torch``'s modules while it
    runs; the module keeps the names it bound (``torch``, ``nn``, ``F``)."""
    mods = {"torch": torch, "torch.nn": torch.nn, "torch.nn.functional": torch.nn.functional}
    saved = {k: sys.modules.get(k) for k in _TORCH_NAMES}
    sys.modules.update(mods)
    try:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    finally:
        for k, v in saved.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v
    return module


class ProgramSet:
    """A directory of programs written for these tests in the manner of public PyTorch
    programs: each ``run(weights=None, compiled=False)`` trains on small synthetic data and
    returns ``{"losses", "weights", "fn"}``: its per-step losses (and the figures it
    prints), its initial weights (torch's, recorded; or loaded from ``weights``) and its
    compiled function(s). torch's side is recorded in ``goldens/<directory>/``.

    What a program's runs are expected to show, where not the default: ``slow``, compiled
    runs whose cold compile is costly and whose compiled paths default-run tests cover
    (the set's module says which); ``traces``, the traces of each of
    its compiled functions (default one each); ``warns``, the RuntimeWarning its compiled
    run gives (a step run eagerly); ``atol``, the absolute tolerance of its losses against
    torch's (beside ``rtol=1e-5``), ``atols`` per program and ``compiled_atols`` per
    program for the compiled run; ``compile_fails``, why its compiled run fails (an
    expected failure); ``raises``, the `dg.TraceError` its compiled run raises by the
    compile contract (a branch on a traced value), matched by this pattern."""

    def __init__(self, directory: str, programs: tuple[str, ...], *,
                 slow: tuple[str, ...] = (), traces: dict[str, list[int]] | None = None,
                 warns: dict[str, str] | None = None, atol: float = 0.0,
                 atols: dict[str, float] | None = None,
                 compiled_atols: dict[str, float] | None = None,
                 compile_fails: dict[str, str] | None = None,
                 raises: dict[str, str] | None = None) -> None:
        self.directory = directory
        self.programs = programs
        self.path = HERE / directory
        self.gold = GOLDENS / directory
        self.slow = slow
        self.traces = traces or {}
        self.warns = warns or {}
        self.compile_fails = compile_fails or {}
        self.raises = raises or {}
        self._atol, self._atols, self._compiled_atols = atol, atols or {}, compiled_atols or {}

    def atol(self, name: str, compiled: bool) -> float:
        """The absolute tolerance of ``name``'s losses against torch's."""
        if compiled and name in self._compiled_atols:
            return self._compiled_atols[name]
        return self._atols.get(name, self._atol)

    def load(self, name: str, torch: Any) -> ModuleType:
        """``<directory>/<name>.py`` imported afresh with ``torch`` bound to ``torch``."""
        with bound_torch(torch):
            spec = importlib.util.spec_from_file_location(
                f"{self.directory}_{name}_{torch.__name__.replace('.', '_')}",
                self.path / f"{name}.py")
            module = importlib.util.module_from_spec(spec)
            sys.modules[spec.name] = module
            spec.loader.exec_module(module)
        return module

    def run(self, name: str, torch: Any, compiled: bool = False, weights: Any = None) -> dict:
        """Program ``name`` under ``torch``; ``weights``: the recorded initial weights."""
        return self.load(name, torch).run(weights=weights, compiled=compiled)

    def golden(self, name: str) -> tuple[dict, list]:
        """torch's initial weights and losses for ``name``."""
        with np.load(self.gold / f"{name}.npz") as f:
            weights = {k: f[k] for k in f.files}
        return weights, json.loads((self.gold / "losses.json").read_text())[name]

    def record(self, names: list[str]) -> None:
        """Run ``names`` (all when empty) under torch and write their goldens."""
        import torch
        import torch._dynamo  # noqa: F401 - imported before the harness rebinds torch's submodules

        torch.set_num_threads(1)
        # torch's eager answers are the goldens, also for helpers a program decorates with
        # @torch.compile (whose lazily imported modules would not survive the harness's
        # rebinding of torch's submodules)
        torch._dynamo.config.disable = True
        self.gold.mkdir(exist_ok=True)
        path = self.gold / "losses.json"
        losses = json.loads(path.read_text()) if path.exists() else {}
        for name in names or self.programs:
            out = self.run(name, torch)
            np.savez(self.gold / f"{name}.npz",
                     **{k: np.asarray(v) for k, v in out["weights"].items()})
            losses[name] = [float(v) for v in out["losses"]]
            print(name, len(losses[name]), losses[name][:5])
        path.write_text(json.dumps(losses, indent=1) + "\n")


def run_like_golden(programs: ProgramSet, name: str, torch: Any, compiled: bool,
                    warns: dict[str, str] | None = None) -> tuple[dict, list]:
    """Program ``name`` under ``torch`` from torch's recorded initial weights, and torch's
    losses. Its UserWarnings are ignored; the RuntimeWarning ``warns[name]`` (a step run
    eagerly; default: the set's ``warns``) must be given when compiled."""
    import pytest

    warns = programs.warns if warns is None else warns
    weights, want = programs.golden(name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        if name in warns and compiled:
            with pytest.warns(RuntimeWarning, match=warns[name]):
                out = programs.run(name, torch, compiled, weights)
        else:
            out = programs.run(name, torch, compiled, weights)
    return out, want
