"""Run a compiled entry: feed its kernel, write back what the call changed, wrap outputs.

This is the per-call path of every compiled function: the entry's call plan was worked out
when it was traced (`specialize`), so a call only moves arrays.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..eager import grad_mode
from ..eager.compiled_node import attach_backward, attach_gradients
from ..eager.internal import array_of, bump_version, make_tensor, set_grad
from ..eager.tensor import Tensor
from .random_state import refresh_key
from .specialize import _Entry


def run(entry: _Entry, args: tuple, arrays: list) -> Any:
    """The outputs of ``entry``'s kernel for ``args`` (a train entry also records its tape
    node when grad mode is on); ``arrays`` is `arg_arrays(args)`, a new list."""
    # The key is this call's own, passed to the kernel directly: two threads calling at
    # once must not both read the shared trace key the later one set.
    ins = entry.arrays(arrays, args, refresh_key() if entry.random else None)
    kernel = entry.kernel
    outs = kernel.new_outputs()
    kernel.run(ins, outs)
    # An int names an argument by position (`_Entry.refer_to_arguments`).
    arg = args.__getitem__ if entry.arg_refs else None
    for t in entry.inplace:
        bump_version(arg(t) if type(t) is int else t)
    for t, k in entry.copy_writes:
        t = arg(t) if type(t) is int else t
        np.copyto(array_of(t), outs[k].reshape(t.shape))
        bump_version(t)
    for t, k in entry.grad_set:
        t = arg(t) if type(t) is int else t
        o = outs[k]
        set_grad(t, make_tensor(o if o.shape == t.shape else o.reshape(t.shape), False, None))
    for t in entry.grad_none:
        set_grad(arg(t) if type(t) is int else t, None)
    results = []
    for o, n in zip(outs, entry.optimized.outputs[:entry.n_user]):
        results.append(make_tensor(o if o.shape == n.shape else o.reshape(n.shape), False, None))
    if entry.mode == "train" and grad_mode.GRAD_ENABLED.value:
        tensors = [a for a in args if isinstance(a, (Tensor, np.ndarray))]
        if entry.sources:
            tensors += [t if kind == "tensor" else t.grad if kind == "grad" else
                        args[t].grad if kind == "arg_grad" else None
                        for kind, t in entry.sources]
        if entry.joint:
            attach_gradients(tensors, entry.wrt_tensors, [outs[k] for k in entry.grad_out],
                             results[0], entry.saved_inputs)
        else:
            res = tuple(ins[j] if kind == "in" else outs[j] for kind, j in entry.residual_plan)
            attach_backward(entry.bwd_kernel, tensors, entry.wrt_tensors, res, results,
                            entry.out_rg, entry.saved_inputs)
    for k, i in entry.passthrough:
        results[k] = args[i]
    single = entry.single
    if single is True:
        return results[0]
    return single.unflatten(results) if single is not False else tuple(results)
