"""`dg.sweep` and ``dualgraph sweep``: comparison grids (workloads x parameters x modes x
thread counts) run cell by cell on a Dask cluster, each cell in a fresh process.

Install the extra for the cluster: ``pip install 'dualgraph[sweep]'``. See docs/sweep.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .grid import MODES, Store, SweepError, cell_key, cells, check_results_file, parse_param
from .report import plot, rows, table


def usable_cores() -> int:
    """How many cores this process may run on (its CPU affinity, not the machine's)."""
    import os

    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def short_threads(threads: Sequence[int]) -> str | None:
    """A warning when a thread count exceeds the cores this process may use (None if
    none does): such cells run on fewer cores, and record the count they really had."""
    cores = usable_cores()
    over = sorted({t for t in threads if t > cores})
    if not over:
        return None
    return (f"this process may use {cores} core(s) (its CPU affinity), fewer than "
            f"--threads {','.join(map(str, over))}: those cells run on {cores} core(s), and "
            "their records say so (threads_used)")


def sweep(workloads: str | Sequence[str], params: Mapping[str, Any] | None = None, *,
          modes: Sequence[str] = MODES, threads: Sequence[int] = (1,), repeats: int = 5,
          budget: float = 0.5, out: str | None = None, fresh: bool = False,
          scheduler: str | None = None, workers: int | None = None, retries: int = 2,
          cold_warm: bool = False, cold_cache: bool = False, timeout: float | None = None,
          progress: bool = True, as_frame: bool = False,
          cell_options: Mapping[str, Any] | None = None) -> Any:
    """Run a comparison grid and return its table: one row per cell (a list of dicts, or a
    pandas DataFrame with ``as_frame=True``).

    ``params`` maps a parameter that the workloads declare to its values (``{"n": [1e3,
    1e4], "dtype": ["float32", "float64"]}``). Each cell (workload x point x mode x
    threads) runs `dualgraph.compare` in a fresh process. ``scheduler``: None for a
    `LocalCluster` with each worker pinned to its own cores, a ``tcp://host:port`` address
    for an existing cluster, or ``"serial"`` (no Dask, one cell after another). With
    ``out``, finished cells are kept in that JSON file and not run again unless
    ``fresh``. A cell whose process dies is retried ``retries`` times, then recorded as
    failed. ``cold_cache``: every cell compiles with an empty kernel cache.
    """
    import warnings

    from . import runner

    names = [workloads] if isinstance(workloads, str) else list(workloads)
    specs = cells(names, params or {}, list(modes), list(threads))
    if as_frame:  # checked now: the grid may take minutes, and would be lost at the end
        try:
            import pandas  # noqa: F401
        except ImportError:
            raise SweepError("as_frame=True needs pandas: pip install pandas (or "
                             "'dualgraph[sweep]'), or leave as_frame off for a list of "
                             "dicts") from None
    store = Store(out, fresh=fresh)
    short = short_threads(threads)
    if short:
        warnings.warn(short, RuntimeWarning, stacklevel=2)
    options = {"repeats": repeats, "budget": budget, "cold_warm": cold_warm,
               "cold_cache": cold_cache, "timeout": timeout, **(cell_options or {})}
    todo = [{**s, **options} for s in specs if not store.done(s["key"])]
    if scheduler != "serial":
        try:
            import distributed  # noqa: F401
        except ImportError:
            raise SweepError("sweeps run on Dask: pip install 'dualgraph[sweep]' "
                             "(or use scheduler='serial')") from None
    runner.run(todo, store, scheduler, workers, retries, progress)
    keys = {s["key"] for s in specs}
    records = [c for k, c in store.cells.items() if k in keys]
    table_rows = rows(records, store.machines)
    if as_frame:
        import pandas as pd

        return pd.DataFrame(table_rows)
    return table_rows


__all__ = ["MODES", "Store", "SweepError", "cell_key", "cells", "check_results_file",
           "parse_param", "plot", "rows", "short_threads", "sweep", "table", "usable_cores"]
