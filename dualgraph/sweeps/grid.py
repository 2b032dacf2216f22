"""The grid of a sweep: workloads x parameter points x modes x thread counts, checked
before anything runs, and the file the finished cells are kept in."""

from __future__ import annotations

import itertools
import json
import os
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

MODES = ("eager", "compiled")


class SweepError(ValueError):
    """A sweep that cannot run as asked (found before any cell runs)."""


def parse_param(text: str) -> tuple[str, list[str]]:
    """``"n=1e3,1e4"`` -> ``("n", ["1e3", "1e4"])``."""
    name, eq, values = text.partition("=")
    vals = [v.strip() for v in values.split(",") if v.strip()]
    if not eq or not name.strip() or not vals:
        raise SweepError(f"--param {text!r}: expected NAME=V1,V2,... (e.g. n=1e3,1e4)")
    return name.strip(), vals


def _as_list(x: Any) -> list:
    if isinstance(x, (str, bytes)) or not isinstance(x, Iterable):
        return [x]
    return list(x)


def cells(workloads: Sequence[str], params: Mapping[str, Any], modes: Sequence[str],
          threads: Sequence[int]) -> list[dict[str, Any]]:
    """Every cell's spec (workload, params with the defaults filled in, mode, threads).

    A parameter applies to the workloads that declare it; one that no workload declares,
    an unknown workload or mode, or a bad value raises `SweepError` naming the valid ones.
    """
    from ..workloads import WORKLOADS, check_params

    if not workloads:
        raise SweepError(f"no workload given; valid workloads: {', '.join(WORKLOADS)}")
    bad = [w for w in workloads if w not in WORKLOADS]
    if bad:
        raise SweepError(f"unknown workload {bad[0]!r}; valid workloads: "
                         f"{', '.join(WORKLOADS)}")
    bad = [m for m in modes if m not in MODES]
    if bad or not modes:
        raise SweepError(f"unknown mode {bad[0] if bad else ''!r}; valid modes: "
                         f"{', '.join(MODES)}")
    if not threads or any(not isinstance(t, int) or isinstance(t, bool) or t < 1
                          for t in threads):
        raise SweepError(f"threads must be positive integers, got {list(threads)!r}")
    grid = {k: _as_list(v) for k, v in params.items()}
    declared = {w: WORKLOADS[w].params for w in workloads}
    for name in grid:
        if not any(name in d for d in declared.values()):
            valid = "; ".join(f"{w}: {', '.join(d) or 'none'}" for w, d in declared.items())
            raise SweepError(f"no workload declares parameter {name!r}; valid parameters "
                             f"({valid})")
    out = []
    for w in dict.fromkeys(workloads):
        mine = {k: v for k, v in grid.items() if k in declared[w]}
        names = list(mine)
        for values in itertools.product(*(mine[k] for k in names)):
            try:
                given = check_params(WORKLOADS[w], dict(zip(names, values)))
            except ValueError as e:
                raise SweepError(str(e)) from None
            point = {**declared[w], **given}
            for t in dict.fromkeys(threads):
                for m in dict.fromkeys(modes):
                    spec = {"workload": w, "params": point, "mode": m, "threads": t}
                    spec["key"] = cell_key(spec)
                    out.append(spec)
    return out


def cell_key(spec: Mapping[str, Any]) -> str:
    """What identifies a cell in the results file (resume skips a key that is there)."""
    return json.dumps([spec["workload"], sorted(spec["params"].items()), spec["mode"],
                       spec["threads"]])


FORMAT = "dualgraph-sweep"  # the results file's "format" field


def read_results(path: str) -> dict[str, Any]:
    """The results file at ``path`` (``{"machines": ..., "cells": [...]}``); a file that is
    not one, or is damaged, raises `SweepError` naming it, so it is never overwritten."""
    try:
        with open(path) as f:
            data = json.load(f)
    except UnicodeDecodeError:
        raise SweepError(f"{path} is not a sweep results file (not JSON text); give "
                         "another --out, or remove it") from None
    except json.JSONDecodeError as e:
        raise SweepError(f"{path} is damaged or not a sweep results file (not JSON: {e}); "
                         "give another --out, or remove it") from None
    except OSError as e:
        raise SweepError(f"{path}: cannot read it ({e.strerror or e})") from None
    if not (isinstance(data, dict) and data.get("format", FORMAT) == FORMAT
            and isinstance(data.get("cells"), list) and isinstance(data.get("machines"), dict)
            and "version" in data):
        raise SweepError(f"{path} is not a sweep results file (a JSON file without its "
                         "format, version, machines and cells); give another --out, or "
                         "remove it")
    for c in data["cells"]:
        if not (isinstance(c, dict) and isinstance(c.get("key"), str)):
            raise SweepError(f"{path} is damaged: a cell without its key; give another "
                             "--out, or remove it")
    return data


def check_results_file(path: str) -> None:
    """Raise `SweepError` unless ``path`` is missing, empty or a sweep results file."""
    if os.path.exists(path) and os.path.getsize(path) > 0:
        read_results(path)


class Store:
    """The results file: finished cells and their machines, rewritten atomically (a
    temporary file, then `os.replace`) after every cell. An existing file that is not a
    results file raises `SweepError` (even with ``fresh``: it is never overwritten)."""

    def __init__(self, path: str | None, fresh: bool = False) -> None:
        self.path = path
        self.machines: dict[str, dict] = {}
        self.cells: dict[str, dict] = {}
        if path:
            check_results_file(path)
        if path and not fresh and os.path.exists(path) and os.path.getsize(path) > 0:
            data = read_results(path)
            self.machines = data["machines"]
            self.cells = {c["key"]: c for c in data["cells"]}

    def done(self, key: str) -> bool:
        """Finished (a failed cell is run again)."""
        return self.cells.get(key, {}).get("status") == "ok"

    def add(self, record: dict[str, Any]) -> None:
        fp = record.pop("machine", None)
        if fp:
            fp["host"] = record.get("host")
            self.machines.setdefault(fp["id"], fp)
            record["machine"] = fp["id"]
        self.cells[record["key"]] = record
        self.write()

    def write(self) -> None:
        if not self.path:
            return
        d = os.path.dirname(os.path.abspath(self.path))
        fd, tmp = tempfile.mkstemp(prefix=".sweep-", suffix=".json", dir=d)
        try:
            with os.fdopen(fd, "w") as f:
                json.dump({"format": FORMAT, "version": 1, "machines": self.machines,
                           "cells": list(self.cells.values())}, f, indent=1)
            os.replace(tmp, self.path)
        except BaseException:
            if os.path.exists(tmp):
                os.remove(tmp)
            raise
