"""Public forms that tensors and tracers both expose over existing primitives: ``softmax``
and ``log_softmax`` with the ``axis=``-first signature (`dualgraph.ops.softmax` holds the
primitives), and PyTorch's ``out=`` keyword."""

from __future__ import annotations

import functools
import inspect
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from . import softmax as SM


def log_softmax(x: Any, axis: Any = None, *, dim: Any = None, dtype: Any = None) -> Any:
    """``x - logsumexp(x)`` along ``axis`` (alias ``dim``): `SM.log_softmax`."""
    return SM.log_softmax(x, dim, dtype, axis=axis)


def softmax(x: Any, axis: Any = None, *, dim: Any = None, dtype: Any = None) -> Any:
    """``exp(x) / sum(exp(x))`` along ``axis`` (alias ``dim``): `SM.softmax`."""
    return SM.softmax(x, dim, dtype, axis=axis)


# -------------------------------------------------------------------------------- out=
_KIND_RANK = {"b": 0, "u": 1, "i": 1, "f": 2}


def with_out(fn: Callable) -> Callable:
    """``fn`` with PyTorch's ``out=`` keyword: the result is written into ``out`` (resized,
    with a warning, when it has the wrong shape and is not empty), which is returned. As
    in PyTorch, ``out=`` is not differentiable: with grad mode on, an argument that
    requires grad raises ``RuntimeError``.

    >>> dg.add(a, b, out=buf)

    It also takes PyTorch's keyword spellings of the tensor arguments, ``input=`` and
    ``other=`` (`tensor_keywords`), so a public function needs one wrapper, not two.
    """
    name = fn.__name__
    second = _second_parameter(fn)

    @functools.wraps(fn)
    def wrapper(*args: Any, out: Any = None, **kwargs: Any) -> Any:
        if kwargs:
            args = tensor_keywords(args, kwargs, second)
        if out is None:
            return fn(*args, **kwargs)
        return write_out(name, out, fn, args, kwargs)

    wrapper.accepts_input_keyword = True
    return wrapper


def _second_parameter(fn: Callable) -> str | None:
    code = getattr(inspect.unwrap(fn), "__code__", None)
    names = code.co_varnames[:code.co_argcount] if code is not None else ()
    return names[1] if len(names) > 1 else None


def tensor_keywords(args: tuple, kwargs: dict, second: str | None) -> tuple:
    """``args`` with PyTorch's ``input=`` (the first tensor) and ``other=`` (the second)
    moved out of ``kwargs`` into place, for a function whose parameters are named
    otherwise (``x``, ``y``); ``second``: the name of its second parameter."""
    if "input" in kwargs:
        args = (kwargs.pop("input"),) + args
    if "other" in kwargs and second not in (None, "other") and len(args) == 1:
        args = args + (kwargs.pop("other"),)
    return args


def write_out(name: str, out: Any, fn: Callable, args: tuple, kwargs: dict) -> Any:
    """``out := fn(*args, **kwargs)`` as `with_out` describes; a function of several
    results (``max(x, dim)``'s values and indices) takes a tuple of as many tensors."""
    result = fn(*args, **kwargs)
    if isinstance(result, tuple):
        if not (isinstance(out, (tuple, list)) and len(out) == len(result)):
            raise TypeError(f"{name}(): argument 'out' must be a tuple of {len(result)} "
                            f"Tensors, not {type(out).__name__}")
        for r, o in zip(result, out):
            _write_one(name, o, r)
        return type(result)(*out) if hasattr(result, "_fields") else tuple(out)
    return _write_one(name, out, result)


def _write_one(name: str, out: Any, result: Any) -> Any:
    # Any tensor of any mode (the operator mixin imports this module, so no isinstance).
    if not (hasattr(out, "copy_") and hasattr(out, "shape")):
        raise TypeError(f"{name}(): argument 'out' must be Tensor, not {type(out).__name__}")
    # The result requires grad exactly when grad mode is on and an argument does.
    if result.requires_grad:
        raise RuntimeError(f"{name}(): functions with out=... arguments don't support "
                           "automatic differentiation, but one of the arguments requires grad.")
    rk, ok = np.dtype(result.dtype), np.dtype(out.dtype)
    if _KIND_RANK.get(rk.kind, 3) > _KIND_RANK.get(ok.kind, 3):
        raise RuntimeError(f"result type {_torch_type(rk)} can't be cast to the desired output "
                           f"type {_torch_type(ok)}")
    if tuple(out.shape) != tuple(result.shape):
        if out.numel() != 0:
            warnings.warn(
                f"An output with one or more elements was resized since it had shape "
                f"{list(out.shape)}, which does not match the required output shape "
                f"{list(result.shape)}. This behavior is deprecated, and in a future PyTorch "
                "release outputs will not be resized unless they have zero elements. You can "
                "explicitly reuse an out tensor t by resizing it, inplace, to zero elements "
                "with t.resize_(0).", UserWarning, stacklevel=4)
        resize = getattr(out, "resize_", None)
        if resize is None:
            raise RuntimeError(f"{name}(): out= of shape {tuple(out.shape)} for a result of "
                               f"shape {tuple(result.shape)} cannot be resized inside a "
                               "compiled function; pass an out tensor of the right shape")
        resize(tuple(result.shape))
    out.copy_(result)
    return out


def _torch_type(dtype: np.dtype) -> str:
    return {"f": "Float", "i": "Long", "u": "Byte", "b": "Bool"}.get(dtype.kind, str(dtype))
