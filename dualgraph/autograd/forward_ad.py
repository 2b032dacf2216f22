"""``torch.autograd.forward_ad``: dual tensors (a primal with a tangent) under
`dual_level`.

Tangents are not carried through the ops as they run: `make_dual` marks a tensor as a dual
input (a view of the primal that records autograd history) and `unpack_dual` computes the
tangent of any tensor derived from the dual inputs of the current level on demand, by the
double-VJP trick (two backward passes, see `dualgraph.func.jvp`). So every differentiable
op has a forward-mode derivative, and the values are the exact Jacobian-vector products;
what it needs is the tape: the ops between `make_dual` and `unpack_dual` must run with
grad mode on, and a primal that did not require grad is made dual as a leaf that does
(so, unlike PyTorch's, results derived from it report ``requires_grad=True``; their
reverse-mode history is otherwise untouched). Leaving the level drops its tangents.

>>> with dual_level():
...     x = make_dual(dg.tensor([1.0, 2.0]), dg.ones(2))
...     unpack_dual(x.sin()).tangent        # cos(x)
tensor([ 0.5403, -0.4161])
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, NamedTuple

from ..eager.grad_mode import enable_grad
from ..func import forward_product

# The operator mixin eager tensors and tracers share: dual tensors work inside `dg.compile`.
from ..ops.mixin import TensorOps as Tensor

__all__ = ["UnpackedDualTensor", "dual_level", "enter_dual_level", "exit_dual_level",
           "make_dual", "unpack_dual"]


class UnpackedDualTensor(NamedTuple):
    """What `unpack_dual` returns: the primal and its tangent (None if it has none)."""

    primal: Any
    tangent: Any


class _Level:
    """The dual inputs made at one level, with their tangents."""

    def __init__(self, index: int) -> None:
        self.index = index
        self.duals: list[tuple[Tensor, Tensor]] = []


_levels: list[_Level] = []


def enter_dual_level() -> int:
    """Starts a level for dual tensors and returns its index (only one at a time)."""
    if _levels:
        raise RuntimeError("Nested forward mode AD is not supported at the moment")
    _levels.append(_Level(0))
    return 0


def exit_dual_level(*, level: int | None = None) -> None:
    """Ends the current level; its tangents are dropped."""
    if not _levels or (level is not None and level != _levels[-1].index):
        raise RuntimeError("Trying to exit a forward AD level that was not the last one "
                           "that was created.")
    _levels.pop()


@contextmanager
def dual_level() -> Iterator[int]:
    """The context in which dual tensors live: ``with dual_level(): ...``."""
    level = enter_dual_level()
    try:
        yield level
    finally:
        exit_dual_level(level=level)


def _current(level: int | None, fn: str) -> _Level:
    if not _levels:
        raise RuntimeError(f"{fn}: no dual level is active; use `with "
                           "dg.autograd.forward_ad.dual_level():`")
    if level is not None and level != _levels[-1].index:
        raise RuntimeError(f"{fn}: level {level} is not the active dual level")
    return _levels[-1]


def make_dual(tensor: Tensor, tangent: Tensor, *, level: int | None = None) -> Tensor:
    """A tensor with ``tensor``'s values whose tangent is ``tangent`` (same shape, a
    floating dtype).

    >>> with dual_level():
    ...     y = make_dual(dg.tensor(2.0), dg.tensor(1.0)) ** 3
    ...     unpack_dual(y).tangent
    tensor(12.)
    """
    state = _current(level, "make_dual")
    if not isinstance(tensor, Tensor) or not isinstance(tangent, Tensor):
        raise TypeError("make_dual: expected tensor and tangent to be Tensors, got "
                        f"{type(tensor).__name__} and {type(tangent).__name__}")
    if tensor.dtype.kind not in "fc" or tangent.dtype.kind not in "fc":
        raise ValueError("Expected primal to be floating point or complex, but got: "
                         f"{tensor.dtype}" if tensor.dtype.kind not in "fc" else
                         f"Expected tangent to be floating point or complex, but got: "
                         f"{tangent.dtype}")
    if tuple(tangent.shape) != tuple(tensor.shape):
        raise RuntimeError(f"Trying to set a forward gradient that has a different size than "
                           f"that of the original Tensor, this is not supported. Tensor is "
                           f"of size {list(tensor.shape)} while the given forward gradient "
                           f"is of size {list(tangent.shape)}.")
    with enable_grad():
        if tensor.requires_grad:
            dual = tensor.view_as(tensor)
        else:
            dual = tensor.detach().requires_grad_(True)
    state.duals.append((dual, tangent))
    return dual


def unpack_dual(tensor: Any, *, level: int | None = None) -> UnpackedDualTensor:
    """(primal, tangent) of ``tensor``: the tangent is the Jacobian-vector product of the
    level's dual inputs' tangents, None when ``tensor`` depends on none of them (or no
    level is active)."""
    if not _levels or not isinstance(tensor, Tensor):
        return UnpackedDualTensor(tensor, None)
    state = _current(level, "unpack_dual")
    if not state.duals:
        return UnpackedDualTensor(tensor, None)
    for d, t in state.duals:
        if d is tensor:
            return UnpackedDualTensor(tensor, t)
    duals, tangents = zip(*state.duals)
    with enable_grad():
        tangent = forward_product(tensor, list(duals), list(tangents),
                                   any(t.requires_grad for t in tangents))
    return UnpackedDualTensor(tensor, tangent)
