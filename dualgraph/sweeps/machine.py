"""The machine a cell ran on: CPU, cores, library versions and BLAS, with a short id.

Two cells are comparable on one curve only when their fingerprints (everything but the
host name) are equal.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import sys
from importlib import metadata
from typing import Any

LIBRARIES = ("dualgraph", "numpy", "numba", "llvmlite", "scipy", "threadpoolctl")


def _cpuinfo() -> tuple[str, list[str]]:
    model, flags = platform.processor() or platform.machine(), []
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                key = key.strip()
                if key == "model name" and value.strip():
                    model = value.strip()
                elif key in ("flags", "Features") and not flags:
                    flags = sorted(value.split())
                if key == "" and flags:  # the first processor's block is enough
                    break
    except OSError:
        pass
    return model, flags


def _version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        mod = sys.modules.get(name)
        return getattr(mod, "__version__", None)


def fingerprint() -> dict[str, Any]:
    """This machine's fingerprint (see the module docstring); ``id`` hashes the rest."""
    from threadpoolctl import threadpool_info

    model, flags = _cpuinfo()
    blas = sorted(({k: p.get(k) for k in ("user_api", "internal_api", "version",
                                           "architecture", "threading_layer")}
                   for p in threadpool_info()), key=lambda d: json.dumps(d, sort_keys=True))
    fp = {
        "cpu": model,
        "cpu_flags": " ".join(flags),
        "cores": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "libraries": {name: _version(name) for name in LIBRARIES},
        "blas": blas,
    }
    fp["id"] = machine_id(fp)
    return fp


def machine_id(fp: dict[str, Any]) -> str:
    """A short hash of a fingerprint (its ``id`` and ``host`` excluded)."""
    body = {k: v for k, v in fp.items() if k not in ("id", "host")}
    return hashlib.sha1(json.dumps(body, sort_keys=True).encode()).hexdigest()[:10]


def describe(fp: dict[str, Any]) -> str:
    """One line: CPU, cores and the main library versions."""
    libs = fp.get("libraries", {})
    blas = ", ".join(f"{b.get('internal_api')} {b.get('version')}" for b in fp.get("blas", [])
                     if b.get("user_api") == "blas")
    return (f"{fp.get('cpu')}, {fp.get('cores')} cores; numpy {libs.get('numpy')}, "
            f"numba {libs.get('numba')}; BLAS {blas or 'n/a'}")
