"""``dg.profiler``: PyTorch's ``torch.profiler`` for eager code.

While a `profile` is active, every op dualgraph runs (each ``bind`` of a registry op,
forward and backward, named as the IR names it: ``matmul``, ``add``, ``sum``) is timed with
a wall clock, as PyTorch's CPU events are. Each tape node a backward runs is a row named as
PyTorch names it, ``autograd::engine::evaluate_function: MulBackward0``, with the node's
own row ``MulBackward0`` inside it (and, inside that, the ops a recorded backward runs).
`record_function` adds a named range around user code. ``key_averages().table()`` prints
PyTorch's table of self and total CPU time. Ops a compiled function runs inside its kernels
are not seen one by one: each call is a ``CompiledFunction`` row, and its backward a
``CompiledFunctionBackward`` row, as under ``torch.compile``.

>>> with dg.profiler.profile(activities=[dg.profiler.ProfilerActivity.CPU]) as prof:
...     y = (dg.ones(3) * 2).sum()
>>> [e.key for e in prof.key_averages()]
['mul', 'sum']
"""

from __future__ import annotations

import enum
import functools
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .. import modes
from ..eager import autograd as _engine
from ..eager.detours import ACTIVE as DETOURS

__all__ = ["EventList", "FunctionEvent", "FunctionEventAvg", "ProfilerAction",
           "ProfilerActivity", "profile", "record_function", "schedule"]


class ProfilerActivity(enum.Enum):
    CPU = "CPU"
    CUDA = "CUDA"
    XPU = "XPU"
    MTIA = "MTIA"


class ProfilerAction(enum.Enum):
    NONE = 0
    WARMUP = 1
    RECORD = 2
    RECORD_AND_SAVE = 3


def schedule(*, wait: int, warmup: int, active: int, repeat: int = 0,
             skip_first: int = 0) -> Callable[[int], ProfilerAction]:
    """PyTorch's step schedule: which `profile.step` numbers are recorded."""
    def action(step: int) -> ProfilerAction:
        if step < skip_first:
            return ProfilerAction.NONE
        step -= skip_first
        cycle = wait + warmup + active
        if repeat > 0 and step // cycle >= repeat:
            return ProfilerAction.NONE
        pos = step % cycle
        if pos < wait:
            return ProfilerAction.NONE
        if pos < wait + warmup:
            return ProfilerAction.WARMUP
        return (ProfilerAction.RECORD_AND_SAVE if pos == cycle - 1
                else ProfilerAction.RECORD)
    return action


@dataclass
class FunctionEvent:
    """One timed op or range; times in microseconds, as PyTorch's."""

    name: str
    start_us: float
    cpu_time_total: float = 0.0
    self_cpu_time_total: float = 0.0
    input_shapes: list = field(default_factory=list)
    children: list = field(default_factory=list)

    @property
    def key(self) -> str:
        return self.name


@dataclass
class FunctionEventAvg:
    """Events sharing a name (and input shapes when grouped by them)."""

    key: str
    count: int = 0
    cpu_time_total: float = 0.0
    self_cpu_time_total: float = 0.0
    input_shapes: list = field(default_factory=list)

    @property
    def cpu_time(self) -> float:
        return self.cpu_time_total / self.count if self.count else 0.0

    @property
    def self_cpu_time(self) -> float:
        return self.self_cpu_time_total / self.count if self.count else 0.0


def _fmt_us(us: float) -> str:
    if us >= 1e6:
        return f"{us / 1e6:.3f}s"
    if us >= 1e3:
        return f"{us / 1e3:.3f}ms"
    return f"{us:.3f}us"


class EventList(list):
    """A list of events with PyTorch's `table`."""

    def table(self, sort_by: str | None = None, row_limit: int = 100,
              max_name_column_width: int = 55, header: str | None = None,
              top_level_events_only: bool = False, **_: Any) -> str:
        """PyTorch's columns: Name, Self CPU %, Self CPU, CPU total %, CPU total, CPU time
        avg, # of Calls (plus Input Shapes when recorded)."""
        rows = list(self)
        if sort_by is not None:
            key = {"self_cpu_time_total": "self_cpu_time_total",
                   "cpu_time_total": "cpu_time_total", "cpu_time": "cpu_time",
                   "count": "count"}.get(sort_by)
            if key is None:
                raise ValueError(f"sort_by={sort_by!r}: use self_cpu_time_total, "
                                 "cpu_time_total, cpu_time or count")
            rows.sort(key=lambda e: getattr(e, key), reverse=True)
        rows = rows[:row_limit] if row_limit is not None and row_limit >= 0 else rows
        total_self = sum(e.self_cpu_time_total for e in self) or 1.0
        shapes = any(getattr(e, "input_shapes", None) for e in rows)
        width = min(max([len(e.key) for e in rows] + [4]), max_name_column_width)
        cols = [("Name", width), ("Self CPU %", 12), ("Self CPU", 12), ("CPU total %", 12),
                ("CPU total", 12), ("CPU time avg", 12), ("# of Calls", 12)]
        if shapes:
            cols.append(("Input Shapes", 40))
        sep = "  ".join("-" * w for _, w in cols)
        lines = [header] if header else []
        lines += [sep, "  ".join(f"{n:>{w}}" if i else f"{n:<{w}}"
                                 for i, (n, w) in enumerate(cols)), sep]
        for e in rows:
            count = getattr(e, "count", 1)
            avg = e.cpu_time_total / count if count else 0.0
            cells = [e.key[:width].ljust(width),
                     f"{100 * e.self_cpu_time_total / total_self:.2f}%".rjust(12),
                     _fmt_us(e.self_cpu_time_total).rjust(12),
                     f"{100 * e.cpu_time_total / total_self:.2f}%".rjust(12),
                     _fmt_us(e.cpu_time_total).rjust(12), _fmt_us(avg).rjust(12),
                     str(count).rjust(12)]
            if shapes:
                cells.append(str(e.input_shapes)[:40].rjust(40))
            lines.append("  ".join(cells))
        lines += [sep, f"Self CPU time total: {_fmt_us(sum(e.self_cpu_time_total for e in self))}"]
        return "\n".join(lines) + "\n"

    def key_averages(self, group_by_input_shape: bool = False) -> "EventList":
        groups: dict[Any, FunctionEventAvg] = {}
        for e in self:
            k = (e.name, str(e.input_shapes)) if group_by_input_shape else e.name
            avg = groups.get(k)
            if avg is None:
                avg = groups[k] = FunctionEventAvg(
                    e.name, input_shapes=e.input_shapes if group_by_input_shape else [])
            avg.count += 1
            avg.cpu_time_total += e.cpu_time_total
            avg.self_cpu_time_total += e.self_cpu_time_total
        return EventList(groups.values())

    def total_average(self) -> FunctionEventAvg:
        avg = FunctionEventAvg("Total")
        for e in self:
            avg.count += getattr(e, "count", 1)
            avg.cpu_time_total += e.cpu_time_total
            avg.self_cpu_time_total += e.self_cpu_time_total
        return avg


# The profiles running now, outermost first.
ACTIVE: list["profile"] = []


def _shape(a: Any) -> list:
    s = getattr(a, "shape", None)
    return list(s) if s is not None else []


class profile:  # noqa: N801
    """Record the ops run in the block; PyTorch's keywords are accepted (only CPU
    activity exists: asking for CUDA raises)."""

    def __init__(self, *, activities: Any = None, schedule: Callable | None = None,
                 on_trace_ready: Callable | None = None, record_shapes: bool = False,
                 profile_memory: bool = False, with_stack: bool = False,
                 with_flops: bool = False, with_modules: bool = False,
                 use_cuda: bool = False, **_: Any) -> None:
        acts = set(activities or [ProfilerActivity.CPU])
        if use_cuda or acts - {ProfilerActivity.CPU}:
            raise RuntimeError("dualgraph profiles CPU activity only: no CUDA device exists")
        self.record_shapes = record_shapes
        self._schedule = schedule
        self._on_trace_ready = on_trace_ready
        self.step_num = 0
        self._events: list[FunctionEvent] = []
        self._stack: list[FunctionEvent] = []
        self._t0 = 0.0
        self._pushed = False

    def _recording(self) -> bool:
        if self._schedule is None:
            return True
        return self._schedule(self.step_num) in (ProfilerAction.RECORD,
                                                 ProfilerAction.RECORD_AND_SAVE)

    def _begin(self, name: str, args: tuple = ()) -> FunctionEvent:
        ev = FunctionEvent(name, (time.perf_counter() - self._t0) * 1e6,
                           input_shapes=[_shape(a) for a in args] if self.record_shapes else [])
        if self._stack:
            self._stack[-1].children.append(ev)
        self._stack.append(ev)
        return ev

    def _end(self, ev: FunctionEvent) -> None:
        ev.cpu_time_total = (time.perf_counter() - self._t0) * 1e6 - ev.start_us
        ev.self_cpu_time_total = ev.cpu_time_total - sum(c.cpu_time_total for c in ev.children)
        self._stack.pop()
        if self._recording():
            self._events.append(ev)

    def _process(self, below: Any) -> Callable:
        def process(op: Any, args: tuple, attrs: dict) -> Any:
            ev = self._begin(op.name, args)
            try:
                return below.process(op, args, attrs)
            finally:
                self._end(ev)
        return process

    def start(self) -> None:
        self._t0 = time.perf_counter()
        mode = modes.current_mode()
        if mode.tracing:
            return  # inside a compiled function's trace the ops are not run here
        modes.push_mode(self._process(mode))
        self._pushed = True
        ACTIVE.append(self)
        DETOURS.append("profile")
        _engine.NODE_RUNNER[0] = _run_node

    def stop(self) -> None:
        if self._pushed:
            modes.pop_mode()
            self._pushed = False
            ACTIVE.remove(self)
            DETOURS.remove("profile")
            if not ACTIVE:
                _engine.NODE_RUNNER[0] = None
        # With a schedule, a trace is ready at each cycle's last active step (`step`); at
        # stop only when the block ends inside an active window, as PyTorch does.
        if self._on_trace_ready is not None and self._recording():
            self._on_trace_ready(self)

    def __enter__(self) -> "profile":
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def step(self) -> None:
        """Advance the schedule by one step."""
        action = self._schedule(self.step_num) if self._schedule else None
        self.step_num += 1
        if action is ProfilerAction.RECORD_AND_SAVE and self._on_trace_ready is not None:
            self._on_trace_ready(self)

    def events(self) -> EventList:
        return EventList(self._events)

    def key_averages(self, group_by_input_shape: bool = False, **_: Any) -> EventList:
        return self.events().key_averages(group_by_input_shape)

    def export_chrome_trace(self, path: str) -> None:
        """Write the events in the Chrome trace format (chrome://tracing, Perfetto)."""
        trace = [{"name": e.name, "ph": "X", "ts": e.start_us, "dur": e.cpu_time_total,
                  "pid": 0, "tid": 0, "cat": "cpu_op"} for e in self._events]
        with open(path, "w") as f:
            json.dump({"traceEvents": trace}, f)


def _run_node(node: Any, g: Any) -> Any:
    """A tape node's backward, timed in every active profile as PyTorch's two rows."""
    name = node.name()
    events = [(p, p._begin(f"autograd::engine::evaluate_function: {name}"), p._begin(name))
              for p in ACTIVE]
    try:
        return node.apply(g)
    finally:
        for p, outer, inner in reversed(events):
            p._end(inner)
            p._end(outer)


class record_function:  # noqa: N801
    """A named range in the active profile (a no-op without one); a context manager or a
    decorator, as PyTorch's."""

    def __init__(self, name: str, args: str | None = None) -> None:
        self.name = name
        self._ev: list[tuple[profile, FunctionEvent]] = []

    def __enter__(self) -> "record_function":
        self._ev = [(p, p._begin(self.name)) for p in ACTIVE]
        return self

    def __exit__(self, *exc: Any) -> None:
        for p, ev in reversed(self._ev):
            p._end(ev)
        self._ev = []

    def __call__(self, fn: Callable) -> Callable:
        @functools.wraps(fn)
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            with record_function(self.name):
                return fn(*args, **kwargs)
        return wrapped


