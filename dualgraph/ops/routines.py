"""Where eager mode's compiled forms of a few NumPy kernels are installed.

ops/ holds semantics only, with NumPy kernels as the reference; a layer that may compile
(`dualgraph.eager.routines`) installs here an object whose functions give those kernels'
bits on large operands in fewer passes:

- ``gelu_keep(x)`` and ``gelu_grad(g, x, erf1)``: `activation`'s ``_gelu_keep`` and
  ``_gelu_grad`` for C-contiguous float32 arrays (``g``, ``x`` and ``erf1`` of one shape);
- ``add_rows(out, vals, rows)``: `gather`'s ``np.add.at(out, rows, vals)`` of value rows
  in ``out``'s float dtype, C-ordered, rows in range and not negative.

The kernels use them from `FROM` elements; below, a call costs more than the passes it
saves. With nothing installed (``INSTALLED`` empty) every kernel runs its NumPy form.
"""

from __future__ import annotations

from typing import Any

FROM = 16384
INSTALLED: list[Any] = []


def for_size(n: int) -> Any:
    """The installed routines if an operand of ``n`` elements should use them, else None."""
    return INSTALLED[0] if INSTALLED and n >= FROM else None
