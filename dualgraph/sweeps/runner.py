"""Running the cells: on a Dask cluster (a pinned `LocalCluster` by default, or an
existing scheduler) or one after another in this process's children (``serial``).

Dask schedules; this module only submits, collects and records. Every finished cell is
written to the results file at once, so an interrupted sweep loses nothing it finished.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from typing import Any

from .cell import CORES_ENV, CellCrashError, launch
from .grid import Store

CRASH_ONCE = "crash_once"  # test hook: a marker path; the first attempt kills its worker


def dask_cell(spec: dict[str, Any]) -> dict[str, Any]:
    """The Dask task of one cell: `launch` it, and say which worker ran it."""
    marker = spec.get(CRASH_ONCE)
    if marker and not os.path.exists(marker):
        with open(marker, "w") as f:
            f.write(str(os.getpid()))
        os._exit(1)  # the worker process dies; the scheduler reruns the cell elsewhere
    record = launch(spec)
    record["worker_pid"] = os.getpid()
    return record


def available_cores() -> list[int]:
    """The cores this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))


class Progress:
    """A tqdm bar of finished cells with done / running / failed counts and the ETA."""

    def __init__(self, total: int, enabled: bool) -> None:
        self.failed = 0
        self.bar = None
        if enabled and total:
            from tqdm import tqdm

            self.bar = tqdm(total=total, desc="sweep", unit="cell", file=sys.stderr,
                            dynamic_ncols=True)

    def update(self, finished: int = 0, running: int = 0, failed: int = 0) -> None:
        self.failed += failed
        if self.bar is None:
            return
        self.bar.update(finished)
        text = f"done {self.bar.n}, running {running}, failed {self.failed}"
        if text != self.bar.postfix:
            self.bar.set_postfix_str(text)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _failed(spec: dict[str, Any], error: str) -> dict[str, Any]:
    return {**spec, "status": "failed", "error": error}


def _record(spec: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
    keep = {k: v for k, v in spec.items() if k != CRASH_ONCE}
    return {**keep, **result}


def run_serial(specs: list[dict], store: Store, progress: Progress, retries: int) -> None:
    """One cell after another, each in a fresh process, without Dask."""
    for spec in specs:
        progress.update(running=1)
        for attempt in range(retries + 1):
            try:
                rec = _record(spec, launch(spec))
                break
            except CellCrashError as e:
                rec = _failed(spec, f"{e} (after {attempt + 1} attempts)")
        rec["attempts"] = attempt + 1
        store.add(rec)
        progress.update(finished=1, failed=rec["status"] != "ok")


def run_dask(specs: list[dict], store: Store, progress: Progress, retries: int,
             scheduler: str | None, workers: int | None) -> None:
    """The cells on Dask: an existing scheduler, or a local cluster per thread count whose
    workers (one task at a time) are each pinned to their own cores."""
    import dask

    with dask.config.set({"distributed.scheduler.allowed-failures": retries}):
        if scheduler:
            from distributed import Client

            with Client(scheduler) as client:
                _collect(client, specs, store, progress, retries)
            return
        cores = available_cores()
        by_threads: dict[int, list[dict]] = {}
        for s in specs:
            by_threads.setdefault(s["threads"], []).append(s)
        # A phase per thread count: a cell with t threads gets t cores of its own.
        for t, group in sorted(by_threads.items()):
            per = min(t, len(cores))
            n = max(1, min(len(cores) // per, workers or len(cores), len(group)))
            with _local_client(n, cores, per) as client:
                _collect(client, group, store, progress, retries)


class _local_client:  # noqa: N801 - used as a context manager
    """A `LocalCluster` of ``n`` single-threaded workers, worker k pinned to its own
    ``per`` cores, and a client of it."""

    def __init__(self, n: int, cores: list[int], per: int) -> None:
        import logging

        from distributed import Client, LocalCluster

        from .pin import PinToCores

        self.cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                                    dashboard_address=None, silence_logs=logging.ERROR)
        self.client = Client(self.cluster)
        self.client.register_plugin(PinToCores(cores, per), name="dualgraph-pin")

    def __enter__(self) -> Any:
        return self.client

    def __exit__(self, *exc: Any) -> None:
        self.client.close()
        self.cluster.close()


def _collect(client: Any, specs: list[dict], store: Store, progress: Progress,
             retries: int) -> None:
    from distributed import as_completed

    futures = {client.submit(dask_cell, s, key=f"dualgraph-cell-{i}-{time.time_ns()}",
                             retries=retries, pure=False): s for i, s in enumerate(specs)}
    keys = {f.key for f in futures}
    ac = as_completed(futures)
    try:
        while not ac.is_empty():
            batch = ac.next_batch(block=False)
            if not batch:
                # Tasks the scheduler has assigned, at most one per worker thread.
                assigned = sum(k in keys for ks in client.processing().values() for k in ks)
                running = min(assigned, sum(client.nthreads().values()))
                progress.update(running=running)
                time.sleep(0.2)
                continue
            for f in batch:
                spec = futures[f]
                if f.status == "finished":
                    rec = _record(spec, f.result())
                else:
                    err = f.exception()
                    rec = _failed(_record(spec, {}), f"{type(err).__name__}: {err}")
                store.add(rec)
                progress.update(finished=1, failed=rec["status"] != "ok")
    except BaseException:
        client.cancel(list(futures))
        raise


def run(specs: list[dict], store: Store, scheduler: str | None, workers: int | None,
        retries: int, progress: bool, on_start: Callable[[int], None] | None = None) -> None:
    """Run ``specs`` (the ones not yet in ``store``) with ``scheduler``: None (a local
    cluster), ``"serial"`` or a Dask scheduler address."""
    bar = Progress(len(specs), progress)
    try:
        if scheduler == "serial":
            run_serial(specs, store, bar, retries)
        else:
            run_dask(specs, store, bar, retries, scheduler, workers)
    finally:
        bar.close()


__all__ = ["CORES_ENV", "available_cores", "dask_cell", "run"]
