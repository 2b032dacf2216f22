"""Tiered execution: a new signature's first calls never wait for Numba.

When an entry is built with tiering on, its Numba kernels are not compiled in this process.
Instead:

- **tier 0**: the entry's kernels are `InterpretedKernel` objects, which run the same
  optimized forward, backward or step graph through the NumPy reference interpreter
  behind the kernel interface (``new_outputs``, ``run``), so the call plan (in-place
  writes, ``.grad``, residuals, the random key) is the compiled one;
- the optimized graphs and their argument types go, as one job, to a compile worker
  process (`dualgraph.backend.numba.worker`), which lowers them and compiles them into
  the disk kernel cache through the same checked files and signed Numba cache as a
  blocking compile;
- when the worker reports, a reader thread of this process builds the same kernels and
  loads their machine code from the disk cache (this process imports Numba only then,
  so the first result does not wait for Numba's import either);
- **tier 1**: the next call finds the kernels ready (an attribute: no syscall, no lock on
  the call path) and swaps them into the entry; every later call runs compiled.

A process, not a thread: Numba compiles with the GIL held, so a compiling thread would
stall the user's loop. A subprocess running a small module, not `multiprocessing`: the
spawn start method would re-run the user's unguarded ``__main__`` script in the child, and
fork is unsafe once BLAS or Numba threads exist.

A worker that dies, is killed or fails to compile leaves its entries at tier 0 with one
warning per function; a later compile starts a fresh worker. At interpreter exit the
worker is stopped (`shutdown`).
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import os
import pickle
import queue
import signal
import stat
import struct
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from typing import Any

import numpy as np

from ..backend import import_backend
from ..backend.jobs import cores, processes_for
from ..ir.graph import Graph, zero_d_operands
from ..ir.interpret import interpret

ENV = "DUALGRAPH_TIERED"  # "0" turns tiering off everywhere (blocking compiles)
_OFF = ("0", "false", "no", "off")
_SWAP_LOCK = threading.Lock()
_WORKER: _Worker | None = None
_WORKER_LOCK = threading.Lock()
_IDS = itertools.count(1)
# A worker is replaced after this many jobs (once it is idle): Numba never gives back the
# ~1 MB of native memory each compile takes, so only a fresh process bounds it.
JOBS_ENV = "DUALGRAPH_WORKER_JOBS"
DEFAULT_WORKER_JOBS = 100


class _BlasShare:
    """While kernels compile, this process's BLAS uses one thread fewer than the machine has
    cores (never more than it had): on 2 cores, tier 0's two-thread OpenBLAS and the worker
    fought over both and the worker took 3-4x as long (measured: the MLP step swapped in
    after 16 s instead of 4.5 s). The user's limit is restored when nothing is pending."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending = 0
        self._limiter: Any = None

    def start(self) -> None:
        with self._lock:
            self._pending += 1
            first = self._pending == 1
        if first:
            # threadpoolctl scans the loaded libraries: not on the caller's first call.
            threading.Thread(target=self._apply, daemon=True,
                             name="dualgraph-blas-share").start()

    def _apply(self) -> None:
        n = cores()
        try:
            from threadpoolctl import threadpool_info, threadpool_limits

            now = min((p["num_threads"] for p in threadpool_info()
                       if p.get("user_api") == "blas"), default=1)
            target = max(1, n - 1)
            with self._lock:
                if self._pending and self._limiter is None and target < now:
                    self._limiter = threadpool_limits(limits=target, user_api="blas")
        except Exception:  # noqa: BLE001 - sharing cores is an optimisation, never an error
            pass

    def end(self) -> None:
        with self._lock:
            self._pending = max(0, self._pending - 1)
            limiter = self._limiter if not self._pending else None
            if limiter is not None:
                self._limiter = None
        if limiter is not None:
            try:
                limiter.restore_original_limits()
            except Exception:  # noqa: BLE001
                pass

    @property
    def limited(self) -> bool:
        return self._limiter is not None


BLAS_SHARE = _BlasShare()


def job_limit() -> int:
    """Jobs a compile worker serves before it is replaced (``DUALGRAPH_WORKER_JOBS``)."""
    try:
        return max(1, int(os.environ.get(JOBS_ENV, DEFAULT_WORKER_JOBS)))
    except ValueError:
        return DEFAULT_WORKER_JOBS
_LEN = struct.Struct(">Q")  # a frame: its length, then a pickle (see the worker module)


# While its kernels compile in as many processes as there are cores, a tier-0 run sleeps
# this many times its own duration: the compile gets the cores back (the user's loop would
# otherwise hold one of them). When tier 1 runs more than twice as fast as tier 0 (the model
# steps: 3x), the loop is further ahead for it.
YIELD_ENV = "DUALGRAPH_TIER0_YIELD"
DEFAULT_YIELD = 1.0


def yield_share() -> float:
    """How long a tier-0 run sleeps while its kernels compile, in multiples of the run's own
    time (``DUALGRAPH_TIER0_YIELD``; 0: never)."""
    try:
        return max(0.0, float(os.environ.get(YIELD_ENV, DEFAULT_YIELD)))
    except ValueError:
        return DEFAULT_YIELD


def enabled(option: bool, cache: bool) -> bool:
    """Whether a new entry compiles tiered: the ``tiered`` option, the disk cache (the
    worker hands kernels over through it) and ``DUALGRAPH_TIERED`` all allow it."""
    return (option and cache and os.environ.get(ENV, "").lower() not in _OFF
            and os.environ.get("DUALGRAPH_DISABLE_DISK_CACHE", "") in ("", "0", "false"))


class InterpretedKernel:
    """Tier 0: a graph run by the NumPy interpreter behind the compiled kernel's interface.

    ``run(ins, outs)`` takes the inputs as a compiled kernel does (0-d values as 0-d or
    ``(1,)`` arrays: ``zero_d``), fills ``outs`` (from ``new_outputs()``) with fresh arrays
    of the compiled kernel's shapes and dtypes, and writes the outputs in ``write_to`` into
    their input arrays, after every value is computed, as the compiled kernel does.
    """

    tier = 0

    def __init__(self, graph: Graph, write_to: dict[int, int], job: _Job | None = None
                 ) -> None:
        self.graph = graph
        self.write_to = dict(write_to)
        self.job = job  # while it is pending, each run yields the CPU for a while after
        self._in = [tuple(n.shape) for n in graph.inputs]
        self.zero_d = zero_d_operands(graph)
        self._outs = [(k, tuple(o.shape) if self.zero_d else tuple(o.shape) or (1,), o.dtype)
                      for k, o in enumerate(graph.outputs) if k not in self.write_to]

    def new_outputs(self) -> list:
        return [None] * len(self._outs)

    def run(self, ins: list, outs: list) -> None:
        t0 = time.perf_counter()
        self._run(ins, outs)
        job = self.job
        # Not in the first call: its result comes first.
        if job is not None and not job.done and job.polls > 1 and job.processes >= cores():
            pause = yield_share() * (time.perf_counter() - t0)
            if pause > 0:
                job.pause(pause)

    def _run(self, ins: list, outs: list) -> None:
        # Quiet, as eager mode runs the same NumPy kernels: a division by zero gives inf
        # or nan without a RuntimeWarning.
        with np.errstate(all="ignore"):
            vals = interpret(self.graph, *[a if a.shape == s else a.reshape(s)
                                           for a, s in zip(ins, self._in)])
        # Copies: an interpreted value may be an input, a view of one, or a graph constant,
        # and the caller owns (and may change) what a kernel returns.
        for p, (k, shape, dtype) in enumerate(self._outs):
            outs[p] = np.array(vals[k], dtype=dtype, order="C").reshape(shape)
        writes = [(ins[j], vals[k]) for k, j in self.write_to.items()]
        targets = [d for d, _ in writes]
        for d, v in writes:
            # A value that reads an array about to be written must be read first.
            if any(np.may_share_memory(v, t) for t in targets):
                v = v.copy()
            np.copyto(d, np.reshape(v, d.shape), casting="unsafe")


def describe(a: np.ndarray) -> tuple:
    """What Numba's type of array ``a`` depends on: dtype, ndim, layout, read-only (Numba's
    own `typeof` rule, without importing Numba)."""
    f = a.flags
    layout = "C" if f.c_contiguous else "F" if f.f_contiguous else "A"
    return (a.dtype.str, a.ndim, layout, not f.writeable)


def _out_desc(node: Any, graph: Graph) -> tuple:
    """An output's description of a kernel of ``graph``: a new C-contiguous array (0-d as
    shape (1,) unless `zero_d_operands`)."""
    return (np.dtype(node.dtype).str, _ndim(node, graph), "C", False)


def _cot_desc(node: Any, graph: Graph) -> tuple:
    """A cotangent's description of the backward kernel of ``graph``: C-contiguous and
    read-only, as `CompiledFunctionBackward` always passes it (so one compile serves every
    call)."""
    return (np.dtype(node.dtype).str, _ndim(node, graph), "C", True)


def _ndim(node: Any, graph: Graph) -> int:
    """The dimensions of the array a kernel of ``graph`` holds ``node``'s value in."""
    return len(node.shape) if zero_d_operands(graph) else max(len(node.shape), 1)


class _Job:
    """One entry's kernels, compiled by the worker and loaded by the reader thread."""

    __slots__ = ("id", "specs", "kernels", "done", "error", "seconds", "load_seconds",
                 "polls", "processes", "_built", "_preparing", "_prepare_lock", "_finished")

    def __init__(self, specs: list) -> None:
        self.id = next(_IDS)
        self.specs = specs  # (entry attribute, graph, name, parallel, write_to, inputs)
        self.kernels: list = []  # (entry attribute, loaded Kernel), once done
        self.done = False  # set last: kernels (or error) are complete when it is True
        self.error: str | None = None
        self.seconds = 0.0
        self.load_seconds = 0.0
        self.polls = 0  # calls at tier 0 that checked on it
        self.processes = 1  # how many compile it (`processes_for`)
        self._built: list | None = None  # (entry attribute, Kernel, argument types)
        self._preparing: threading.Thread | None = None
        self._prepare_lock = threading.Lock()
        self._finished = threading.Event()

    def finish(self, error: str | None) -> None:
        """Mark the job done (its kernels loaded, or ``error``)."""
        self.error = error
        self.done = True
        self._finished.set()

    def pause(self, seconds: float) -> None:
        """Sleep up to ``seconds``, waking as soon as the job is done (the next call can
        swap its kernels in)."""
        self._finished.wait(seconds)

    def prepare_soon(self) -> None:
        """Import Numba and build the kernels (lowering, kernel modules: everything but
        their machine code) in a thread of this process while the worker compiles, so that
        its reply leaves only the machine code to load. Started once, from a call after the
        first (the first result does not wait for Numba's import)."""
        with self._prepare_lock:
            if self._preparing is not None or self.done:
                return
            self._preparing = threading.Thread(target=self._prepare, daemon=True,
                                               name="dualgraph-kernel-prepare")
        self._preparing.start()

    def _prepare(self) -> None:
        with contextlib.suppress(Exception):  # the reply's load builds (and reports) again
            self._build()

    def _build(self) -> list:
        if self._built is None:
            build = import_backend().build
            t0 = time.perf_counter()
            built = []
            for attr, graph, name, parallel, write_to, inputs in self.specs:
                k = build(graph, parallel, True, name, write_to)
                built.append((attr, k, k.signature_of(inputs)))
            self._built = built
            self.load_seconds += time.perf_counter() - t0
        return self._built

    def load(self) -> None:
        """Build the kernels here (unless `prepare_soon` has) and load the worker's machine
        code from the disk cache; raises if that would mean compiling (the worker's code is
        not there)."""
        with self._prepare_lock:
            preparing = self._preparing
        if preparing is not None:
            preparing.join()
        # The reader thread imports Numba and reads the cache: thousands of small file
        # operations, each releasing the GIL. With the user's loop holding it for the whole
        # switch interval (5 ms) after each, the load took seconds (the scalar step swapped
        # 11 s after a 0.5 s compile); a short interval while loading keeps it brief.
        with _short_switch_interval():
            self._load()

    def _load(self) -> None:
        t0 = time.perf_counter()
        kernels = []
        for attr, k, sig in self._build():
            if not k.on_disk(sig):
                raise RuntimeError(f"Numba's disk cache has no code for {k.path}")
            k.compile(sig=sig)
            kernels.append((attr, k))
        self.kernels = kernels
        self.load_seconds += time.perf_counter() - t0


_SWITCH = {"depth": 0, "saved": 0.005}
_SWITCH_LOCK = threading.Lock()


@contextlib.contextmanager
def _short_switch_interval() -> Any:
    """A 0.1 ms GIL switch interval while any load runs (the first in saves the user's,
    the last out restores it: loads may overlap)."""
    with _SWITCH_LOCK:
        if _SWITCH["depth"] == 0:
            _SWITCH["saved"] = sys.getswitchinterval()
            sys.setswitchinterval(min(_SWITCH["saved"], 1e-4))
        _SWITCH["depth"] += 1
    try:
        yield
    finally:
        with _SWITCH_LOCK:
            _SWITCH["depth"] -= 1
            if _SWITCH["depth"] == 0:
                sys.setswitchinterval(_SWITCH["saved"])


def _package_root() -> str:
    """The directory holding this ``dualgraph`` package."""
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


# Run by the worker's interpreter before anything else: its import path is the
# interpreter's own (standard library, site-packages) plus the directory holding this very
# dualgraph (its kernel sources carry the version), never the caller's working directory,
# so a `pickle.py` or `numpy.py` there cannot run inside the worker.
_BOOTSTRAP = (
    "import sys\n"
    "sys.path[:] = [{root!r}] + [p for p in sys.path if p and p != '.']\n"
    "import runpy\n"
    "runpy.run_module('dualgraph.backend.numba.worker', run_name='__main__', alter_sys=True)\n"
)


def worker_command() -> list:
    """The compile worker's command line: `_BOOTSTRAP` with ``-P`` where Python has it
    (3.11+: no unsafe path entry), run from the file system root (`_Worker`)."""
    safe = ["-P"] if sys.version_info >= (3, 11) else []
    return [sys.executable, *safe, "-c", _BOOTSTRAP.format(root=_package_root())]


def worker_env() -> dict:
    """The worker's environment: the caller's, with relative ``PYTHONPATH`` entries
    dropped (they would name the caller's working directory) and the cache locations made
    absolute (the worker runs elsewhere)."""
    env = dict(os.environ)
    paths = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if os.path.isabs(p)]
    if paths:
        env["PYTHONPATH"] = os.pathsep.join(paths)
    else:
        env.pop("PYTHONPATH", None)
    for key in ("DUALGRAPH_CACHE_DIR", "XDG_CACHE_HOME", "NUMBA_CACHE_DIR"):
        if env.get(key):
            env[key] = os.path.abspath(env[key])
    return env


class _Worker:
    """The compile worker process and the two daemon threads that feed and read it (the
    calling thread never blocks on its pipes)."""

    def __init__(self) -> None:
        self._stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(
            worker_command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=self._stderr, env=worker_env(), cwd=os.path.abspath(os.sep), close_fds=True)
        self.pid = self.proc.pid
        self.owner = os.getpid()
        self.dead: str | None = None
        self.submitted = 0
        self._jobs: dict[int, _Job] = {}
        self._lock = threading.Lock()
        self._out: queue.SimpleQueue = queue.SimpleQueue()
        for target, name in ((self._write, "writer"), (self._read, "reader")):
            threading.Thread(target=target, name=f"dualgraph-compile-worker-{name}",
                             daemon=True).start()

    def submit(self, job: _Job, payload: bytes) -> bool:
        """Queue ``job`` (``payload``: its pickled frame); False when the worker is gone."""
        with self._lock:
            if self.dead is not None:
                return False
            self._jobs[job.id] = job
            self.submitted += 1
        self._out.put(payload)
        return True

    def worn_out(self) -> bool:
        """Served its `job_limit` and idle: time to replace it."""
        with self._lock:
            return self.submitted >= job_limit() and not self._jobs

    def _write(self) -> None:
        try:
            while True:
                payload = self._out.get()
                if payload is None:
                    break
                self.proc.stdin.write(_LEN.pack(len(payload)) + payload)
                self.proc.stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            pass  # the worker is gone; the reader reports it

    def _read(self) -> None:
        try:
            while True:
                msg = _read_frame(self.proc.stdout)
                if msg is None:
                    break
                job_id, error, seconds = msg
                with self._lock:
                    job = self._jobs.pop(job_id, None)
                if job is not None:
                    job.seconds = seconds
                    if error is None:
                        try:
                            job.load()
                        except Exception as e:  # noqa: BLE001 - the job fails, with why
                            error = f"loading its kernels failed: {type(e).__name__}: {e}"
                    job.finish(error)
                    BLAS_SHARE.end()
        except (OSError, ValueError, EOFError):
            pass
        try:
            rc = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            rc = None
        reason = _exit_reason(rc, self._stderr)
        with self._lock:
            self.dead = reason
            jobs, self._jobs = list(self._jobs.values()), {}
        for job in jobs:
            job.finish(reason)
            BLAS_SHARE.end()

    def stop(self, timeout: float = 2.0) -> None:
        """Stop the worker (an unfinished compile is abandoned) and reap it."""
        self._out.put(None)
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                f.close()
            except OSError:
                pass


def _read_frame(f: Any) -> Any:
    """The worker's next reply, or ``None`` at the end of its output. The frame format is
    `dualgraph.backend.numba.worker`'s, repeated here: importing that module would import
    Numba, which this process must not wait for before its first result."""
    head = f.read(_LEN.size)
    if len(head) < _LEN.size:
        return None
    size = _LEN.unpack(head)[0]
    data = f.read(size)
    return pickle.loads(data) if len(data) == size else None


def _exit_reason(rc: int | None, stderr: Any) -> str:
    if rc is None:
        what = "stopped answering"
    elif rc < 0:
        try:
            name = signal.Signals(-rc).name
        except ValueError:
            name = f"signal {-rc}"
        what = f"was killed by {name}"
    else:
        what = f"exited with status {rc}"
    tail = ""
    try:
        stderr.seek(0)
        lines = [ln for ln in stderr.read().decode(errors="replace").splitlines() if ln.strip()]
        if lines:
            tail = f" ({lines[-1].strip()[:300]})"
    except (OSError, ValueError):
        pass
    return f"the compile worker {what}{tail}"


def worker() -> _Worker:
    """The running worker of this process, started on first use (again after one died,
    in a child process after a fork, and in place of one that served its `job_limit`)."""
    global _WORKER
    with _WORKER_LOCK:
        w = _WORKER
        if not _running(w):
            if w is not None and w.owner == os.getpid():
                w.stop(timeout=0.5)
            w = _WORKER = _Worker()
        return w


def _running(w: _Worker | None) -> bool:
    """Whether ``w`` is this process's live worker, fit for more jobs."""
    return w is not None and w.dead is None and w.owner == os.getpid() and not w.worn_out()


def prestart(option: bool, cache: bool) -> None:
    """Start the compile worker when `dg.compile` wraps a function that will compile tiered
    (``option``, ``cache``: its ``tiered`` and ``cache`` options), so that the worker's
    imports of dualgraph and Numba run while the program builds its model and data and
    traces the first call, instead of after the first trace. Nothing when tiering is off,
    or a worker runs already. Costs the caller a process start (about a millisecond of
    CPU); a worker that could not start is started again, and reported, at the first
    tiered compile."""
    if not enabled(option, cache) or _running(_WORKER) or not _disk_cache_usable():
        return
    with contextlib.suppress(OSError):
        worker()


def worker_pid() -> int | None:
    """The compile worker's process id (``None``: none started, or it is gone)."""
    w = _WORKER
    return w.pid if w is not None and w.dead is None and w.owner == os.getpid() else None


@atexit.register
def shutdown() -> None:
    """Stop the compile worker (at interpreter exit: no orphan process)."""
    global _WORKER
    with _WORKER_LOCK:
        w, _WORKER = _WORKER, None
    if w is not None and w.owner == os.getpid():
        w.stop()


def start(entry: Any, arrays: list, user: list, name: str, parallel: bool,
          write_to: dict, backward: bool) -> bool:
    """Put ``entry`` at tier 0 and send its graphs to the worker: the forward (or only)
    graph for the kernel inputs ``arrays``, and the backward graph when ``backward``.
    False (compile blocking instead) when the disk cache cannot hand kernels over, a
    graph cannot be sent, or Numba is loaded and the kernels are in its disk cache
    already (loading them is quick)."""
    if not _disk_cache_usable():
        return False
    specs = [("kernel", entry.optimized, name, parallel, dict(write_to),
              [describe(a) for a in arrays])]
    if backward:
        outs = [o for k, o in enumerate(entry.optimized.outputs) if k not in write_to]
        res = [describe(arrays[j]) if kind == "in" else _out_desc(outs[j], entry.optimized)
               for kind, j in entry.residual_plan]
        specs.append(("bwd_kernel", entry.backward_graph, "backward", parallel, {},
                      [_cot_desc(o, entry.backward_graph) for o in user] + res))
    job = _Job(specs)
    job.processes = processes_for(spec[1] for spec in specs)
    if "numba" in sys.modules and _load_now(job):
        for attr, k in job.kernels:
            setattr(entry, attr, k)
        return True
    try:
        payload = _payload(job)
    except Exception:  # noqa: BLE001 - an attribute that cannot be sent: compile here
        return False
    BLAS_SHARE.start()  # before the job can finish (its end() must follow this)
    try:
        if not worker().submit(job, payload) and not worker().submit(job, payload):
            BLAS_SHARE.end()
            return False
    except OSError as e:  # no process could be started: compile here, as before
        BLAS_SHARE.end()
        warnings.warn(f"dualgraph: could not start the compile worker ({e}); compiling "
                      "blocking", RuntimeWarning, stacklevel=4)
        return False
    for attr, graph, _, _, w, _ in specs:
        setattr(entry, attr, InterpretedKernel(graph, w, job))
    entry.pending = job
    entry.tier0 = True
    return True


# Settings the worker must share with this process at the time of the job: the kernels it
# compiles must be the ones this process then builds and loads (split the same way).
_JOB_SETTINGS = ("DUALGRAPH_SEGMENT_LINES", "DUALGRAPH_COMPILE_JOBS", "DUALGRAPH_LLVM_OPT")


def _payload(job: _Job) -> bytes:
    """The job's frame for the worker: its graphs, this process's cache directory and
    compile settings (the worker was started with the environment of its time, which may
    have changed; the worker decides from them and the graphs how many processes compile
    the job, as `start` did)."""
    settings = {k: os.environ.get(k) for k in _JOB_SETTINGS}
    return pickle.dumps((job.id, os.environ.get("DUALGRAPH_CACHE_DIR"),
                         [spec[1:] for spec in job.specs], settings),
                        protocol=pickle.HIGHEST_PROTOCOL)


def _load_now(job: _Job) -> bool:
    """Load ``job``'s kernels if Numba's disk cache has them all (a warm cache)."""
    try:
        job.load()
    except Exception:  # noqa: BLE001 - not cached (or not loadable): the worker compiles
        return False
    return True


def _disk_cache_usable() -> bool:
    """Whether the kernel cache directory can be used (missing: it will be created 0700),
    by the rule of `dualgraph.backend.numba.cache`, checked without importing Numba."""
    d = os.environ.get("DUALGRAPH_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
        "dualgraph")
    try:
        st = os.stat(d)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return (stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid()
            and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH))


def poll(entry: Any, stats: Any) -> None:
    """Per call of an entry at tier 0: count the call, and swap in the compiled kernels
    once they are loaded (or give up, with one warning, if the job failed)."""
    job = entry.pending
    if job is not None:
        if job.done:
            with _SWAP_LOCK:
                if entry.pending is job:
                    _finish(entry, job, stats)
        else:
            job.polls += 1
            if job.polls >= 2 and job._preparing is None:
                job.prepare_soon()
    if entry.tier0:
        stats.tier0_calls += 1


def _finish(entry: Any, job: _Job, stats: Any, between_calls: bool = False) -> None:
    """Swap in ``job``'s kernels, or warn that it failed. ``between_calls``: not during a
    call (`wait`), so the next call is the first at tier 1."""
    entry.pending = None
    stats.worker_seconds += job.seconds
    stats.numba_seconds += job.load_seconds
    if job.error is not None:
        if stats.tier_failure is None:
            stats.tier_failure = job.error
            first = job.error.splitlines()[0][:500] if job.error else "unknown error"
            warnings.warn(f"dualgraph: tiered compile failed: {first}. This function keeps "
                          "running its optimized graph in NumPy (tier 0): correct, not "
                          "compiled; dg.compile(fn, tiered=False) compiles blocking",
                          RuntimeWarning, stacklevel=4)
        return
    for attr, k in job.kernels:
        setattr(entry, attr, k)
    entry.tier0 = False
    if stats.swap_call is None:
        stats.swap_call = stats.calls + between_calls
        stats.swap_seconds = time.perf_counter() - stats.first_call_at


def wait(fn: Any, timeout: float = 60.0) -> bool:
    """Block until every entry of compiled function ``fn`` has left tier 0's pending state
    (for tests and benchmarks); True if all were swapped in, False on timeout or failure."""
    compiled = getattr(fn, "compiled", fn)
    deadline = time.monotonic() + timeout
    while True:
        pending = [e for e in compiled.entries() if getattr(e, "pending", None) is not None]
        if all(e.pending.done for e in pending):
            break
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    for e in pending:
        with _SWAP_LOCK:
            if e.pending is not None:
                _finish(e, e.pending, compiled.stats, between_calls=True)
    return not any(getattr(e, "tier0", False) for e in compiled.entries())
