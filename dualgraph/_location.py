"""Where in the user's code are we? (first stack frame outside the dualgraph package)."""

from __future__ import annotations

import linecache
import os
import sys

PKG = os.path.dirname(os.path.abspath(__file__)) + os.sep
_PKG = PKG


def user_frame(depth: int = 1):
    f = sys._getframe(depth)
    while f is not None and f.f_code.co_filename.startswith(_PKG):
        f = f.f_back
    return f


def user_location(depth: int = 2) -> str | None:
    """``"path/to/file.py:12"`` of the innermost user frame, or ``None``."""
    f = user_frame(depth)
    return f"{f.f_code.co_filename}:{f.f_lineno}" if f is not None else None


def source_line(loc: str | None) -> str:
    if not loc:
        return ""
    path, _, line = loc.rpartition(":")
    return linecache.getline(path, int(line)).strip() if line.isdigit() else ""
