"""`dg.version`, as PyTorch's ``torch.version``: the release, and no GPU toolkit
(``cuda`` and ``hip`` are None, as in a CPU build), so scripts that read
``torch.version.cuda`` run.

>>> dg.version.cuda is None
True
"""

from __future__ import annotations

__version__ = "0.1.0"

cuda: str | None = None
hip: str | None = None
rocm: str | None = None
xpu: str | None = None
debug = False
git_version = "unknown"
