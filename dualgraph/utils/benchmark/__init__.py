"""``dg.utils.benchmark``: PyTorch's ``torch.utils.benchmark`` timer.

`Timer` runs a statement string (with ``setup`` and ``globals``) through the standard
library's `timeit` and returns a `Measurement` with PyTorch's fields: ``times`` (seconds
per run of the statement), ``mean``, ``median``, ``iqr``, ``number_per_run``,
``raw_times``.

>>> from dualgraph.utils import benchmark
>>> m = benchmark.Timer("x + x", globals={"x": dg.ones(4)}).timeit(10)
>>> len(m.times), m.number_per_run
(1, 10)
"""

from __future__ import annotations

import statistics
import timeit as _timeit
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Measurement", "Timer"]


@dataclass
class Measurement:
    """Times of one statement: ``raw_times[i]`` is the total of ``number_per_run`` runs."""

    number_per_run: int
    raw_times: list[float]
    stmt: str = ""
    label: str | None = None
    sub_label: str | None = None
    description: str | None = None
    num_threads: int = 1
    metadata: dict | None = field(default=None)

    @property
    def times(self) -> list[float]:
        """Seconds per single run of the statement, one entry per block."""
        return [t / self.number_per_run for t in self.raw_times]

    @property
    def mean(self) -> float:
        return statistics.fmean(self.times)

    @property
    def median(self) -> float:
        return statistics.median(self.times)

    @property
    def iqr(self) -> float:
        ts = sorted(self.times)
        if len(ts) < 2:
            return 0.0
        q = statistics.quantiles(ts, n=4, method="inclusive")
        return q[2] - q[0]

    @property
    def significant_figures(self) -> int:
        """Digits the spread justifies (PyTorch's rule of thumb: 1 to 4)."""
        if self.median <= 0 or len(self.times) < 2:
            return 4
        rel = self.iqr / self.median
        return 1 if rel > 0.1 else 2 if rel > 0.01 else 3 if rel > 0.001 else 4

    def __repr__(self) -> str:
        unit, scale = _unit(self.median)
        head = f"<dualgraph.utils.benchmark.Measurement object at {id(self):#x}>"
        lines = [head, self.label or "", self.stmt or self.description or ""]
        lines.append(f"  Median: {self.median / scale:.2f} {unit}")
        if len(self.times) > 1:
            lines.append(f"  IQR:    {self.iqr / scale:.2f} {unit} "
                         f"({len(self.times)} measurements, {self.number_per_run} runs per "
                         "measurement, 1 thread)")
        else:
            lines.append(f"  1 measurement, {self.number_per_run} runs , 1 thread")
        return "\n".join(line for line in lines if line)


def _unit(seconds: float) -> tuple[str, float]:
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale:
            return unit, scale
    return "ns", 1e-9


class Timer:
    """PyTorch's ``Timer(stmt, setup, globals, label, sub_label, description,
    num_threads)``; ``timer`` picks the clock (wall by default, `time.process_time` for
    CPU time on a shared machine).

    >>> Timer("x * 2", globals={"x": dg.ones(3)}).blocked_autorange(min_run_time=0.01).mean > 0
    True
    """

    def __init__(self, stmt: str = "pass", setup: str = "pass", global_setup: str = "",
                 timer: Any = None, globals: dict | None = None,  # noqa: A002
                 label: str | None = None, sub_label: str | None = None,
                 description: str | None = None, env: str | None = None,
                 num_threads: int = 1, language: str = "python") -> None:
        if not isinstance(stmt, str) or not isinstance(setup, str):
            raise TypeError("Timer expects stmt and setup as strings of Python code, as "
                            "torch.utils.benchmark.Timer does")
        if language not in ("python", "py"):
            raise ValueError(f"Timer language {language!r}: only Python statements run here")
        self._stmt, self._label = stmt, label
        self._sub_label, self._description = sub_label, description
        self._num_threads = num_threads
        kwargs: dict[str, Any] = {"globals": dict(globals or {})}
        if timer is not None:
            kwargs["timer"] = timer
        self._timer = _timeit.Timer(stmt, "\n".join(s for s in (global_setup, setup) if s),
                                    **kwargs)

    def _measure(self, number: int, raw: list[float]) -> Measurement:
        return Measurement(number, raw, self._stmt, self._label, self._sub_label,
                           self._description, self._num_threads)

    def timeit(self, number: int = 1000000) -> Measurement:
        """One block of ``number`` runs (after one warm-up run, as PyTorch does)."""
        if number < 1:
            raise ValueError(f"timeit number must be at least 1, got {number}")
        self._timer.timeit(1)
        return self._measure(number, [self._timer.timeit(number)])

    def repeat(self, repeat: int = -1, number: int = -1) -> None:
        raise NotImplementedError("Timer.repeat is not supported in PyTorch either: "
                                  "use blocked_autorange or timeit")

    def _block_size(self) -> int:
        """Runs per block so that one block takes at least 0.1 ms of the clock's time."""
        number = 1
        while True:
            if self._timer.timeit(number) >= 1e-4 or number >= 1 << 20:
                return number
            number *= 10

    def blocked_autorange(self, callback: Any = None, min_run_time: float = 0.2) -> Measurement:
        """Blocks of a calibrated size until ``min_run_time`` seconds have been spent."""
        number = self._block_size()
        raw: list[float] = []
        total = 0.0
        while total < min_run_time or not raw:
            t = self._timer.timeit(number)
            raw.append(t)
            total += t
            if callback is not None:
                callback(number, t)
        return self._measure(number, raw)

    def adaptive_autorange(self, threshold: float = 0.1, *, min_run_time: float = 0.01,
                           max_run_time: float = 10.0, callback: Any = None) -> Measurement:
        """Blocks until the IQR/median falls below ``threshold`` or ``max_run_time``."""
        number = self._block_size()
        raw: list[float] = []
        total = 0.0
        while total < max_run_time:
            t = self._timer.timeit(number)
            raw.append(t)
            total += t
            if callback is not None:
                callback(number, t)
            m = self._measure(number, raw)
            if total >= min_run_time and len(raw) > 3 and m.iqr / m.median < threshold:
                break
        return self._measure(number, raw)
