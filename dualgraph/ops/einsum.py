"""``einsum``: Einstein summation lowered to existing primitives.

Each operand first loses its repeated subscripts (``diagonal``) and the subscripts no other
operand or the output needs (``sum``). Operands are then combined left to right; a pair is
permuted and reshaped to ``(batch, m, k) @ (batch, k, n)`` and multiplied with ``matmul``
(BLAS in compiled code), or, when nothing is contracted, broadcast and multiplied
elementwise (which fuses). Broadcast size-1 dims (from ``...``) are expanded first. The
result is permuted into the output's order. So einsum needs no primitive or lowering of
its own, and its gradient is the gradient of those ops.
"""

from __future__ import annotations

import math
import string
from typing import Any

from ..errors import ShapeError
from . import elementwise as E
from . import linalg as L
from . import reduce as R
from . import shape as S

_LETTERS = set(string.ascii_letters)


def _parse(equation: str, shapes: list) -> tuple[list[list[str]], list[str]]:
    """Each operand's subscripts and the output's, with ``...`` spelled out as fresh labels
    (``'0'``, ``'1'``, ... for the broadcast dims, right-aligned across operands)."""
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(shapes):
        few = "more" if len(terms) < len(shapes) else "fewer"
        raise RuntimeError(f"einsum(): {few} operands were provided than specified in the "
                         "equation")
    n_ell = 0
    subs = []
    for k, (term, shape) in enumerate(zip(terms, shapes)):
        labels = _labels(term, f"operand {k}")
        if "..." in labels:
            n = len(shape) - (len(labels) - 1)
            if n < 0:
                raise RuntimeError(f"einsum(): the number of subscripts in the equation "
                                 f"({len(labels) - 1}) is more than the number of dimensions "
                                 f"({len(shape)}) for operand {k}")
            n_ell = max(n_ell, n)
        elif len(labels) != len(shape):
            raise RuntimeError(f"einsum(): the number of subscripts in the equation "
                             f"({len(labels)}) does not match the number of dimensions "
                             f"({len(shape)}) for operand {k} and no ellipsis was given")
        subs.append(labels)
    ell = [str(i) for i in range(n_ell)]
    out_subs = []
    for labels, shape in zip(subs, shapes):
        if "..." in labels:
            i = labels.index("...")
            n = len(shape) - (len(labels) - 1)
            labels[i:i + 1] = ell[n_ell - n:]
        out_subs.append(labels)
    if arrow:
        out = _labels(rhs, "the output")
        if "..." in out:
            i = out.index("...")
            out[i:i + 1] = ell
        seen = set()
        for c in out:
            if c in seen:
                raise RuntimeError(f"einsum(): output subscript {c} appears more than once in "
                                 f"the output")
            seen.add(c)
            if not any(c in s for s in out_subs):
                raise RuntimeError(f"einsum(): output subscript {c} does not appear in the "
                                 f"equation for any input operand")
    else:
        counts: dict = {}
        for s in out_subs:
            for c in s:
                counts[c] = counts.get(c, 0) + 1
        out = ell + sorted(c for c, n in counts.items() if n == 1 and c not in ell)
    return out_subs, out


def _labels(term: str, what: str) -> list[str]:
    labels: list[str] = []
    i = 0
    while i < len(term):
        if term.startswith("...", i):
            if "..." in labels:
                raise RuntimeError(f"einsum(): found more than one ellipsis ('...') in {what}")
            labels.append("...")
            i += 3
        elif term[i] in _LETTERS:
            labels.append(term[i])
            i += 1
        else:
            raise RuntimeError(f"einsum(): invalid subscript given at index {i} in the equation "
                             f"string, subscripts must be in [a-zA-Z]")
    return labels


def _sizes(subs: list, operands: list) -> dict:
    """Each label's size; size-1 dims broadcast (PyTorch's rule), others must agree."""
    for k, (labels, x) in enumerate(zip(subs, operands)):
        own: dict = {}
        for c, s in zip(labels, x.shape):
            if own.setdefault(c, s) != s:
                raise ShapeError(f"einsum(): subscript {c} is repeated for operand {k} but the "
                                 f"sizes don't match, {s} != {own[c]}")
    sizes: dict = {}
    for k, (labels, x) in enumerate(zip(subs, operands)):
        for c, s in zip(labels, x.shape):
            old = sizes.get(c)
            if old is None or old == 1:
                sizes[c] = s
            elif s != 1 and s != old:
                raise ShapeError(f"einsum(): subscript {c} has size {s} for operand {k} which "
                                 f"does not broadcast with previously seen size {old}")
    return sizes


def _take_diagonals(x: Any, labels: list) -> tuple[Any, list]:
    """Repeated labels of one operand (``ii``) reduced to one dim by ``diagonal``."""
    while len(set(labels)) != len(labels):
        c = next(c for c in labels if labels.count(c) > 1)
        i = labels.index(c)
        j = labels.index(c, i + 1)
        x = S.diagonal(x, 0, i, j)
        labels = [c2 for k, c2 in enumerate(labels) if k not in (i, j)] + [c]
    return x, labels


def _sum_out(x: Any, labels: list, keep: set) -> tuple[Any, list]:
    axes = tuple(i for i, c in enumerate(labels) if c not in keep)
    if not axes:
        return x, labels
    return R.sum(x, axes), [c for c in labels if c in keep]


def _arrange(x: Any, labels: list, order: list, sizes: dict, expand: bool = True) -> Any:
    """``x`` (dims named ``labels``) permuted into ``order`` and (``expand``) broadcast to
    the labels' full sizes."""
    perm = tuple(labels.index(c) for c in order)
    if perm != tuple(range(len(perm))):
        x = S.permute(x, perm)
    full = tuple(sizes[c] for c in order)
    if expand and tuple(x.shape) != full:
        x = S.broadcast_to(x, full)
    return x


def _contract(a: Any, la: list, b: Any, lb: list, keep: set, sizes: dict) -> tuple[Any, list]:
    batch = [c for c in la if c in lb and c in keep]
    summed = [c for c in la if c in lb and c not in keep]
    a_only = [c for c in la if c not in lb]
    b_only = [c for c in lb if c not in la]
    if not summed:
        # Nothing contracted: a broadcast product (elementwise, so it fuses).
        a = _arrange(a, la, batch + a_only, sizes, expand=False)
        b = _arrange(b, lb, batch + b_only, sizes, expand=False)
        sa, sb = tuple(a.shape), tuple(b.shape)
        nb = len(batch)
        a = S.reshape(a, sa + (1,) * len(b_only))
        b = S.reshape(b, sb[:nb] + (1,) * len(a_only) + sb[nb:])
        return E.mul(a, b), batch + a_only + b_only
    a = _arrange(a, la, batch + a_only + summed, sizes)
    b = _arrange(b, lb, batch + summed + b_only, sizes)
    nb = tuple(sizes[c] for c in batch)
    m = math.prod(sizes[c] for c in a_only)
    k = math.prod(sizes[c] for c in summed)
    n = math.prod(sizes[c] for c in b_only)
    lead = (math.prod(nb),) if batch else ()
    prod = L.matmul(S.reshape(a, lead + (m, k)), S.reshape(b, lead + (k, n)))
    shape = nb + tuple(sizes[c] for c in a_only + b_only)
    return S.reshape(prod, shape), batch + a_only + b_only


def einsum(equation: str, *operands: Any) -> Any:
    """Einstein summation: ``dg.einsum("bij,bjk->bik", a, b)``; implicit output (labels seen
    once, sorted), ``...``, repeated labels (diagonals) and the list form
    ``einsum(eq, [a, b])`` as in PyTorch."""
    if len(operands) == 1 and isinstance(operands[0], (tuple, list)):
        operands = tuple(operands[0])
    if not isinstance(equation, str):
        raise TypeError("einsum(): the first argument must be the equation string")
    if not operands:
        raise RuntimeError("einsum(): must provide at least one operand")
    ops = list(operands)
    subs, out = _parse(equation, [tuple(x.shape) for x in ops])
    sizes = _sizes(subs, ops)
    # Per operand: diagonals, then sum the labels nothing else needs.
    items = []
    for k, (x, labels) in enumerate(zip(ops, subs)):
        x, labels = _take_diagonals(x, labels)
        others = set(out).union(*[set(s) for j, s in enumerate(subs) if j != k])
        x, labels = _sum_out(x, labels, others)
        items.append((x, labels))
    x, lx = items[0]
    for k in range(1, len(items)):
        y, ly = items[k]
        keep = set(out).union(*[set(s) for _, s in items[k + 1:]])
        # A label of x or y alone that nothing later needs was summed above.
        x, lx = _contract(x, lx, y, ly, keep, sizes)
    x, lx = _sum_out(x, lx, set(out))
    return _arrange(x, lx, out, sizes)
