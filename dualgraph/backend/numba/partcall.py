"""The Python function that runs a split kernel's parts in order (`Kernel.run`).

A split kernel's step is a few hundred part calls, each a few microseconds of machine
code, so what surrounds a call counts: building an argument list, unpacking it, making
the flat views of the arrays a flat part takes, and the dispatcher's typing of every
argument. The caller made here is one generated function per kernel in which

- every array is a local variable and every call names its arguments: no argument list
  is built or unpacked;
- the flat views of work arrays are made with the work arrays and kept with them (a
  work set of the kernel's pool holds both), and the flat view of an input is kept with
  the input it was made of and made again only for another array object;
- a part whose arguments are all the kernel's own (work arrays, their flat views,
  constants) calls its compiled entry directly: those arguments' types never change,
  so the dispatcher's typing of them is skipped. A part reading an input or an output
  goes through its dispatcher, which types the caller's arrays.

An input passed flat that is not C-contiguous has no flat view: the caller then hands
the call to ``slow``, which copies it (`Kernel._copying`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = ["make_caller", "reuse_flat"]


def reuse_flat(x: np.ndarray, cell: list) -> np.ndarray | None:
    """The flat view of ``x`` kept in ``cell`` (one ``(array, view)`` pair, replaced
    whole, so threads see either pair), made and kept when ``cell`` holds another
    array's; None when ``x`` is not C-contiguous (a reshape would copy it)."""
    if not x.flags.c_contiguous:
        return None
    v = x.reshape(-1)
    cell[0] = (x, v)
    return v


def make_caller(n_in: int, n_out: int, n_work: int, consts: list, flat: list[int],
                calls: list[tuple[Callable, tuple[int, ...], bool]], pool: list,
                new_work: Callable[[], list], slow: Callable[[list, list, list], None]
                ) -> Callable[[list, list], None]:
    """``run(ins, outs)`` for a split kernel whose arguments sit at positions of one
    list ``[*ins, *outs, *work, *consts, *flat views]`` (`Kernel._wire`): ``flat[k]`` is
    the position of the array whose flat view is at position ``n_in + n_out + n_work +
    len(consts) + k``; ``calls`` holds per part its function (dispatcher or compiled
    entry), its argument positions and whether it is an entry. ``new_work()`` makes a
    work set: the work arrays, then the flat views of those ``flat`` names, in its
    order. ``slow(ins, outs, work)`` runs the call when an input or output passed flat
    is strided."""
    base = n_in + n_out
    n_const = len(consts)
    first_flat = base + n_work + n_const

    def name(p: int) -> str:
        if p < n_in:
            return f"i{p}"
        if p < base:
            return f"o{p - n_in}"
        if p < base + n_work:
            return f"w{p - base}"
        if p < first_flat:
            return f"c{p - base - n_work}"
        return f"f{p - first_flat}"

    ns: dict[str, Any] = {"pool": pool, "new_work": new_work, "slow": slow,
                          "reuse_flat": reuse_flat}
    for k, c in enumerate(consts):
        ns[f"c{k}"] = c
    work_flats = [k for k, p in enumerate(flat) if base <= p < base + n_work]
    other_flats = [k for k, p in enumerate(flat) if not base <= p < base + n_work]
    lines = ["def run(ins, outs):",
             "    work = pool.pop() if pool else new_work()",
             "    try:"]
    body = []
    if n_in:
        body.append(f"{', '.join(name(p) for p in range(n_in))}, = ins")
    if n_out:
        body.append(f"{', '.join(name(p) for p in range(n_in, base))}, = outs")
    held = [name(p) for p in range(base, base + n_work)] + [f"f{k}" for k in work_flats]
    if held:
        body.append(f"{', '.join(held)}, = work")
    for k in other_flats:
        src = name(flat[k])
        if flat[k] < n_in:
            # The same input array object call after call (a parameter) keeps its view.
            cell = f"cell{k}"
            ns[cell] = [(None, None)]
            body += [f"e = {cell}[0]",
                     f"if e[0] is {src}:",
                     f"    f{k} = e[1]",
                     "else:",
                     f"    f{k} = reuse_flat({src}, {cell})",
                     f"    if f{k} is None:",
                     "        return slow(ins, outs, work)"]
        else:
            body += [f"if not {src}.flags.c_contiguous:",
                     "    return slow(ins, outs, work)",
                     f"f{k} = {src}.reshape(-1)"]
    for j, (fn, args, _) in enumerate(calls):
        ns[f"p{j}"] = fn
        body.append(f"p{j}({', '.join(name(p) for p in args)})")
    lines += [f"        {line}" for line in body or ["pass"]]
    lines += ["    finally:", "        pool.append(work)"]
    exec(compile("\n".join(lines) + "\n", "<dualgraph parts caller>", "exec"), ns)  # noqa: S102
    return ns["run"]
