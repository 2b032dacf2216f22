"""The compile worker: a process that compiles kernels into the disk cache for tiered calls.

Run as ``python -m dualgraph.backend.numba.worker`` by `dualgraph.compile.tiered`, which
talks to it over its stdin and stdout in frames (an 8-byte big-endian length, then a
pickle). A job is ``(job_id, cache directory, [(graph, name, parallel, write_to, inputs),
...], settings)``, ``settings`` the caller's compile environment variables (how kernels
are split): the optimized graphs of one compiled entry, lowered and compiled through
`compile_graphs`, i.e. the same checked kernel files and HMAC-signed Numba cache as a
blocking compile, by as many processes as `dualgraph.backend.jobs.processes_for` says (the
caller, deciding the same from the same graphs and settings, shares the cores by it). The
reply is ``(job_id, error or None, numba_seconds)``. The worker exits at the end of its
input (its parent closed the pipe or died) and on SIGTERM; it ignores SIGINT, so a Ctrl-C
meant for the user's loop does not kill the compiler.

Numba compiles one function at a time per process (its compiler holds a global lock), so
the independent functions of a job (the parts of split kernels, a forward and a backward)
are shared out among helper processes when the machine has the cores (`compile_jobs`):
each is this same module, sent jobs of ``("fn", body, name, parallel, contract, sig,
opt)`` specs, which it compiles into the disk cache, or ``("lib", unit)`` specs, library
routines (`library`) it builds into Numba's disk cache. Blocking compiles use the same
helpers.

Frames come only from the parent process that started this one through a private pipe, so
unpickling them trusts no one else.
"""

from __future__ import annotations

import atexit
import itertools
import os
import pickle
import signal
import struct
import subprocess
import sys
import threading
import time
from typing import Any, BinaryIO

from ..jobs import JOBS_ENV, compile_jobs, processes_for

_LEN = struct.Struct(">Q")
__all__ = ["JOBS_ENV", "compile_graphs", "compile_jobs", "compile_parallel", "main",
           "read_frame", "write_frame"]
# Below this many lines of source to compile, starting and feeding helpers costs more
# than it saves (a helper takes seconds to import Numba).
PARALLEL_MIN_LINES = 300
# A file to which the worker and its helpers append their phases, one line each (wall-clock
# time, process id, phase), for `tools/tiered_timeline.py`; unset: nothing is written.
EVENTS_ENV = "DUALGRAPH_WORKER_EVENTS"


def event(what: str) -> None:
    """Note phase ``what`` of this process in the ``DUALGRAPH_WORKER_EVENTS`` file."""
    path = os.environ.get(EVENTS_ENV)
    if path:
        with open(path, "a") as f:
            f.write(f"{time.time():.4f} {os.getpid()} {what}\n")


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


# Run by a helper's interpreter: the import path is the interpreter's own plus the
# directory holding this dualgraph, never the caller's working directory.
_BOOTSTRAP = (
    "import sys\n"
    "sys.path[:] = [{root!r}] + [p for p in sys.path if p and p != '.']\n"
    "import runpy\n"
    "runpy.run_module('dualgraph.backend.numba.worker', run_name='__main__', alter_sys=True)\n"
)


class _Helper:
    """One helper process and its pipes; `run` sends a job and waits for its reply."""

    def __init__(self) -> None:
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
            os.path.abspath(__file__)))))
        safe = ["-P"] if sys.version_info >= (3, 11) else []
        self.proc = subprocess.Popen(
            [sys.executable, *safe, "-c", _BOOTSTRAP.format(root=root)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            cwd=os.path.abspath(os.sep), close_fds=True)

    def run(self, job: Any) -> Any:
        write_frame(self.proc.stdin, job)
        reply = read_frame(self.proc.stdout)
        if reply is None:
            raise RuntimeError(f"a compile helper exited (status {self.proc.poll()})")
        return reply

    def stop(self) -> None:
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                f.close()
            except OSError:
                pass
        try:
            self.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


_HELPERS: list[_Helper] = []
_HELPERS_LOCK = threading.Lock()
_IDS = itertools.count(1)


def _helpers(n: int) -> list[_Helper]:
    """``n`` running helper processes of this process (started on first use)."""
    with _HELPERS_LOCK:
        _HELPERS[:] = [h for h in _HELPERS if h.proc.poll() is None]
        while len(_HELPERS) < n:
            _HELPERS.append(_Helper())
        return _HELPERS[:n]


@atexit.register
def stop_helpers() -> None:
    """Stop this process's helpers (at exit: no orphan process)."""
    with _HELPERS_LOCK:
        helpers, _HELPERS[:] = list(_HELPERS), []
    for h in helpers:
        h.stop()


def compile_parallel(tasks: list[tuple[Any, tuple]], jobs: int | None = None) -> int:
    """Compile njit functions into the disk cache, up to ``jobs`` at once: ``tasks`` are
    (`Kernel` or `Part`, argument types). This process and helper processes take the
    functions one at a time from one queue, largest first, so a helper that starts late
    (it imports Numba first) or a function that compiles slowly for its size leaves the
    rest to the others; afterwards every task's code is on disk (or compiled here), so a
    `Kernel.compile` only loads it. Returns how many went to helpers (0: none did,
    because of ``jobs``, the size of the work, or a missing disk cache)."""
    from . import compile_dispatcher

    jobs = compile_jobs() if jobs is None else jobs
    lines = [t[0].lowered.source.count("\n") for t in tasks]
    if (jobs < 2 or len(tasks) < 2 or sum(lines) < PARALLEL_MIN_LINES
            or any(t[0].path is None for t in tasks)):
        return 0
    todo = [tasks[k] for k in sorted(range(len(tasks)), key=lambda k: -lines[k])]
    # The library routines the functions call and this process has not built: first in
    # the queue, each built once by whoever takes it (the others wait for it, `library`),
    # not by every process whose function calls it.
    from . import library

    todo[:0] = [("lib", u) for u in library.missing(
        library.needed_by("\n".join(t[0].lowered.code for t in tasks)))]
    lock = threading.Lock()
    sent = [0]

    def take() -> tuple | None:
        with lock:
            return todo.pop(0) if todo else None

    def serve(helper: _Helper) -> None:
        while (task := take()) is not None:
            owner, sig = task
            spec = (("lib", sig) if owner == "lib" else
                    ("fn", owner.lowered.code, owner.lowered.name, owner.parallel,
                     owner.contract, tuple(sig), getattr(owner.fn, "_dg_opt", None)))
            # The directory the kernel files are in (absolute: the helper runs elsewhere).
            directory = os.path.dirname(os.path.abspath(
                tasks[0][0].path if owner == "lib" else owner.path))
            try:
                _, error, _ = helper.run((next(_IDS), directory, [spec]))
            except (OSError, RuntimeError, EOFError):
                # A helper that fails leaves its function to `Kernel.compile`, which
                # compiles it in this process (and reports any error there).
                return
            if error is None and owner != "lib":
                with lock:
                    sent[0] += 1

    threads = [threading.Thread(target=serve, args=(h,), daemon=True)
               for h in _helpers(min(jobs, len(tasks)) - 1)]
    for t in threads:
        t.start()
    while (task := take()) is not None:
        if task[0] == "lib":
            library.need_units([task[1]])
        else:
            compile_dispatcher(task[0].fn, task[0].path, tuple(task[1]))
    for t in threads:
        t.join()
    return sent[0]


def compile_graphs(specs: list) -> list:
    """Build and compile ``specs`` (``(graph, name, parallel, write_to, inputs)``, as
    `compile_graph` takes them): the distinct functions not yet compiled or on disk are
    compiled in parallel first (`compile_parallel`), the helpers of a large job
    (`processes_for`) started before its graphs are lowered. Returns the kernels."""
    processes = processes_for(spec[0] for spec in specs)
    if processes > 1:
        _helpers(processes - 1)

    from . import build

    built = []
    for graph, name, parallel, write_to, inputs in specs:
        k = build(graph, parallel, True, name, write_to)
        if k.path is None:
            raise RuntimeError("no usable disk kernel cache to hand the kernel over")
        built.append((k, k.signature_of(inputs)))
    tasks: dict = {}
    for k, sig in built:
        for owner, s in k.compile_tasks(sig):
            tasks.setdefault((id(owner.fn), tuple(s)), (owner, s))
    event(f"lowered: {len(tasks)} functions")
    compile_parallel(list(tasks.values()))
    for k, sig in built:
        k.compile(sig=sig)
    event("compiled")
    return [k for k, _ in built]


def _compile_function(body: str, name: str, parallel: bool, contract: bool,
                      sig: tuple, opt: int | None = None) -> None:
    """A helper's task: one function of a kernel, into the disk cache."""
    from . import cache, compile_dispatcher

    fn, _, path = cache.load(body, name, parallel, True, contract, opt)
    if path is None:
        raise RuntimeError("no usable disk kernel cache")
    compile_dispatcher(fn, path, sig)
    event(f"compiled {name}")


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _terminate)
    # The protocol gets a private copy of stdout; anything else printed (by Numba, by a
    # warning) goes to stderr instead of corrupting a frame.
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    inp = sys.stdin.buffer
    event("imported")

    while True:
        job = read_frame(inp)
        if job is None:
            return
        job_id, cache_dir, kernels, *rest = job
        event(f"job {job_id} read")
        for key, value in {"DUALGRAPH_CACHE_DIR": cache_dir, **(rest[0] if rest else {})
                           }.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        t0 = time.perf_counter()
        error = None
        try:
            if kernels and kernels[0][0] == "lib":
                from . import library

                library.need_units([spec[1] for spec in kernels])
            elif kernels and kernels[0][0] == "fn":
                for spec in kernels:
                    _compile_function(*spec[1:])
            else:
                compile_graphs(kernels)
        except Exception as e:  # noqa: BLE001 - reported to the parent, which warns
            error = f"{type(e).__name__}: {e}".strip()
        try:
            write_frame(out, (job_id, error, time.perf_counter() - t0))
        except (BrokenPipeError, OSError):
            return  # the parent is gone


if __name__ == "__main__":
    main()
