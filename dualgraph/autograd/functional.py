"""``dg.autograd.functional``: PyTorch's higher-order autograd helpers, eager only.

``jacobian`` and ``hessian`` build their results row by row from reverse-mode gradients
(``vectorize`` is accepted and changes nothing: the rows are exact either way); ``jvp`` uses
the double-backward trick (a gradient is linear in its seed, so differentiating the seed
gives the forward product), and ``hvp``/``vhp`` differentiate a gradient once more.

>>> J = dg.autograd.functional.jacobian(lambda x: x ** 2, dg.tensor([1.0, 2.0]))
>>> H = dg.autograd.functional.hessian(lambda x: (x ** 3).sum(), dg.tensor([1.0, 2.0]))
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..eager.creation import ones, zeros
from ..eager.grad_mode import enable_grad
from ..eager.tensor import Tensor, grad
from ..ops.shape import reshape, stack

__all__ = ["hessian", "hvp", "jacobian", "jvp", "vhp", "vjp"]


def _as_tuple(x: Any, arg: str, fn: str) -> tuple[bool, tuple]:
    """(whether ``x`` was one tensor, ``x`` as a tuple of tensors)."""
    single = isinstance(x, Tensor)
    xs = (x,) if single else tuple(x) if isinstance(x, (tuple, list)) else None
    if xs is None or not all(isinstance(t, Tensor) for t in xs):
        raise TypeError(f"The {arg} given to {fn} must be either a Tensor or a tuple of "
                        f"Tensors but got {type(x).__name__}.")
    return single, xs


def _prepare(xs: tuple, create_graph: bool) -> tuple:
    """Inputs the function is re-run on: fresh leaves that require grad, or, to
    differentiate the result again (``create_graph``), views keeping the inputs' history."""
    out = []
    for x in xs:
        if create_graph and x.requires_grad:
            out.append(x.view_as(x))
        else:
            out.append(x.detach().requires_grad_(True))
    return tuple(out)


def _outputs(func: Callable, xs: tuple, fn: str) -> tuple[bool, tuple]:
    with enable_grad():
        out = func(*xs)
    return _as_tuple(out, "outputs of the user-provided function", fn)


def _grads(outs: tuple, xs: tuple, seeds: tuple | None, create_graph: bool, strict: bool,
           fn: str) -> tuple:
    """Gradients of ``outs`` (seeded with ``seeds``) for ``xs``; zeros where an input does
    not reach the outputs (an error with ``strict``)."""
    live = [(o, s) for o, s in zip(outs, seeds or (None,) * len(outs)) if o.requires_grad]
    got: tuple = (None,) * len(xs)
    if live:
        with enable_grad():
            got = grad([o for o, _ in live], list(xs), [s for _, s in live],
                       retain_graph=True, create_graph=create_graph, allow_unused=True)
    res = []
    for k, (x, g) in enumerate(zip(xs, got)):
        if g is None:
            if strict:
                raise RuntimeError(
                    f"The output of the user-provided function is independent of input {k}. "
                    f"This is not allowed in strict mode ({fn}).")
            g = zeros(*x.shape, dtype=x.dtype)
        res.append(g)
    return tuple(res)


def _check_v(v: Any, like: tuple, what: str, fn: str) -> tuple:
    if v is None:
        if all(t.numel() == 1 for t in like):
            return tuple(ones(*t.shape, dtype=t.dtype) for t in like)
        raise RuntimeError(f"The vector v can only be None if the {what} of the user-provided "
                           f"function is a single element ({fn}).")
    _, vs = _as_tuple(v, "v", fn)
    if len(vs) != len(like):
        raise RuntimeError(f"v has {len(vs)} tensors but the {what} has {len(like)} ({fn}).")
    for a, b in zip(vs, like):
        if tuple(a.shape) != tuple(b.shape):
            raise RuntimeError(f"Mismatch in shape: v has shape {tuple(a.shape)} but the "
                               f"{what} has shape {tuple(b.shape)} ({fn}).")
    return vs


def _finish(xs: tuple, create_graph: bool) -> tuple:
    return xs if create_graph else tuple(x.detach() for x in xs)


def jacobian(func: Callable, inputs: Any, create_graph: bool = False, strict: bool = False,
             vectorize: bool = False, strategy: str = "reverse-mode") -> Any:
    """The Jacobian of ``func`` at ``inputs``: for one input and one output a tensor of shape
    ``output.shape + input.shape``; a tuple per input and/or per output otherwise.

    >>> jacobian(lambda x, y: x * y, (dg.ones(2), dg.ones(2)))   # (diag(y), diag(x))
    """
    if strategy not in ("reverse-mode", "forward-mode"):
        raise ValueError('Expected strategy to be either "forward-mode" or "reverse-mode".')
    single_in, xs = _as_tuple(inputs, "inputs", "jacobian")
    xs = _prepare(xs, create_graph)
    single_out, outs = _outputs(func, xs, "jacobian")
    blocks = []  # blocks[i][j]: d outs[i] / d xs[j]
    for o in outs:
        flat = reshape(o, -1)
        rows: list[list] = [[] for _ in xs]
        for e in range(flat.shape[0]):
            gs = _grads((flat[e],), xs, None, create_graph, strict, "jacobian")
            for j, g in enumerate(gs):
                rows[j].append(g)
        blocks.append(tuple(
            _finish((reshape(stack(rows[j]), tuple(o.shape) + tuple(x.shape))
                     if rows[j] else zeros(*(tuple(o.shape) + tuple(x.shape)), dtype=x.dtype),),
                    create_graph)[0]
            for j, x in enumerate(xs)))
    if single_out:
        return blocks[0][0] if single_in else blocks[0]
    return tuple(b[0] for b in blocks) if single_in else tuple(blocks)


def hessian(func: Callable, inputs: Any, create_graph: bool = False, strict: bool = False,
            vectorize: bool = False, outer_jacobian_strategy: str = "reverse-mode") -> Any:
    """The Hessian of scalar ``func`` at ``inputs``: one tensor of shape
    ``input.shape + input.shape`` for one input, else a tuple of tuples (block ``[i][j]``
    is the second derivative in inputs ``i`` and ``j``).

    >>> hessian(lambda x: (x ** 3).sum(), dg.tensor([1.0, 2.0]))   # diag(6 x)
    """
    single_in, xs = _as_tuple(inputs, "inputs", "hessian")

    def gradient(*args: Any) -> tuple:
        single_out, outs = _outputs(func, args, "hessian")
        if len(outs) != 1 or outs[0].numel() != 1:
            raise RuntimeError("The function given to hessian should return a single Tensor "
                               "with a single element.")
        return _grads(outs, args, None, True, strict, "hessian")

    jac = jacobian(gradient, xs, create_graph=create_graph, strict=strict,
                   vectorize=vectorize, strategy=outer_jacobian_strategy)
    return jac[0][0] if single_in else jac


def vjp(func: Callable, inputs: Any, v: Any = None, create_graph: bool = False,
        strict: bool = False) -> tuple:
    """``(func(inputs), v^T J)``: the vector-Jacobian product.

    >>> out, g = vjp(lambda x: x ** 2, x, dg.ones(3))     # g == 2 * x
    """
    single_in, xs = _as_tuple(inputs, "inputs", "vjp")
    xs = _prepare(xs, create_graph)
    single_out, outs = _outputs(func, xs, "vjp")
    vs = _check_v(v, outs, "output", "vjp")
    gs = _finish(_grads(outs, xs, vs, create_graph, strict, "vjp"), create_graph)
    outs = _finish(outs, create_graph)
    return (outs[0] if single_out else outs), (gs[0] if single_in else gs)


def jvp(func: Callable, inputs: Any, v: Any = None, create_graph: bool = False,
        strict: bool = False) -> tuple:
    """``(func(inputs), J v)``: the Jacobian-vector product.

    >>> out, t = jvp(lambda x: x ** 2, x, dg.ones(3))     # t == 2 * x
    """
    single_in, xs = _as_tuple(inputs, "inputs", "jvp")
    xs = _prepare(xs, create_graph)
    vs = _check_v(v, xs, "input", "jvp")
    single_out, outs = _outputs(func, xs, "jvp")
    # The gradient for seed u is linear in u: differentiating it, seeded with v, in u
    # gives J v.
    us = tuple(zeros(*o.shape, dtype=o.dtype, requires_grad=True) for o in outs)
    gs = _grads(outs, xs, us, True, strict, "jvp")
    live = [(g, w) for g, w in zip(gs, vs) if g.requires_grad]
    res: list = [None] * len(outs)
    if live:
        with enable_grad():
            res = list(grad([g for g, _ in live], list(us), [w for _, w in live],
                            retain_graph=True, create_graph=create_graph, allow_unused=True))
    out_t = []
    for k, (o, r) in enumerate(zip(outs, res)):
        if r is None:
            if strict:
                raise RuntimeError(f"The output {k} of the user-provided function is "
                                   "independent of the inputs. This is not allowed in strict "
                                   "mode (jvp).")
            r = zeros(*o.shape, dtype=o.dtype)
        out_t.append(r)
    out_t = _finish(tuple(out_t), create_graph)
    outs = _finish(outs, create_graph)
    return (outs[0] if single_out else outs), (out_t[0] if single_out else out_t)


def _second(func: Callable, inputs: Any, v: Any, create_graph: bool, strict: bool,
            fn: str) -> tuple:
    single_in, xs = _as_tuple(inputs, "inputs", fn)
    xs = _prepare(xs, create_graph)
    single_out, outs = _outputs(func, xs, fn)
    if len(outs) != 1 or outs[0].numel() != 1:
        raise RuntimeError(f"The function given to {fn} should return a single Tensor with a "
                           "single element.")
    vs = _check_v(v, xs, "input", fn)
    gs = _grads(outs, xs, None, True, strict, fn)
    live = [(g, w) for g, w in zip(gs, vs) if g.requires_grad]
    res: tuple = (None,) * len(xs)
    if live:
        with enable_grad():
            res = grad([g for g, _ in live], list(xs), [w for _, w in live], retain_graph=True,
                       create_graph=create_graph, allow_unused=True)
    res = tuple(zeros(*x.shape, dtype=x.dtype) if r is None else r for x, r in zip(xs, res))
    res = _finish(res, create_graph)
    out = _finish(outs, create_graph)[0]
    return out, (res[0] if single_in else res)


def vhp(func: Callable, inputs: Any, v: Any = None, create_graph: bool = False,
        strict: bool = False) -> tuple:
    """``(func(inputs), v^T H)`` for a scalar ``func``: the vector-Hessian product."""
    return _second(func, inputs, v, create_graph, strict, "vhp")


def hvp(func: Callable, inputs: Any, v: Any = None, create_graph: bool = False,
        strict: bool = False) -> tuple:
    """``(func(inputs), H v)`` for a scalar ``func``: the Hessian-vector product (equal to
    `vhp` for a twice continuously differentiable function, whose Hessian is symmetric)."""
    return _second(func, inputs, v, create_graph, strict, "hvp")
