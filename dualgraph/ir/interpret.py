"""The reference interpreter: run any graph with the registry's NumPy kernels.

It is the oracle every pass, the backend and the property tests are compared against.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .graph import Graph, Node
from .optable import op_table


def interpret(graph: Graph, *args: Any) -> tuple:
    """Outputs of ``graph`` (a tuple of arrays) for input arrays ``args``."""
    if len(args) != len(graph.inputs):
        raise TypeError(f"graph takes {len(graph.inputs)} inputs, got {len(args)}")
    ops = op_table()
    env: dict[int, Any] = {}
    for node, a in zip(graph.inputs, args):
        arr = np.asarray(a)  # a Tensor's __array__ gives its data, uncopied
        if arr.shape != tuple(node.shape):
            raise ValueError(f"input of shape {arr.shape} for a graph input of {node.type_str}")
        env[id(node)] = arr
    for n in graph.nodes:
        ins = [env[id(i)] if isinstance(i, Node) else i for i in n.inputs]
        if n.op == "const":
            out = n.attrs["value"]
        elif n.op == "fused":
            out = interpret(n.attrs["body"], *ins)[0]
        else:
            out = ops[n.op].impl(*ins, **n.attrs)
        env[id(n)] = np.asarray(out)
    return tuple(env[id(o)] for o in graph.outputs)
