"""Import a vendored PyTorch program with ``torch`` bound to dualgraph (or to PyTorch, to
record its goldens), without editing the program's text."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

_TORCH_NAMES = ("torch", "torch.nn", "torch.nn.functional")


def import_program(path: Path, torch: Any, name: str) -> ModuleType:
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
