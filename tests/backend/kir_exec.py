"""A plain NumPy/Python executor of the kernel IR, for tests only.

It gives every statement its meaning directly (a loop runs, a store writes one element, a
GEMM multiplies strided matrices), with no generated source in between: a block printed
for Numba and the same block run here must agree, which checks that the IR means what it
says and that the printer prints what the IR means.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from dualgraph.backend import kir

_BIN = {
    "+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
    "/": lambda a, b: a / b, "//": lambda a, b: a // b, "%": lambda a, b: a % b,
    "**": lambda a, b: a ** b, "&": lambda a, b: a & b, "|": lambda a, b: a | b,
    "^": lambda a, b: a ^ b, "<<": lambda a, b: a << b, ">>": lambda a, b: a >> b,
    "<": lambda a, b: a < b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b, "==": lambda a, b: a == b, "!=": lambda a, b: a != b,
    "and": lambda a, b: a and b, "or": lambda a, b: a or b,
}
_CALL = {"erf": math.erf, "abs": abs, "min": min, "max": max, "int": int, "float": float,
         "bool": bool, "sigmoid": lambda x: 1 / (1 + np.exp(-x))}


class _JumpError(Exception):
    def __init__(self, kind: str) -> None:
        self.kind = kind


def run(stmts: Any, arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Execute ``stmts`` with ``arrays`` bound to the parameter buffers' names; returns
    every buffer by name (parameters written in place)."""
    env: dict[str, Any] = dict(arrays)
    _block(stmts.stmts if isinstance(stmts, kir.Block) else stmts, env, {})
    return env


def value(e: Any, env: dict, sc: dict) -> Any:
    if isinstance(e, (int, np.integer)):
        return int(e)  # a plain int index, as `kir.const` would read it
    if isinstance(e, kir.Const):
        return np.array(e.value, e.dtype)[()] if e.dtype != kir.INDEX else int(e.value)
    if isinstance(e, kir.Var):
        return sc[e.name]
    if isinstance(e, kir.Load):
        idx = tuple(int(value(i, env, sc)) for i in e.index)
        arr = env[e.buf.name]
        return arr.reshape(-1)[0] if arr.ndim == 0 or not e.buf.shape else arr[idx]
    if isinstance(e, kir.Bin):
        return _BIN[e.op](value(e.a, env, sc), value(e.b, env, sc))
    if isinstance(e, kir.Un):
        a = value(e.a, env, sc)
        return -a if e.op == "-" else (~a if e.op == "~" else not a)
    if isinstance(e, kir.Call):
        args = [value(a, env, sc) for a in e.args]
        fn = _CALL.get(e.fn) or getattr(np, e.fn)
        return np.array(fn(*args)).astype(e.dtype)[()]
    if isinstance(e, kir.Select):
        return value(e.a, env, sc) if value(e.cond, env, sc) else value(e.b, env, sc)
    if isinstance(e, kir.Cast):
        return np.array(value(e.a, env, sc)).astype(e.dtype)[()]
    raise TypeError(e)


def _flat(env: dict, o: kir.Operand, item: int, sc: dict) -> tuple[np.ndarray, int]:
    offset = int(value(kir.const(o.offset), env, sc))
    return env[o.buf.name].reshape(-1), offset + item * o.batch_stride


def _matrix(env: dict, o: kir.Operand, item: int, shape: tuple, sc: dict) -> np.ndarray:
    """A GEMM operand as a 2-D array: read through its leading dimension, or (``ld``
    None) the buffer itself."""
    if not o.resolved:
        return np.asarray(env[o.buf.name]).reshape(shape)
    flat, off = _flat(env, o, item, sc)
    rows, cols = shape
    return np.stack([flat[off + r * o.ld: off + r * o.ld + cols] for r in range(rows)])


def _block(stmts: Any, env: dict, sc: dict) -> None:  # noqa: C901 - one case per statement
    for s in stmts:
        if isinstance(s, kir.Alloc):
            env[s.buf.name] = (np.empty(s.buf.shape or (1,), s.buf.dtype) if s.fill is None
                               else np.full(s.buf.shape or (1,), s.fill, s.buf.dtype))
        elif isinstance(s, kir.View):
            base = env[s.base.name]
            if s.how == "alias":
                env[s.buf.name] = base
            elif s.how == "reshape":
                env[s.buf.name] = np.ascontiguousarray(base).reshape(s.buf.shape or (1,))
            elif s.how == "transpose":
                env[s.buf.name] = np.transpose(base, s.arg)
            elif s.how == "bitcast":
                env[s.buf.name] = np.ascontiguousarray(base).reshape(-1).view(
                    s.buf.dtype).reshape(s.buf.shape or (1,))
            else:
                env[s.buf.name] = base[tuple(slice(*e) if isinstance(e, tuple) else
                                             int(value(kir.const(e), env, sc))
                                             for e in s.arg)]
        elif isinstance(s, kir.Let):
            sc[s.var.name] = value(s.value, env, sc)
        elif isinstance(s, kir.Store):
            arr = env[s.buf.name]
            idx = tuple(int(value(i, env, sc)) for i in s.index)
            v = value(s.value, env, sc)
            if s.combine:
                v = _BIN[s.combine](arr[idx], v)
            arr[idx] = v
        elif isinstance(s, kir.Loop):
            start, stop = int(value(kir.const(s.start), env, sc)), int(
                value(kir.const(s.extent), env, sc))
            for i in range(start, stop, s.step):
                sc[s.var.name] = i
                try:
                    _block(s.body, env, sc)
                except _JumpError as j:
                    if j.kind == "break":
                        break
        elif isinstance(s, kir.If):
            _block(s.then if value(s.cond, env, sc) else s.orelse, env, sc)
        elif isinstance(s, kir.Accum):
            acc, v = sc[s.var.name], value(s.value, env, sc)
            if s.combine == "add":
                acc = acc + v
            elif s.combine == "mul":
                acc = acc * v
            elif (v > acc if s.combine == "maximum" else v < acc) or (
                    s.nan_propagates and v != v):
                acc = v
            sc[s.var.name] = np.array(acc).astype(s.var.dtype)[()]
        elif isinstance(s, kir.Gemm):
            for item in range(s.batch):
                am = _matrix(env, s.a, item, (s.k, s.m) if s.ta else (s.m, s.k), sc)
                bm = _matrix(env, s.b, item, (s.n, s.k) if s.tb else (s.k, s.n), sc)
                c, oc = _flat(env, s.c, item, sc)
                prod = (am.T if s.ta else am) @ (bm.T if s.tb else bm)
                for r in range(s.m):
                    row = c[oc + r * s.c.ld: oc + r * s.c.ld + s.n]
                    row[:] = prod[r] + (s.beta * row if s.beta else 0)
        elif isinstance(s, kir.LibCall):
            args = [env[a.name] if isinstance(a, kir.Buffer) else
                    value(a, env, sc) if isinstance(a, kir.Expr) else a for a in s.args]
            out = env[s.outs[0].name] if s.outs else None
            if s.fn == "copy":
                out.reshape(-1)[:] = np.ascontiguousarray(args[0]).reshape(-1)
            elif s.fn == "gemm_batched":
                out[...] = np.matmul(args[0], args[1]).reshape(out.shape)
            elif s.fn == "fold_lanes":
                lanes = out
                for j in range(int(args[1])):
                    lanes[j % lanes.size] += np.float64(args[0][j])
            elif s.fn in _ROUTINES:
                # the compiled routine's own Python source, run as Python
                _ROUTINES[s.fn](args, out)
            else:
                raise TypeError(f"no library routine {s.fn!r}")
        elif isinstance(s, kir.Table):
            env[s.buf.name] = np.array(s.values, s.buf.dtype).reshape(s.buf.shape)
        elif isinstance(s, kir.Raise):
            raise {"IndexError": IndexError, "ValueError": ValueError}[s.kind](s.message)
        elif isinstance(s, kir.Jump):
            raise _JumpError(s.kind)


def _blas(name: str):
    from dualgraph.backend.numba import blas

    return getattr(blas, name).py_func


def _kernels(name: str):
    from dualgraph.backend.numba import kernels

    return getattr(kernels, name).py_func


# Library routines that are compiled helpers in `blas.py` and `kernels.py`, by their
# argument order there: the printed call passes the output buffer after the leading
# operands.
_ROUTINES = {
    "argsort_lines": lambda a, out: _kernels("argsort_lines")(a[0], out, a[1]),
    "max_pool_indices": lambda a, out: _blas("max_pool_indices")(a[0], out, a[1]),
    "max_pool_indices_2x2": lambda a, out: _blas("max_pool_indices_2x2")(a[0], out, a[1]),
    "pool_gather": lambda a, out: _blas("pool_gather")(a[0], a[1], out),
    "pool_scatter": lambda a, out: _blas("pool_scatter")(a[0], a[1], out),
    "row_softmax": lambda a, out: _rows(_softmax, a[:1], a[1:], out),
    "row_softmax_backward": lambda a, out: _rows(_softmax_backward, a[:2], a[2:], out),
    "row_layer_norm": lambda a, out: _rows(_layer_norm, a[:3], a[3:], out),
    "row_layer_norm_backward": lambda a, out: _rows(_layer_norm_backward, a[:3], a[3:], out),
    "row_layer_norm_weight_grad": lambda a, out: _rows(_layer_norm_weight_grad, a[:2], a[2:],
                                                       out),
}


# NumPy references of the row kernels' C functions (`row_kernels`), in float64: each
# operand padded in front to 4-D, the row along ``axis`` of that padding.
def _rows(fn, arrays, params, out):
    axis, flags, eps = int(params[0]), int(params[1]), float(params[2])
    padded = [np.asarray(a, np.float64).reshape((1,) * (4 - np.ndim(a)) + np.shape(a))
              for a in arrays]
    res = fn(*padded, axis=axis, flags=flags, eps=eps)
    out[...] = np.asarray(res).reshape(out.shape)


def _softmax(x, axis, flags, eps):
    z = x - x.max(axis, keepdims=True)
    if flags & 1:
        return z - np.log(np.exp(z).sum(axis, keepdims=True))
    e = np.exp(z)
    return e / e.sum(axis, keepdims=True)


def _softmax_backward(g, y, axis, flags, eps):
    if flags & 1:
        return g - np.exp(y) * g.sum(axis, keepdims=True)
    return y * (g - (g * y).sum(axis, keepdims=True))


def _xhat(x, axis, eps):
    mean = x.mean(axis, keepdims=True)
    rstd = 1.0 / np.sqrt(((x - mean) ** 2).mean(axis, keepdims=True) + eps)
    return (x - mean) * rstd, rstd


def _row_param(w, x, axis):
    """A 1-D weight or bias (padded to 4-D) laid along the row axis."""
    shape = [1, 1, 1, 1]
    shape[axis] = x.shape[axis]
    return w.reshape(shape)


def _layer_norm(x, w, b, axis, flags, eps):
    y, _ = _xhat(x, axis, eps)
    if flags & 2:
        y = y * _row_param(w, x, axis)
    if flags & 4:
        y = y + _row_param(b, x, axis)
    return y


def _layer_norm_backward(g, x, w, axis, flags, eps):
    xh, rstd = _xhat(x, axis, eps)
    gh = g * _row_param(w, x, axis) if flags & 2 else g
    return rstd * (gh - gh.mean(axis, keepdims=True) - xh * (gh * xh).mean(axis, keepdims=True))


def _layer_norm_weight_grad(g, x, axis, flags, eps):
    xh, _ = _xhat(x, axis, eps)
    other = tuple(d for d in range(4) if d != axis)
    return (g * xh).sum(other)
