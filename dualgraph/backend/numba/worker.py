"""The compile worker: a process that compiles kernels into the disk cache for tiered calls.

Run as ``python -m dualgraph.backend.numba.worker`` by `dualgraph.compile.tiered`, which
talks to it over its stdin and stdout in frames (an 8-byte big-endian length, then a
pickle). A job is ``(job_id, cache directory, [(graph, name, parallel, write_to, inputs),
...])``: the optimized graphs of one compiled entry, lowered and compiled in order through
`compile_graph`, i.e. the same checked kernel files and HMAC-signed Numba cache as a
blocking compile. The reply is ``(job_id, error or None, numba_seconds)``. The worker exits
at the end of its input (its parent closed the pipe or died) and on SIGTERM; it ignores
SIGINT, so a Ctrl-C meant for the user's loop does not kill the compiler.

Frames come only from the parent process that started this one through a private pipe, so
unpickling them trusts no one else.
"""

from __future__ import annotations

import os
import pickle
import signal
import struct
import sys
import time
from typing import Any, BinaryIO

_LEN = struct.Struct(">Q")


def read_frame(f: BinaryIO) -> Any:
    """The next object on ``f``, or ``None`` at the end of the stream."""
    head = f.read(_LEN.size)
    if len(head) < _LEN.size:
        return None
    size = _LEN.unpack(head)[0]
    data = f.read(size)
    if len(data) < size:
        return None
    return pickle.loads(data)


def write_frame(f: BinaryIO, obj: Any) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    f.write(_LEN.pack(len(data)) + data)
    f.flush()


def _terminate(signum: int, frame: Any) -> None:
    # SystemExit unwinds through the cache's atomic writes, which remove their temporaries.
    raise SystemExit(0)


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _terminate)
    # The protocol gets a private copy of stdout; anything else printed (by Numba, by a
    # warning) goes to stderr instead of corrupting a frame.
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    inp = sys.stdin.buffer
    from . import compile_graph

    while True:
        job = read_frame(inp)
        if job is None:
            return
        job_id, cache_dir, kernels = job
        if cache_dir is None:
            os.environ.pop("DUALGRAPH_CACHE_DIR", None)
        else:
            os.environ["DUALGRAPH_CACHE_DIR"] = cache_dir
        t0 = time.perf_counter()
        error = None
        try:
            for spec in kernels:
                compile_graph(*spec)
        except Exception as e:  # noqa: BLE001 - reported to the parent, which warns
            error = f"{type(e).__name__}: {e}".strip()
        try:
            write_frame(out, (job_id, error, time.perf_counter() - t0))
        except (BrokenPipeError, OSError):
            return  # the parent is gone


if __name__ == "__main__":
    main()
