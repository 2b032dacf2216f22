"""The worker plugin that pins each local Dask worker to its own cores (imports
``distributed``: imported only when a local cluster starts)."""

from __future__ import annotations

import os
from typing import Any

from distributed.diagnostics.plugin import WorkerPlugin

from .cell import CORES_ENV


class PinToCores(WorkerPlugin):
    """Worker ``k`` (its name in a `LocalCluster`; kept when a nanny restarts it) runs on
    cores ``k*per .. k*per+per-1`` of ``cores``; its cells inherit them."""

    def __init__(self, cores: list[int], per: int) -> None:
        self.cores = list(cores)
        self.per = max(1, per)

    def setup(self, worker: Any) -> None:
        if not hasattr(os, "sched_setaffinity"):
            return
        slots = max(1, len(self.cores) // self.per)
        try:
            k = int(worker.name) % slots
        except (TypeError, ValueError):
            k = abs(hash(worker.name)) % slots
        mine = set(self.cores[k * self.per:(k + 1) * self.per])
        os.environ[CORES_ENV] = ",".join(map(str, sorted(mine)))
        for tid in os.listdir("/proc/self/task"):  # every thread, not just this one
            try:
                os.sched_setaffinity(int(tid), mine)
            except OSError:
                pass
