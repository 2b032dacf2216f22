"""The op registry: one `OpDef` per primitive, the single source of truth for every mode.

An entry carries the IR name, PyTorch's autograd node name, the NumPy kernel (reference
semantics), the shape/dtype rule (the source of clear errors), the VJP rule written in
dualgraph ops (so it can be traced and differentiated again), traits that passes and
backends read, and room for the Numba backend's lowering.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

OPS: dict[str, "OpDef"] = {}


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
      Gradients may come back in a broadcast shape or wider dtype: the autograd engine
      sums them back to each input's shape and casts to its dtype, for every op at once.
    - ``torch_name``: PyTorch's node name, or a function of the node giving it.
    - traits: ``elementwise`` (one output element from the same-index input elements,
      after broadcasting), ``commutative``, ``reduction``, ``view`` (output aliases the
      input in eager mode), ``contraction`` (matmul-like: fusion may add an elementwise
      epilogue; ``contraction_bias``: input 0 is a bias added to the product of inputs 1
      and 2, which the backend folds into the epilogue), ``fusible`` (not elementwise
      but free inside a fused loop, e.g. a broadcast, which is index arithmetic).
    - ``scalar``: for elementwise ops, a scalar expression template (``"({0} * {1})"``)
      for the Numba backend, with ``{zero}``, ``{one}``, ``{half}`` standing for constants
      of the node's dtype (a float64 literal would promote a float32 loop) and ``{exp}``,
      ``{tanh}``, ``{sigmoid}`` for the backend's math functions of that dtype. It must
      propagate nan like the NumPy kernel. For reductions, the combining operator: ``+``,
      ``+/n`` (a sum divided by the count) or ``max``.
    - ``lower(node, args, out, ishape) -> lines``: Numba source computing the other ops
      (shape ops, contractions) into variable ``out``; ``ishape(node)`` is the shape the
      backend stores a value with (0-d values as shape ``(1,)``).
    """

    name: str
    impl: Callable[..., Any]
    infer: Callable[..., tuple]
    vjp: Callable[..., tuple] | None
    torch_name: str | Callable[[Any], str]
    saves: tuple[int, ...] = ()
    saves_out: bool = False
    elementwise: bool = False
    commutative: bool = False
    reduction: bool = False
    view: bool = False
    contraction: bool = False
    contraction_bias: bool = False
    fusible: bool = False
    differentiable: bool = True
    scalar: str | None = None
    lower: Callable[..., Any] | None = None

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
