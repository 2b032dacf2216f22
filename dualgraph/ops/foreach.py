"""PyTorch's ``torch._foreach_*`` functions: one tensor method applied across a list of
tensors (``torch._foreach_mul_(ema, 0.99)``, ``torch._foreach_add_(ema, params,
alpha=0.01)``), as EMA and hand-written optimizer code calls them.

Each is a loop over the tensors' own methods, so it records on the tape eagerly and traces
inside `dg.compile` as the per-tensor calls would. The in-place forms return the list they
were given, the others a tuple of new tensors; a second argument is a scalar, a tensor,
or a list of either as long as the first.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .mixin import TensorOps

_UNARY = ("abs", "acos", "asin", "atan", "ceil", "cos", "cosh", "erf", "erfc", "exp", "expm1",
          "floor", "frac", "lgamma", "log", "log10", "log1p", "log2", "neg", "reciprocal",
          "round", "rsqrt", "sigmoid", "sign", "sin", "sinh", "sqrt", "tan", "tanh", "trunc")
_BINARY = ("add", "sub", "mul", "div", "pow", "maximum", "minimum", "clamp_min", "clamp_max")
# The binary methods with no in-place form of their own (``x.maximum_`` does not exist).
_OUT_OF_PLACE_ONLY = {"maximum", "minimum"}


def _tensors(name: str, value: Any) -> list:
    if not isinstance(value, (list, tuple)) or not all(isinstance(t, TensorOps) for t in value):
        raise TypeError(f"{name}(): expected a list of tensors as its first argument, got "
                        f"{type(value).__name__}")
    if not value:
        raise RuntimeError("Tensor list must have at least one tensor.")
    return list(value)


def _spread(name: str, other: Any, n: int) -> list:
    """``other`` once per tensor: a list of tensors or of scalars as long as the first
    list, or one tensor or scalar for all."""
    if isinstance(other, (list, tuple)):
        if all(isinstance(o, TensorOps) for o in other):
            if len(other) != n:
                raise RuntimeError("Tensor lists must have the same number of tensors, got "
                                   f"{n} and {len(other)}")
        elif len(other) != n:
            raise RuntimeError("Tensor list must have same number of elements as scalar list.")
        return list(other)
    if isinstance(other, (bool, int, float, TensorOps)) or hasattr(other, "__float__"):
        return [other] * n
    raise TypeError(f"{name}(): expected a number, a tensor, or a list of either, got "
                    f"{type(other).__name__}")


def _names(method: str, inplace: bool) -> tuple[str, str]:
    """The function's name and the tensor method it calls."""
    return f"_foreach_{method}{'_' if inplace else ''}", method + "_" if inplace else method


def _named(fn: Callable, name: str, doc: str) -> Callable:
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = doc
    return fn


def _unary(method: str, inplace: bool) -> Callable:
    name, attr = _names(method, inplace)

    def fn(self: Any) -> Any:
        tensors = _tensors(name, self)
        out = [getattr(t, attr)() for t in tensors]
        return tensors if inplace else tuple(out)

    return _named(fn, name, f"``{attr}`` of each tensor of a list.")


def _binary(method: str, inplace: bool) -> Callable:
    name, attr = _names(method, inplace)

    def fn(self: Any, other: Any, **kwargs: Any) -> Any:
        tensors = _tensors(name, self)
        others = _spread(name, other, len(tensors))
        if inplace and method in _OUT_OF_PLACE_ONLY:
            for t, o in zip(tensors, others):
                t.copy_(getattr(t, method)(o))
            return tensors
        out = [getattr(t, attr)(o, **kwargs) for t, o in zip(tensors, others)]
        return tensors if inplace else tuple(out)

    return _named(fn, name,
                  f"``{attr}`` of each tensor of a list with a scalar, a tensor, or a list.")


def _ternary(method: str, inplace: bool) -> Callable:
    name, attr = _names(method, inplace)

    def fn(self: Any, tensor1: Any, tensor2: Any, value: Any = 1) -> Any:
        tensors = _tensors(name, self)
        firsts = _spread(name, tensor1, len(tensors))
        seconds = _spread(name, tensor2, len(tensors))
        # the scale: one for all, or one per tensor (PyTorch's ``scalars``)
        values = _spread(name, value, len(tensors))
        out = [getattr(t, attr)(a, b, value=v)
               for t, a, b, v in zip(tensors, firsts, seconds, values)]
        return tensors if inplace else tuple(out)

    return _named(fn, name, f"``{attr}`` of each tensor of a list.")


def _foreach_zero_(self: Any) -> list:
    """Zero each tensor of a list in place."""
    tensors = _tensors("_foreach_zero_", self)
    for t in tensors:
        t.zero_()
    return tensors


def _foreach_copy_(self: Any, src: Any, non_blocking: bool = False) -> list:
    """Copy ``src[i]`` into ``self[i]``."""
    tensors = _tensors("_foreach_copy_", self)
    for t, s in zip(tensors, _spread("_foreach_copy_", src, len(tensors))):
        t.copy_(s)
    return tensors


def _foreach_clone(self: Any) -> tuple:
    """A copy of each tensor of a list."""
    return tuple(t.clone() for t in _tensors("_foreach_clone", self))


def _foreach_norm(self: Any, ord: Any = 2, dtype: Any = None) -> tuple:  # noqa: A002
    """The vector ``ord``-norm of each tensor of a list (0-d tensors)."""
    # The tensor's own `norm` (over all elements, as `linalg.vector_norm`): `linalg` sits
    # above `ops`; `dtype` casts first, as `vector_norm(dtype=)` does.
    return tuple((t if dtype is None else t.to(dtype)).norm(ord)
                 for t in _tensors("_foreach_norm", self))


def _foreach_max(self: Any) -> tuple:
    """The largest element of each tensor of a list."""
    return tuple(t.max() for t in _tensors("_foreach_max", self))


def _build() -> dict[str, Callable]:
    table: dict[str, Callable] = {}
    for inplace in (False, True):
        for m in _UNARY:
            fn = _unary(m, inplace)
            table[fn.__name__] = fn
        for m in _BINARY:
            fn = _binary(m, inplace)
            table[fn.__name__] = fn
        for m in ("addcmul", "addcdiv", "lerp"):
            fn = _ternary(m, inplace) if m != "lerp" else _binary_lerp(inplace)
            table[fn.__name__] = fn
    for fn in (_foreach_zero_, _foreach_copy_, _foreach_clone, _foreach_norm, _foreach_max):
        table[fn.__name__] = fn
    return table


def _binary_lerp(inplace: bool) -> Callable:
    name, attr = _names("lerp", inplace)

    def fn(self: Any, tensors1: Any, weight: Any) -> Any:
        tensors = _tensors(name, self)
        ends = _spread(name, tensors1, len(tensors))
        weights = _spread(name, weight, len(tensors))
        out = [getattr(t, attr)(e, w) for t, e, w in zip(tensors, ends, weights)]
        return tensors if inplace else tuple(out)

    return _named(fn, name,
                  f"``{attr}`` of each tensor of a list towards ``tensors1`` by ``weight``.")


FOREACH = _build()
