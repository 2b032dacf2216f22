"""Random ops in compiled code: a fresh key per call, and which values are random.

A trace's random ops read one key, `eager.tensor.TRACE_KEY` (each op with its own
``stream``), which the trace lifts like any captured tensor: it is a kernel input. Before
each call of an entry that uses it, `refresh_key` gives it a new value drawn from
dualgraph's generator, so every call draws new numbers, the generator advances (by one
draw per call, not by as many as eager would), and `dg.manual_seed` makes a run of
compiled calls reproducible. The key's array is replaced, never written in place: the
backward of an earlier call keeps the key (and so the dropout mask) of its forward.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import numpy as np

from ..eager.internal import set_array
from ..eager.tensor import TRACE_KEY, draw_key, rng
from ..ir.graph import Graph, Node
from ..ops.random import is_random


def uses_random(graph: Graph) -> bool:
    """Whether ``graph`` has a random op (its entry needs a fresh key per call)."""
    return any(is_random(n.op) for n in graph.nodes)


def refresh_key() -> np.ndarray:
    """A new key from dualgraph's generator (one draw), also made the trace key's value;
    a call passes the returned array to its kernel (another thread may set the trace key
    again before the kernel reads it)."""
    key = draw_key()
    set_array(TRACE_KEY, key)
    return key


def random_outputs(graph: Graph) -> list[bool]:
    """Per output of ``graph``: whether its value depends on a random op."""
    random: dict[int, bool] = {}
    for n in graph.nodes:
        random[id(n)] = is_random(n.op) or any(
            random.get(id(i), False) for i in n.inputs if isinstance(i, Node))
    return [random.get(id(o), False) for o in graph.outputs]


@contextlib.contextmanager
def generator_preserved() -> Iterator[None]:
    """Run a block (a ``verify=True`` check) without advancing dualgraph's generator."""
    gen = rng()
    state = gen.bit_generator.state
    try:
        yield
    finally:
        gen.bit_generator.state = state
