"""`Flatten` and `Unflatten`."""

from __future__ import annotations

import math
from typing import Any

from .module import Module

__all__ = ["Flatten", "Unflatten"]


class Flatten(Module):
    """Flatten dims ``start_dim..end_dim`` into one (a reshape). ``nn.Flatten()``"""

    def __init__(self, start_dim: int = 1, end_dim: int = -1) -> None:
        super().__init__()
        self.start_dim = start_dim
        self.end_dim = end_dim

    def forward(self, x: Any) -> Any:
        from ...ops.broadcast import normalize_dim

        shape = tuple(x.shape)
        n = max(len(shape), 1)
        s = normalize_dim("flatten", self.start_dim, n)
        e = normalize_dim("flatten", self.end_dim, n)
        if s > e:
            raise RuntimeError("flatten() has invalid args: start_dim cannot come after "
                               "end_dim")
        if not shape:
            return x.reshape(1)
        return x.reshape(shape[:s] + (math.prod(shape[s:e + 1]),) + shape[e + 1:])

    def extra_repr(self) -> str:
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    """Split dim ``dim`` into ``unflattened_size`` (one entry may be -1).
    ``nn.Unflatten(1, (2, 3))``"""

    def __init__(self, dim: int, unflattened_size: Any) -> None:
        super().__init__()
        self.dim = dim
        self.unflattened_size = tuple(unflattened_size)

    def forward(self, x: Any) -> Any:
        from ...ops.broadcast import normalize_dim

        shape = tuple(x.shape)
        d = normalize_dim("unflatten", self.dim, len(shape))
        sizes = list(self.unflattened_size)
        if sizes.count(-1) > 1:
            raise RuntimeError("unflatten: only one dimension can be inferred")
        known = math.prod(s for s in sizes if s != -1)
        if -1 in sizes and known and shape[d] % known == 0:
            sizes[sizes.index(-1)] = shape[d] // known
        if -1 in sizes or math.prod(sizes) != shape[d]:
            raise RuntimeError(f"unflatten: Provided sizes {list(self.unflattened_size)} don't "
                               f"multiply up to the size of dim {self.dim} ({shape[d]}) in the "
                               f"input tensor")
        return x.reshape(shape[:d] + tuple(sizes) + shape[d + 1:])

    def extra_repr(self) -> str:
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"
