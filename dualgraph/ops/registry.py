"""The op registry: one `OpDef` per primitive, the single source of truth for every mode.

An entry carries the IR name, PyTorch's autograd node name, the NumPy kernel (reference
semantics), the shape/dtype rule (the source of clear errors), the VJP rule written in
dualgraph ops (so it can be traced and differentiated again) and traits that passes and
backends read. The registry knows no backend: each backend keeps its own lowerings, keyed
by op name (the Numba one in ``dualgraph/backend/numba/lowerings/``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

OPS: dict[str, "OpDef"] = {}


@dataclass(frozen=True)
class Reduction:
    """What a reduction computes, as semantics any backend can read (no source text).

    - ``combine``: the binary elementwise op (by name, e.g. ``"add"``, ``"maximum"``) that
      folds the elements, in any order.
    - ``identity(dtype)``: the combine's neutral element as a value of ``dtype`` (the
      start of every partial result: 0 for ``add``, the lowest value for ``maximum``).
    - ``finalize``: what happens to the folded total: ``None`` (nothing) or ``"mean"``
      (divided by the number of elements reduced; an empty mean is 0/0, nan).
    - ``empty_ok``: whether reducing over an empty axis is allowed (giving the finalized
      identity) or an error, as for ``max`` (PyTorch's and NumPy's rule).
    - ``nan_propagates``: a nan among the elements makes the result nan (NumPy's rule; a
      backend folding by comparison must test for it).
    """

    combine: str
    identity: Callable[[Any], Any]
    finalize: str | None = None
    empty_ok: bool = True
    nan_propagates: bool = True


@dataclass(frozen=True, eq=False)
class OpDef:
    """A primitive op.

    - ``impl(*arrays_or_literals, **attrs) -> ndarray``: NumPy forward kernel.
    - ``infer(*avals_or_literals, **attrs) -> (shape, dtype)``: raises ``ValueError`` naming
      the shapes on bad input; an aval is anything with ``.shape`` and ``.dtype``.
    - ``vjp(ctx, g) -> tuple``: one gradient per input (``None`` where there is none),
      written with dualgraph ops. ``ctx.args`` holds the primal inputs listed in ``saves``
      (others are ``None``; literals are always there), ``ctx.out`` the primal output when
      ``saves_out``, ``ctx.inputs`` the input nodes (for shapes) and ``ctx.attrs``.
      ``saves_for`` (one entry per ``saves``): the input whose gradient needs that saved
      input (``None``: any), so eager saves, and version-checks, only what the VJP will
      read (PyTorch's rule: ``x * 2`` saves nothing, ``y += 1`` after it is fine).
      Gradients may come back in a broadcast shape or wider dtype: the autograd engine
      sums them back to each input's shape and casts to its dtype, for every op at once.
    - ``vjp_arrays(ctx, args, out, g) -> tuple | None``: optional, the same gradients
      with the same kernels on NumPy arrays (``args`` is ``ctx.args`` as arrays, ``out``
      the saved output array when ``saves_out``, ``g`` an array), for an eager backward
      that records nothing: no op, tensor or tape work per step of ``vjp``. ``None``
      back: use ``vjp``.
    - ``impl_keep(*arrays_or_literals, **attrs) -> (ndarray, kept)``: optional, ``impl``
      that also returns intermediate arrays ``vjp_arrays`` would otherwise compute again
      (a convolution's columns). Eager mode calls it instead of ``impl`` when it records
      the node and input ``keeps_for`` (``None``: any input) needs a gradient, and keeps
      them as ``ctx._kept`` (``None`` otherwise) until the node's saved values are
      released.
    - ``torch_name``: PyTorch's node name, or a function of the node giving it.
    - traits: ``elementwise`` (one output element from the same-index input elements,
      after broadcasting), ``commutative``, ``reduction`` (a `Reduction` spec, ``None``
      for other ops; its axes are the ``axis`` attribute), ``view`` (output aliases the
      input in eager mode; ``view_may_copy``: unless NumPy cannot view the input's layout
      that way, and copies, as ``reshape`` of a transposed array), ``contraction``
      (matmul-like: fusion may add an elementwise epilogue; ``contraction_bias``: input 0
      is a bias added to the product of inputs 1 and 2, which the backend folds into the
      epilogue), ``fusible`` (not elementwise
      but free inside a fused loop, e.g. a broadcast, which is index arithmetic),
      ``sums`` (the result is the sum of the inputs: an accumulation, as into ``.grad``),
      ``differentiable`` (False: the result never requires grad, whatever the inputs).
    - ``lengths(node, ins, follows) -> dims``: optional, which axes of the result carry a
      symbolic length from the operands' (`ops/lengths.py`); elementwise ops and
      reductions have their trait's rule, other ops without one take no symbolic length.

    How a backend runs an op is the backend's business: it looks its lowering up by
    ``name`` (for Numba, ``dualgraph/backend/numba/lowerings/``).
    """

    name: str
    impl: Callable[..., Any]
    infer: Callable[..., tuple]
    vjp: Callable[..., tuple] | None
    torch_name: str | Callable[[Any], str]
    saves: tuple[int, ...] = ()
    saves_out: bool = False
    saves_for: tuple[int | None, ...] | None = None
    elementwise: bool = False
    commutative: bool = False
    reduction: Reduction | None = None
    view: bool = False
    view_may_copy: bool = False
    contraction: bool = False
    contraction_bias: bool = False
    fusible: bool = False
    differentiable: bool = True
    sums: bool = False
    vjp_arrays: Callable[..., tuple | None] | None = None
    impl_keep: Callable[..., tuple] | None = None
    keeps_for: int | None = None
    lengths: Callable[..., tuple] | None = None

    @property
    def loop_fusible(self) -> bool:
        """Can be computed inside a fused elementwise loop."""
        return self.elementwise or self.fusible

    def node_name(self, node: Any) -> str:
        tn = self.torch_name
        return tn if isinstance(tn, str) else tn(node)

    def __repr__(self) -> str:
        return f"<OpDef {self.name}>"


def register(op: OpDef) -> OpDef:
    if op.name in OPS:
        raise ValueError(f"op {op.name!r} is already registered")
    if op.differentiable and op.vjp is None:
        raise ValueError(f"op {op.name!r} is differentiable but has no vjp rule")
    OPS[op.name] = op
    return op
