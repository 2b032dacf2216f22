"""``torch.autograd.profiler``: the older spelling of `dg.profiler`'s recorder.

``with torch.autograd.profiler.profile() as prof: ...`` and ``record_function`` are the
same objects as `dg.profiler.profile` and `dg.profiler.record_function` (CPU activity only;
``use_cuda=True`` raises).
"""

from __future__ import annotations

from ..profiler import EventList, profile, record_function

__all__ = ["EventList", "profile", "record_function"]
