"""Layouts and view shapes for `Tensor.view`'s rule: each case builds a tensor by a few
layout ops (the same calls on dualgraph and PyTorch) and asks for a view of another shape.
`record_view_goldens.py` records PyTorch's answer for each (`view_goldens.json`)."""

from __future__ import annotations

import math
import random
from typing import Any


def _factor(n: int, rng: random.Random) -> tuple:
    """A random shape of ``n`` elements (size-1 dimensions included now and then)."""
    dims = []
    while n > 1:
        d = rng.choice([k for k in range(2, n + 1) if n % k == 0])
        dims.append(d)
        n //= d
    if rng.random() < 0.3:
        dims.insert(rng.randrange(len(dims) + 1), 1)
    rng.shuffle(dims)
    return tuple(dims) or (1,)


def _ops(shape: tuple, rng: random.Random) -> tuple[list, tuple]:
    """A few layout ops on a tensor of ``shape``, and the shape they give."""
    ops, shape = [], list(shape)
    for _ in range(rng.randint(1, 3)):
        kind = rng.choice(["transpose", "slice", "select", "unsqueeze", "expand", "mul",
                           "permute"])
        nd = len(shape)
        if kind == "transpose" and nd >= 2:
            i, j = rng.sample(range(nd), 2)
            ops.append(["transpose", i, j])
            shape[i], shape[j] = shape[j], shape[i]
        elif kind == "permute" and nd >= 2:
            perm = list(range(nd))
            rng.shuffle(perm)
            ops.append(["permute", perm])
            shape = [shape[p] for p in perm]
        elif kind == "slice" and nd:
            d = rng.randrange(nd)
            if shape[d] < 2:
                continue
            step = rng.choice([1, 1, 2])
            start = rng.randrange(2) if shape[d] > 2 else 0
            stop = rng.choice([shape[d], shape[d] - 1]) if shape[d] - 1 > start else shape[d]
            ops.append(["slice", d, start, stop, step])
            shape[d] = len(range(start, stop, step))
        elif kind == "select" and nd >= 2:
            d = rng.randrange(nd)
            ops.append(["select", d, shape[d] - 1])
            del shape[d]
        elif kind == "unsqueeze":
            d = rng.randrange(nd + 1)
            ops.append(["unsqueeze", d])
            shape.insert(d, 1)
        elif kind == "expand":
            ones = [k for k, s in enumerate(shape) if s == 1]
            if not ones:
                continue
            d = rng.choice(ones)
            ops.append(["expand", d, 2])
            shape[d] = 2
        elif kind == "mul":
            ops.append(["mul"])
    return ops, tuple(shape)


def _targets(shape: tuple, rng: random.Random) -> list:
    """View shapes of the same size: merges, splits, a permuted shape, -1, size-1 dims."""
    n = math.prod(shape)
    out = [[-1], list(reversed(shape)), list(_factor(n, rng))]
    if len(shape) >= 2:
        k = rng.randrange(len(shape) - 1)  # merge two neighbours
        out.append(list(shape[:k]) + [shape[k] * shape[k + 1]] + list(shape[k + 2:]))
    big = [k for k, s in enumerate(shape) if s >= 4 and s % 2 == 0]
    if big:  # split one
        k = rng.choice(big)
        out.append(list(shape[:k]) + [2, shape[k] // 2] + list(shape[k + 1:]))
    out.append([1, *shape, 1])
    return out


def cases(count: int = 300, seed: int = 0) -> list[dict]:
    """``count`` cases: a base shape, the ops, the view shape."""
    rng = random.Random(seed)
    found = []
    while len(found) < count:
        base = _factor(rng.choice([6, 8, 12, 16, 24, 36]), rng)
        ops, shape = _ops(base, rng)
        for target in _targets(shape, rng):
            found.append({"base": list(base), "ops": ops, "shape": target})
    return found[:count]


def build(lib: Any, base: list, ops: list) -> Any:
    """The case's tensor, built by ``lib`` (dualgraph or torch)."""
    x = lib.arange(float(math.prod(base))).reshape(*base)
    for op in ops:
        kind = op[0]
        if kind == "transpose":
            x = x.transpose(op[1], op[2])
        elif kind == "permute":
            x = x.permute(*op[1])
        elif kind == "slice":
            index = [slice(None)] * op[1] + [slice(op[2], op[3], op[4])]
            x = x[tuple(index)]
        elif kind == "select":
            x = x.select(op[1], op[2])
        elif kind == "unsqueeze":
            x = x.unsqueeze(op[1])
        elif kind == "expand":
            size = list(x.shape)
            size[op[1]] = op[2]
            x = x.expand(*size)
        elif kind == "mul":
            x = x * 2
    return x
