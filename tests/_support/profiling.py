"""The Python calls a piece of code makes, counted with ``sys.setprofile`` (tests count
calls; they never time them)."""

from __future__ import annotations

import sys
from collections.abc import Callable


def python_calls(fn: Callable[[], object]) -> list[tuple[str, str]]:
    """``(file name, function name)`` of every Python function ``fn()`` calls, in order."""
    calls: list[tuple[str, str]] = []

    def profile(frame, event, arg):  # noqa: ARG001 - sys.setprofile's signature
        if event == "call":
            calls.append((frame.f_code.co_filename, frame.f_code.co_name))

    sys.setprofile(profile)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return calls
