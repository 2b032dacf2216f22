"""Lookup tables: `Embedding` and `EmbeddingBag`."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...dtypes import as_dtype, default_float
from ...eager.grad_mode import no_grad
from ...eager.internal import array_of
from ...eager.tensor import Tensor, rng
from .. import functional as F
from .module import Module, Parameter

__all__ = ["Embedding", "EmbeddingBag"]


class Embedding(Module):
    """A lookup table: ``Embedding(num_embeddings, embedding_dim)(idx)`` is
    ``weight[idx]``. Initialised like PyTorch: N(0, 1), row ``padding_idx`` zero (and it
    gets no gradient). ``sparse=True`` gives the same gradient as a dense tensor
    (PyTorch's sparse gradient, densified), which `optim.SparseAdam` updates row by row."""

    def __init__(self, num_embeddings: int, embedding_dim: int,
                 padding_idx: int | None = None, max_norm: float | None = None,
                 norm_type: float = 2.0, scale_grad_by_freq: bool = False,
                 sparse: bool = False, _weight: Any = None, _freeze: bool = False,
                 device: Any = None, dtype: Any = None) -> None:
        if scale_grad_by_freq:
            raise NotImplementedError("Embedding: scale_grad_by_freq is not supported")
        super().__init__()
        self.num_embeddings = num_embeddings
        self.embedding_dim = embedding_dim
        self.max_norm, self.norm_type = max_norm, norm_type
        self.scale_grad_by_freq, self.sparse = scale_grad_by_freq, sparse
        if padding_idx is not None:
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise AssertionError("Padding_idx must be within num_embeddings")
            padding_idx %= num_embeddings
        self.padding_idx = padding_idx
        if _weight is None:
            w = rng().standard_normal((num_embeddings, embedding_dim)).astype(default_float())
            if padding_idx is not None:
                w[padding_idx] = 0.0
        else:
            w = array_of(_weight) if isinstance(_weight, Tensor) else np.asarray(_weight)
        if dtype is not None:
            w = w.astype(as_dtype(dtype))
        self.weight = Parameter(w, requires_grad=not _freeze)

    @classmethod
    def from_pretrained(cls, embeddings: Any, freeze: bool = True,
                        padding_idx: int | None = None, max_norm: float | None = None,
                        norm_type: float = 2.0, scale_grad_by_freq: bool = False,
                        sparse: bool = False) -> Embedding:
        """An embedding holding the 2-D ``embeddings`` (a copy), frozen unless told."""
        if len(tuple(embeddings.shape)) != 2:
            raise AssertionError("Embeddings parameter is expected to be 2-dimensional")
        rows, cols = embeddings.shape
        w = np.array(array_of(embeddings) if isinstance(embeddings, Tensor) else embeddings)
        return cls(rows, cols, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse,
                   _weight=w, _freeze=freeze)

    def reset_parameters(self) -> None:
        """Draw the weight again from N(0, 1), the padding row zero."""
        _reset_normal(self)

    def forward(self, x: Any) -> Any:
        return F.embedding(x, self.weight, self.padding_idx, self.max_norm, self.norm_type)

    def extra_repr(self) -> str:
        pad = f", padding_idx={self.padding_idx}" if self.padding_idx is not None else ""
        norm = f", max_norm={self.max_norm}" if self.max_norm is not None else ""
        if self.norm_type != 2:
            norm += f", norm_type={self.norm_type}"
        return f"{self.num_embeddings}, {self.embedding_dim}{pad}{norm}"


def _reset_normal(module: Module) -> None:
    from .. import init

    init.normal_(module.weight)
    if module.padding_idx is not None:
        with no_grad():
            module.weight[module.padding_idx] = 0.0


class EmbeddingBag(Module):
    """``EmbeddingBag(num_embeddings, embedding_dim, max_norm=None, norm_type=2.0,
    scale_grad_by_freq=False, mode='mean', sparse=False, _weight=None,
    include_last_offset=False, padding_idx=None)``: `F.embedding_bag` over a weight
    initialised N(0, 1); ``forward(input, offsets=None, per_sample_weights=None)``."""

    def __init__(self, num_embeddings: int, embedding_dim: int, max_norm: float | None = None,
                 norm_type: float = 2.0, scale_grad_by_freq: bool = False, mode: str = "mean",
                 sparse: bool = False, _weight: Any = None, include_last_offset: bool = False,
                 padding_idx: int | None = None, device: Any = None, dtype: Any = None) -> None:
        super().__init__()
        if max_norm is not None or scale_grad_by_freq:
            raise NotImplementedError("EmbeddingBag: max_norm and scale_grad_by_freq are not "
                                      "supported")
        self.sparse = sparse
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.mode, self.include_last_offset = mode, include_last_offset
        if padding_idx is not None:
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise AssertionError("padding_idx must be within num_embeddings")
            padding_idx %= num_embeddings
        self.padding_idx = padding_idx
        dt = default_float() if dtype is None else np.dtype(dtype)
        if _weight is None:
            w = rng().standard_normal((num_embeddings, embedding_dim)).astype(dt)
            if padding_idx is not None:
                w[padding_idx] = 0.0
        else:
            w = np.array(_weight.numpy() if hasattr(_weight, "numpy") else _weight)
        self.weight = Parameter(w)

    @classmethod
    def from_pretrained(cls, embeddings: Any, freeze: bool = True,
                        max_norm: float | None = None, norm_type: float = 2.0,
                        scale_grad_by_freq: bool = False, mode: str = "mean",
                        sparse: bool = False, include_last_offset: bool = False,
                        padding_idx: int | None = None) -> EmbeddingBag:
        """A bag over the 2-D ``embeddings`` (a copy), frozen unless told.
        ``nn.EmbeddingBag.from_pretrained(vectors, mode="sum")``"""
        if len(tuple(embeddings.shape)) != 2:
            raise AssertionError("Embeddings parameter is expected to be 2-dimensional")
        rows, cols = embeddings.shape
        w = np.array(array_of(embeddings) if isinstance(embeddings, Tensor) else embeddings)
        bag = cls(rows, cols, max_norm, norm_type, scale_grad_by_freq, mode, sparse, _weight=w,
                  include_last_offset=include_last_offset, padding_idx=padding_idx)
        bag.weight.requires_grad_(not freeze)
        return bag

    def reset_parameters(self) -> None:
        """Draw the weight again from N(0, 1), the padding row zero."""
        _reset_normal(self)

    def forward(self, input: Any, offsets: Any = None,  # noqa: A002
                per_sample_weights: Any = None) -> Any:
        return F.embedding_bag(input, self.weight, offsets, mode=self.mode,
                               per_sample_weights=per_sample_weights,
                               include_last_offset=self.include_last_offset,
                               padding_idx=self.padding_idx)

    def extra_repr(self) -> str:
        pad = f", padding_idx={self.padding_idx}" if self.padding_idx is not None else ""
        return f"{self.num_embeddings}, {self.embedding_dim}, mode='{self.mode}'{pad}"
