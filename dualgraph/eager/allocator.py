"""The C allocator's settings for eager mode's temporaries (glibc on Linux only).

Every eager op returns a new NumPy array, and a training step frees most of them by its
end. With glibc's defaults an array of a few megabytes is first served by ``mmap`` (fresh,
zeroed pages: a page fault per 4 KiB touched), and later from the heap, whose free top
is given back to the system as soon as it exceeds twice that size. A step that frees
tens of megabytes of temporaries hands them back, and the next step faults every page in
again: in the transformer workload's eager step (16 x 64 x 512 GELU activations, 2 MiB
each) that was about 6,000 page faults and a quarter of the step's CPU time.

`tune` fixes the two thresholds: arrays below 16 MiB come from the heap, and up to 64 MiB
of freed heap stays mapped for the next step. The process keeps at most that much more
memory; its peak does not grow. PyTorch's CPU tensors, in the same process, are served
by the same allocator and see the same settings. ``DUALGRAPH_MALLOC=default`` in the
environment leaves glibc's defaults alone.
"""

from __future__ import annotations

import ctypes
import os
import sys

# glibc's mallopt parameters (malloc.h).
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 16 << 20
TRIM_THRESHOLD = 64 << 20

TUNED = [False]


def tune() -> bool:
    """Set the allocator thresholds once per process; whether they are set (False off
    glibc, or with ``DUALGRAPH_MALLOC=default``)."""
    if TUNED[0]:
        return True
    if os.environ.get("DUALGRAPH_MALLOC", "") == "default" or not sys.platform.startswith(
            "linux"):
        return False
    try:
        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version  # noqa: B018 - glibc only: musl's mallopt differs
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    # mmap first: setting it also stops glibc adjusting both thresholds on its own.
    TUNED[0] = bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)
                    and mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))
    return TUNED[0]
